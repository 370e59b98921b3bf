"""The broadcast workload: one sender, its every message relayed to many receivers, acknowledged before the next.

Receivers may sit in other processes (--broadcast-role receivers), which acknowledge every message on a pipe.
node/driver/broadcast.js is the Node.js twin of this module.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from array import array
from typing import Any, Callable

from pingpong.contract import ACK_FD_ENV, WINDOW_END_EVENT, WINDOW_START_EVENT
from pingpong.kit.driver.core import (Connection, DriverError, OpenConnection, Progress, WindowEvents, encode_histogram,
                                      mismatch, one_line, open_in_bulk, running_loop_name, watched)
from pingpong.kit.payloads import PING, PONG, make_payload

ECHO_TO_SENDER = "payload mismatch: the sender received a message (the server echoed it back)"
ACK_BYTE = b"a"


async def measure(open_connection: OpenConnection, args: argparse.Namespace) -> dict[str, Any]:
    """--workload broadcast: a sender S and receivers all in the URL's room; the server relays S's every message
    to all of them. S sends message k once every receiver (local, and in the other processes, by their acks)
    has message k-1. A receivers process only receives, acknowledges, and ends at the end marker (the pong).
    """
    ping = make_payload(args.payload_kind, args.payload_size, PING)
    pong = make_payload(args.payload_kind, args.payload_size, PONG)
    sending = args.broadcast_role == "sender"
    ack_fd = ack_fd_from_environment(args)
    progress = Progress()

    def acknowledge() -> None:
        progress.window_roundtrips += 1
        if ack_fd is not None:
            os.write(ack_fd, ACK_BYTE)  # one byte: a pipe write this small is atomic among the processes

    tally = BroadcastTally(args.receivers, args.ack_processes, None if sending else acknowledge)
    loop = asyncio.get_running_loop()
    async with watched(progress, args.stall_timeout) as opened:
        sender = opened.connection(await open_connection(args.url, args)) if sending else None
        progress.phase = "receivers-connecting"
        failure = await open_in_bulk(open_connection, args.url, args, args.receivers, opened.bulk, progress)
        if failure is not None:
            raise DriverError(f"broadcast receivers: opened {len(opened.bulk)} of {args.receivers}: "
                              f"{one_line(failure)}")
        progress.phase = "connecting"
        receivers = list(opened.bulk)
        for index, receiver in enumerate(receivers):
            opened.task(asyncio.create_task(_receive_broadcast(index, receiver, ping, pong, tally)))
        if sender is not None:
            opened.task(asyncio.create_task(_expect_silence(sender, tally)))
        if sending and ack_fd is not None:
            os.set_blocking(ack_fd, False)
            loop.add_reader(ack_fd, _read_acks, ack_fd, tally)
        try:
            WindowEvents().ready_then_wait_for_go()
            if sending:
                result = await _broadcast_send(sender, ping, pong, tally, args, progress)
            else:
                progress.phase = "receiving"
                await tally.until(tally.all_ended)
                if tally.error is not None:
                    raise tally.error
                progress.phase = "report"
                result = _receivers_report(tally, args)
        finally:
            if sending and ack_fd is not None:
                loop.remove_reader(ack_fd)
    result["connections"] = broadcast_connections(sender, receivers)
    result["connections_total"] = len(receivers) + (sender is not None)
    result["loop"] = running_loop_name()
    return result


class BroadcastTally:
    """This process's receivers: per message k, when the first and the last of them got it; and the wait for
    "every local receiver has message k and K ack bytes per message arrived" (sender) or "all saw the end".

    Each receiver gets the messages in order, so the first receiver to get k already had k-1: first_ns and
    last_ns grow in message order by appending, and complete is how many messages every receiver has.
    """

    def __init__(self, receivers: int, ack_processes: int, on_complete: Callable[[], None] | None) -> None:
        self.receivers = receivers
        self.ack_processes = ack_processes
        self.on_complete = on_complete
        self.counts = [0] * receivers
        self.arrived = array("l")
        self.first_ns = array("q")
        self.last_ns = array("q")
        self.complete = 0
        self.ended = 0
        self.acks = 0
        self.target = 0
        self.error: BaseException | None = None
        self.waiter: asyncio.Future | None = None
        self.condition: Callable[[], bool] | None = None

    def got(self, receiver: int, now_ns: int) -> None:
        index = self.counts[receiver]
        self.counts[receiver] = index + 1
        if index == len(self.arrived):
            self.arrived.append(1)
            self.first_ns.append(now_ns)
        else:
            self.arrived[index] += 1
        if self.arrived[index] == self.receivers:
            self.last_ns.append(now_ns)
            self.complete = index + 1
            if self.on_complete is not None:
                self.on_complete()
            self.wake()

    def end(self, receiver: int) -> None:
        self.ended += 1
        if self.ended == self.receivers and len(set(self.counts)) > 1:
            self.fail(DriverError(f"broadcast: the receivers got different numbers of messages before the end "
                                  f"marker (from {min(self.counts)} to {max(self.counts)})"))
        self.wake()

    def acked(self, count: int) -> None:
        self.acks += count
        self.wake()

    def fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(error)

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done() and self.condition():
            waiter.set_result(None)

    def delivered(self) -> bool:
        """Message target-1 reached every local receiver and every receivers process acknowledged it."""
        return self.complete >= self.target and self.acks >= self.ack_processes * self.target

    def all_ended(self) -> bool:
        return self.ended == self.receivers

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait until condition holds, or raise the first error a receiver (or the ack pipe) reported."""
        if self.error is not None:
            raise self.error
        if condition():
            return
        self.condition = condition
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None
            self.condition = None

    async def delivered_until(self, messages: int) -> None:
        self.target = messages
        await self.until(self.delivered)


