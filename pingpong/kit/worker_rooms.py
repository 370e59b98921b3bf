"""Rooms that span a server's worker processes (servers/workers/*.py): each worker relays a message to its own
members of the room at once and PUBLISHes it to the room's Redis channel; every other worker, subscribed to every
room's channel by pattern (socket.io's Redis adapter's scheme), delivers it to its own members.

With one worker and no broker it is the plain in-process relay of the single-process servers. Each worker counts
what it relayed, and the members that joined each room here (so a pair's placement, one worker or two, can be read
back), and writes the counts to WORKER_STATS_DIR_ENV's folder once it serves and again when it stops.
"""

from __future__ import annotations

import json
import os
from typing import Any, Awaitable, Callable

from pingpong.contract import BROKER_CHANNEL_PREFIX, WORKER_STATS_DIR_ENV

# What a worker counts (and writes): deliveries to its members of messages from its own members; messages it
# published; deliveries to its members of messages published by another worker; its own messages coming back.
WORKER_COUNTS = ("relayed_local", "published", "delivered_from_broker", "own_from_broker")
TEXT, BINARY = b"t", b"b"

Send = Callable[[Any, "str | bytes"], Awaitable[None]]


def encode(origin: bytes, message: str | bytes) -> bytes:
    """The bytes published for a message: origin, kind and the message's own bytes (contract.BROKER_CHANNEL_PREFIX)."""
    if isinstance(message, str):
        return origin + b":" + TEXT + b":" + message.encode()
    return origin + b":" + BINARY + b":" + bytes(message)


def decode(published: bytes) -> tuple[bytes, str | bytes]:
    """(origin, message) of what encode() published; a text message comes back as str."""
    origin, kind, data = published.split(b":", 2)
    return origin, data.decode() if kind == TEXT else data


class WorkerRooms:
    """One worker's members per room, joined to the other workers' through the broker at broker_url (None: alone).

    send(member, message) sends a str (a text frame) or bytes (a binary frame) with the framework's call.
    """

    def __init__(self, broker_url: str | None, send: Send) -> None:
        self.broker_url = broker_url
        self.send = send
        self.members: dict[str, set] = {}
        self.origin = str(os.getpid()).encode()
        self.counts = dict.fromkeys(WORKER_COUNTS, 0)
        self.joined_per_room: dict[str, int] = {}  # members that joined each room on this worker, ever
        self._publisher = None
        self._pubsub = None
        self._listener = None

    async def start(self) -> None:
        """Connect to the broker and subscribe to every room's channel before the worker serves (so no message
        published after its first handshake can miss it). serving() then says the worker serves."""
        if self.broker_url:
            import asyncio

            import redis.asyncio as redis

            self._publisher = redis.from_url(self.broker_url)
            self._pubsub = self._publisher.pubsub(ignore_subscribe_messages=True)
            await self._pubsub.psubscribe(BROKER_CHANNEL_PREFIX + "*")
            self._listener = asyncio.get_running_loop().create_task(self._deliver_published())

    def serving(self) -> None:
        """Say, in the stats file, that this worker serves: the orchestrator waits for every worker's."""
        self.write_counts(final=False)

    async def stop(self) -> None:
        """Stop listening, close the broker's connections, write the final counts."""
        if self._listener is not None:
            self._listener.cancel()
            try:
                await self._listener
            except BaseException:  # noqa: BLE001 - cancelled, or the broker went first: the counts still get written
                pass
        for connection in (self._pubsub, self._publisher):
            if connection is not None:
                try:
                    await connection.aclose()
                except Exception:  # noqa: BLE001 - the broker is already gone at shutdown
                    pass
        self.write_counts(final=True)

    def join(self, room: str, member) -> set:
        members = self.members.setdefault(room, set())
        members.add(member)
        self.joined_per_room[room] = self.joined_per_room.get(room, 0) + 1
        return members

    def leave(self, room: str, member) -> None:
        members = self.members.get(room)
        if members is not None:
            members.discard(member)

    async def relay(self, room: str, sender, message: str | bytes) -> None:
        """Send a member's message to the room's other members here, then to the other workers' via the broker."""
        for other in tuple(self.members.get(room, ())):
            if other is not sender:
                await self.send(other, message)
                self.counts["relayed_local"] += 1
        if self._publisher is not None:
            await self._publisher.publish(BROKER_CHANNEL_PREFIX + room, encode(self.origin, message))
            self.counts["published"] += 1

    async def _deliver_published(self) -> None:
        prefix = len(BROKER_CHANNEL_PREFIX)
        async for published in self._pubsub.listen():
            if published["type"] != "pmessage":
                continue
            origin, message = decode(published["data"])
            if origin == self.origin:
                self.counts["own_from_broker"] += 1
                continue
            for member in tuple(self.members.get(published["channel"][prefix:].decode(), ())):
                try:
                    await self.send(member, message)
                except Exception:  # noqa: BLE001 - a member closing meanwhile: its handler removes it
                    continue
                self.counts["delivered_from_broker"] += 1

    def write_counts(self, final: bool) -> None:
        """The counts, atomically, as WORKER_STATS_DIR_ENV/worker-<pid>.json (a no-op without the variable)."""
        folder = os.environ.get(WORKER_STATS_DIR_ENV)
        if not folder:
            return
        path = os.path.join(folder, f"worker-{os.getpid()}.json")
        record = {"pid": os.getpid(), "final": final, "broker": bool(self.broker_url), **self.counts,
                  "joined_per_room": self.joined_per_room}
        temporary = f"{path}.tmp"
        with open(temporary, "w") as file:
            json.dump(record, file)
        os.replace(temporary, path)
