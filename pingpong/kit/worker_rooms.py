"""Rooms that span a server's worker processes (servers/workers/*.py), crossing workers only when they must: each
worker relays a message to its own members of the room at once, and PUBLISHes it to the room's Redis channel only
when another worker has a member there; a worker SUBSCRIBEs a room's channel only while it has a member in the
room (socket.io's sharded adapter's dynamic subscriptions). Which workers have members in each room is kept exact
by the presence protocol of contract.py (BROKER_WORKERS_KEY_PREFIX): a set per room in Redis, joined atomically with
a notice on a control channel, and a join that is complete only once every worker that must publish to the
newcomer has acknowledged it.

A server holds a room with `await enter(room)` before it answers the member's handshake (the join on the broker,
when this worker had no member there), adds the member with `join(room, member)` once the handshake is answered,
and gives both back with `await leave(room, member)` (member None when the handshake never completed).

With one worker and no broker it is the plain in-process relay of the single-process servers. Each worker counts
what it relayed and published, the subscribers each PUBLISH reached, and the members that joined and the messages
it published in each room (so a pair's placement, one worker or two, and what its pairs cost the broker can be read
back), and writes the counts to WORKER_STATS_DIR_ENV's folder once it serves and again when it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from typing import Any, AsyncIterator, Awaitable, Callable

from pingpong.contract import (BROKER_CHANNEL_PREFIX, BROKER_PRESENCE_CHANNEL, BROKER_WORKER_CHANNEL_PREFIX,
                               BROKER_WORKERS_KEY_PREFIX, WORKER_STATS_DIR_ENV)

# What a worker counts (and writes): deliveries to its members of messages from its own members; messages it
# published; the subscribers those PUBLISHes reached (PUBLISH's reply, this worker included: the deliveries the
# broker made); deliveries to its members of messages published by another worker; its own messages coming back;
# rooms it joined and left on the broker; acknowledgements it sent; joins that stopped waiting for one.
WORKER_COUNTS = ("relayed_local", "published", "publish_deliveries", "delivered_from_broker", "own_from_broker",
                 "broker_joins", "broker_leaves", "acks_sent", "ack_timeouts")
TEXT, BINARY = b"t", b"b"
JOIN, LEAVE = b"j", b"l"
# A join waits this long for each acknowledgement, then completes anyway (said on stderr, counted): only a worker
# that died with members in the room fails to answer, and a stalled handshake is worse than a late notice.
ACK_TIMEOUT_S = 5.0

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


class PendingJoin:
    """This worker's join of a room on the broker, until it is complete: the set's members when it joined (the
    snapshot), the notices about the room that came after its own (applied on top of the snapshot), and the
    workers whose acknowledgement it waits for."""

    def __init__(self, nonce: bytes) -> None:
        self.nonce = nonce
        self.own_notice_seen = False
        self.later_notices: list[tuple[bytes, bytes]] = []  # (JOIN or LEAVE, worker), in the channel's order
        self.snapshot: set[bytes] | None = None
        self.acknowledged: set[bytes] = set()
        self.changed = asyncio.Event()


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
        self.published_per_room: dict[str, int] = {}  # messages this worker published in each room, ever
        self.holds: dict[str, int] = {}  # members entering or in each room here
        self.others: dict[str, set[bytes]] = {}  # rooms joined on the broker: the other workers with members there
        self._pending: dict[str, PendingJoin] = {}
        self._locks: dict[str, list] = {}  # room: [its asyncio.Lock, its users]
        self._confirmations: dict[tuple[bytes, bytes], asyncio.Future] = {}
        self._acks: set[asyncio.Task] = set()
        self._changes: set[asyncio.Task] = set()  # joins and leaves on the broker under way (_unless_interrupted)
        self._leaving: set[str] = set()  # rooms whose leave has not yet been told to the broker
        self._nonces = 0
        self.own_port: int | None = None  # --worker-ports: the port only this worker listens on
        self._publisher = None
        self._pubsub = None
        self._listener = None

    # ---- life ----------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the broker and subscribe to the presence channel and this worker's own channel before the
        worker serves. serving() then says the worker serves."""
        if self.broker_url:
            import redis.asyncio as redis

            self._publisher = redis.from_url(self.broker_url)
            self._pubsub = self._publisher.pubsub()
            channels = (BROKER_PRESENCE_CHANNEL.encode(), self._worker_channel(self.origin))
            confirmed = [self._expect(b"subscribe", channel) for channel in channels]
            await self._pubsub.subscribe(*channels)
            self._listener = asyncio.get_running_loop().create_task(self._listen())
            await asyncio.wait_for(asyncio.gather(*confirmed), ACK_TIMEOUT_S)

    def serving(self) -> None:
        """Say, in the stats file, that this worker serves: the orchestrator waits for every worker's."""
        self.write_counts(final=False)

    async def stop(self) -> None:
        """Let the joins and leaves under way end (a join waits at most ACK_TIMEOUT_S for its subscription and as
        long for its acknowledgements), cancel what is left of them, leave every room still joined or being joined
        on the broker, stop listening, close the broker's connections, write the final counts."""
        if self._changes:  # joins and leaves whose callers were cancelled: let them end first
            await asyncio.wait(set(self._changes), timeout=2 * ACK_TIMEOUT_S + 1)
            for change in set(self._changes):
                change.cancel()
        # a join or leave cut short may have left this worker in the room's set
        rooms = set(self.others) | set(self._pending) | self._leaving
        if self._publisher is not None and rooms:
            try:
                async with self._publisher.pipeline(transaction=True) as pipe:
                    for room in rooms:
                        pipe.srem(BROKER_WORKERS_KEY_PREFIX + room, self.origin)
                        pipe.publish(BROKER_PRESENCE_CHANNEL, self._notice(LEAVE, room))
                    await pipe.execute()
                self.counts["broker_leaves"] += len(self.others)
            except Exception:  # noqa: BLE001 - the broker is already gone at shutdown
                pass
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

    # ---- members -------------------------------------------------------------------------------------------------

    async def enter(self, room: str) -> None:
        """Hold the room for a member whose handshake is about to be answered; the first hold joins the room on the
        broker and returns once every worker that must publish to this one knows it has a member there."""
        self.holds[room] = self.holds.get(room, 0) + 1
        if self._publisher is None:
            return
        try:
            await self._unless_interrupted(self._join_broker_when_first(room))
        except BaseException:
            await self.leave(room, None)
            raise

    def join(self, room: str, member) -> set:
        """Add a member (its handshake answered, its room held by enter()) to the room here."""
        members = self.members.setdefault(room, set())
        members.add(member)
        self.joined_per_room[room] = self.joined_per_room.get(room, 0) + 1
        return members

    async def leave(self, room: str, member) -> None:
        """Remove a member (None: a hold whose handshake never completed); the last one leaves the room on the
        broker."""
        members = self.members.get(room)
        if members is not None and member is not None:
            members.discard(member)
            if not members:
                del self.members[room]
        held = self.holds.get(room, 0) - 1
        if held > 0:
            self.holds[room] = held
            return
        self.holds.pop(room, None)
        if self._publisher is None:
            return
        await self._unless_interrupted(self._leave_broker_when_last(room))

    async def _join_broker_when_first(self, room: str) -> None:
        async with self._room_lock(room):
            if room not in self.others and self.holds.get(room):
                await self._join_broker(room)

    async def _leave_broker_when_last(self, room: str) -> None:
        async with self._room_lock(room):
            if room in self.others and not self.holds.get(room):
                await self._leave_broker(room)

    async def _unless_interrupted(self, change: Awaitable[None]) -> None:
        """Run a join or leave on the broker to its end even when the caller is cancelled meanwhile (Sanic cancels a
        websocket handler when its connection is lost, which may come while the handler's `finally` is leaving):
        one cut short would leave the room's set and channel on the broker, or a subscription without the set."""
        task = asyncio.get_running_loop().create_task(change)
        self._changes.add(task)
        task.add_done_callback(self._change_done)
        await asyncio.shield(task)

    def _change_done(self, task: asyncio.Task) -> None:
        """A join or leave ended: say on stderr when it failed, since a cancelled caller no longer hears of it."""
        self._changes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            print(f"worker {self.origin.decode()}: a join or leave on the broker failed: {task.exception()!r}",
                  file=sys.stderr)

    async def relay(self, room: str, sender, message: str | bytes) -> None:
        """Send a member's message to the room's other members here, then, when another worker has members there,
        to theirs via the broker."""
        for other in tuple(self.members.get(room, ())):
            if other is not sender:
                await self.send(other, message)
                self.counts["relayed_local"] += 1
        if self.others.get(room):
            reached = await self._publisher.publish(BROKER_CHANNEL_PREFIX + room, encode(self.origin, message))
            self.counts["published"] += 1
            self.counts["publish_deliveries"] += reached
            self.published_per_room[room] = self.published_per_room.get(room, 0) + 1

    # ---- the presence protocol (contract.BROKER_WORKERS_KEY_PREFIX) ----------------------------------------------

    async def _join_broker(self, room: str) -> None:
        self._nonces += 1
        pending = self._pending[room] = PendingJoin(str(self._nonces).encode())
        channel = (BROKER_CHANNEL_PREFIX + room).encode()
        try:
            subscribed = self._expect(b"subscribe", channel)
            await self._pubsub.subscribe(channel)
            await asyncio.wait_for(subscribed, ACK_TIMEOUT_S)
            async with self._publisher.pipeline(transaction=True) as pipe:
                pipe.sadd(BROKER_WORKERS_KEY_PREFIX + room, self.origin)
                pipe.smembers(BROKER_WORKERS_KEY_PREFIX + room)
                pipe.publish(BROKER_PRESENCE_CHANNEL, self._notice(JOIN, room, pending.nonce))
                _, snapshot, _ = await pipe.execute()
            pending.snapshot = set(snapshot)
            pending.changed.set()
            await self._acknowledged_by_all(room, pending)
            others = pending.snapshot - {self.origin}
            for kind, worker in pending.later_notices:
                (others.add if kind == JOIN else others.discard)(worker)
            self.others[room] = others
            self.counts["broker_joins"] += 1
        finally:
            del self._pending[room]

    async def _acknowledged_by_all(self, room: str, pending: PendingJoin) -> None:
        """Wait until this worker has seen its own notice and every other worker of the snapshot acknowledged it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ACK_TIMEOUT_S
        while not (pending.own_notice_seen and pending.snapshot - {self.origin} <= pending.acknowledged):
            pending.changed.clear()
            try:
                await asyncio.wait_for(pending.changed.wait(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                missing = sorted(pending.snapshot - {self.origin} - pending.acknowledged)
                print(f"worker {self.origin.decode()}: room {room!r} joined without the acknowledgement of "
                      f"{[worker.decode() for worker in missing]} after {ACK_TIMEOUT_S} s", file=sys.stderr)
                self.counts["ack_timeouts"] += 1
                return

    async def _leave_broker(self, room: str) -> None:
        del self.others[room]
        self._leaving.add(room)
        try:
            async with self._publisher.pipeline(transaction=True) as pipe:
                pipe.srem(BROKER_WORKERS_KEY_PREFIX + room, self.origin)
                pipe.publish(BROKER_PRESENCE_CHANNEL, self._notice(LEAVE, room))
                await pipe.execute()
        finally:
            self._leaving.discard(room)
        channel = (BROKER_CHANNEL_PREFIX + room).encode()
        unsubscribed = self._expect(b"unsubscribe", channel)
        await self._pubsub.unsubscribe(channel)
        await asyncio.wait_for(unsubscribed, ACK_TIMEOUT_S)
        self.counts["broker_leaves"] += 1

    def _presence(self, notice: bytes) -> None:
        """A notice on the presence channel: apply it to the room's other workers (or to a pending join's later
        notices), and acknowledge every other worker's join to that worker."""
        kind, worker, nonce, room_bytes = notice.split(b":", 3)
        room = room_bytes.decode()
        pending = self._pending.get(room)
        if worker == self.origin:
            if pending is not None and kind == JOIN and nonce == pending.nonce:
                pending.own_notice_seen = True
                pending.changed.set()
            return
        if pending is not None:
            if pending.own_notice_seen:
                pending.later_notices.append((kind, worker))
        elif room in self.others:
            (self.others[room].add if kind == JOIN else self.others[room].discard)(worker)
        if kind == JOIN:
            task = asyncio.get_running_loop().create_task(
                self._publisher.publish(self._worker_channel(worker), self.origin + b":" + nonce + b":" + room_bytes))
            self._acks.add(task)
            task.add_done_callback(self._acks.discard)
            self.counts["acks_sent"] += 1

    def _acknowledgement(self, ack: bytes) -> None:
        worker, nonce, room_bytes = ack.split(b":", 2)
        pending = self._pending.get(room_bytes.decode())
        if pending is not None and pending.nonce == nonce:
            pending.acknowledged.add(worker)
            pending.changed.set()

    def _notice(self, kind: bytes, room: str, nonce: bytes = b"") -> bytes:
        return kind + b":" + self.origin + b":" + nonce + b":" + room.encode()

    @staticmethod
    def _worker_channel(worker: bytes) -> bytes:
        return BROKER_WORKER_CHANNEL_PREFIX.encode() + worker

    def _expect(self, kind: bytes, channel: bytes) -> asyncio.Future:
        """A future the listener resolves when the broker confirms kind (subscribe, unsubscribe) for channel."""
        future = asyncio.get_running_loop().create_future()
        self._confirmations[(kind, channel)] = future
        return future

    @contextlib.asynccontextmanager
    async def _room_lock(self, room: str) -> AsyncIterator[None]:
        """One join or leave of a room on the broker at a time (the lock is dropped when nobody holds or awaits it)."""
        entry = self._locks.setdefault(room, [asyncio.Lock(), 0])
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self._locks[room]

    async def _listen(self) -> None:
        prefix = len(BROKER_CHANNEL_PREFIX)
        presence = BROKER_PRESENCE_CHANNEL.encode()
        own_channel = self._worker_channel(self.origin)
        async for published in self._pubsub.listen():
            kind, channel = published["type"], published["channel"]
            if kind in ("subscribe", "unsubscribe"):
                future = self._confirmations.pop((kind.encode(), channel), None)
                if future is not None and not future.done():
                    future.set_result(None)
                continue
            if kind != "message":
                continue
            if channel == presence:
                self._presence(published["data"])
                continue
            if channel == own_channel:
                self._acknowledgement(published["data"])
                continue
            origin, message = decode(published["data"])
            if origin == self.origin:
                self.counts["own_from_broker"] += 1
                continue
            for member in tuple(self.members.get(channel[prefix:].decode(), ())):
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
                  "joined_per_room": self.joined_per_room, "published_per_room": self.published_per_room,
                  "own_port": self.own_port}
        temporary = f"{path}.tmp"
        with open(temporary, "w") as file:
            json.dump(record, file)
        os.replace(temporary, path)