async def _receive_broadcast(index: int, connection: Connection, ping: Any, pong: Any, tally: BroadcastTally) -> None:
    """One receiver: every ping is the next message, the pong ends the run; anything else fails it."""
    recv, clock, got = connection.recv, time.monotonic_ns, tally.got
    try:
        while True:
            received = await recv()
            if received == ping:
                got(index, clock())
            elif received == pong:
                tally.end(index)
                return
            else:
                raise DriverError(mismatch(f"R{index}", ping, received))
    except Exception as exc:  # handed to whoever waits on the tally: a task's own exception nobody would read
        tally.fail(exc)


async def _expect_silence(sender: Connection, tally: BroadcastTally) -> None:
    """The sender connection must receive nothing: the server relays to every other member, never back."""
    try:
        await sender.recv()
    except Exception as exc:
        tally.fail(exc)
        return
    tally.fail(DriverError(ECHO_TO_SENDER))


def ack_fd_from_environment(args: argparse.Namespace) -> int | None:
    """The ack pipe's end this process uses (sender: read end, receivers process: write end), or None."""
    value = os.environ.get(ACK_FD_ENV)
    if args.broadcast_role == "sender" and args.ack_processes and not value:
        raise DriverError(f"broadcast: --ack-processes {args.ack_processes} needs {ACK_FD_ENV} (the ack pipe's "
                          f"read end)")
    if not value or (args.broadcast_role == "sender" and not args.ack_processes):
        return None
    try:
        return int(value)
    except ValueError:
        raise DriverError(f"broadcast: {ACK_FD_ENV} is not a file descriptor: {value!r}") from None


def _read_acks(fd: int, tally: BroadcastTally) -> None:
    """Reader callback on the ack pipe: count the bytes; end of file means every receivers process has ended."""
    try:
        data = os.read(fd, 4096)
    except BlockingIOError:
        return
    except OSError as exc:
        data = b""
        tally.fail(DriverError(f"broadcast: reading the ack pipe failed: {one_line(exc)}"))
    if not data:
        asyncio.get_running_loop().remove_reader(fd)
        tally.fail(DriverError("broadcast: the ack pipe closed (every receivers process has ended)"))
        return
    tally.acked(len(data))


LISTED_RECEIVERS = 10  # a report lists the details of the first receivers only (all are alike), and the total


def broadcast_connections(sender: Connection | None, receivers: list[Connection]) -> list[dict[str, Any]]:
    """The report's "connections": S (in the sender process), then the first LISTED_RECEIVERS receivers."""
    listed = [] if sender is None else [dict(name="S", **sender.details)]
    return listed + [dict(name=f"R{index}", **receiver.details)
                     for index, receiver in enumerate(receivers[:LISTED_RECEIVERS])]


async def _broadcast_send(sender: Connection, ping: Any, pong: Any, tally: BroadcastTally, args: argparse.Namespace,
                          progress: Progress) -> dict[str, Any]:
    """The sender's loop: warmup, then the window (the cycles of messages sent in it), then one end marker."""
    clock = time.monotonic_ns
    events = WindowEvents()
    send, delivered_until = sender.send, tally.delivered_until
    send_ns = array("q")
    cycles = array("q")
    progress.phase = "warmup"
    warmup_start = clock()
    deadline = warmup_start + int(args.warmup * 1e9)
    while clock() < deadline:
        send_ns.append(clock())
        await send(ping)
        await delivered_until(len(send_ns))
        progress.warmup_roundtrips += 1
    window_first = len(send_ns)
    progress.phase = "measure"
    progress.window = cycles
    events.emit(WINDOW_START_EVENT)
    start = clock()
    deadline = start + int(args.duration * 1e9)
    while True:
        began = clock()
        send_ns.append(began)
        await send(ping)
        await delivered_until(len(send_ns))
        end = clock()
        cycles.append(end - began)
        if end >= deadline:
            break
    events.emit(WINDOW_END_EVENT)
    progress.phase = "report"
    await send(pong)  # the end marker: receivers processes report and exit when all their receivers have it
    elapsed_s = (end - start) / 1e9
    return {
        "warmup": {"roundtrips": window_first, "elapsed_s": (start - warmup_start) / 1e9},
        "roundtrips": len(cycles),
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": len(cycles) / elapsed_s,
        "pairs": 1,
        "latency": {"unit": "ns", "recorded": not args.no_latency,
                    "hdr_histogram": None if args.no_latency else encode_histogram(cycles)},
        "broadcast": {"role": "sender", "receivers": args.receivers, "ack_processes": args.ack_processes,
                      "send_ns": send_ns.tolist(), "window_first": window_first, "window_count": len(cycles),
                      "first_ns": tally.first_ns.tolist(), "last_ns": tally.last_ns.tolist()},
    }


def _receivers_report(tally: BroadcastTally, args: argparse.Namespace) -> dict[str, Any]:
    """A receivers process's report: how many messages all its receivers got, over the time they spanned."""
    messages = tally.complete
    spanned_ns = tally.last_ns[-1] - tally.first_ns[0] if messages else 0
    elapsed_s = max(spanned_ns / 1e9, 1e-9)
    return {
        "roundtrips": messages,
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": messages / elapsed_s,
        "latency": {"unit": "ns", "recorded": False, "hdr_histogram": None},
        "broadcast": {"role": "receivers", "receivers": args.receivers, "first_ns": tally.first_ns.tolist(),
                      "last_ns": tally.last_ns.tolist()},
    }
