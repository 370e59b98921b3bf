"""The open-loop ping-pong (--rate R): pings sent on a fixed schedule, latency measured from when each was due.

Each pair's A sends whether or not the pongs came back, so a slow reply does not slow the offered load down (no
coordinated omission). node/driver/open_loop.js is the Node.js twin of this module.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from array import array
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from pingpong.contract import WINDOW_END_EVENT, WINDOW_START_EVENT
from pingpong.kit.driver.core import (Connection, DriverError, OpenConnection, Opened, Progress, WindowEvents,
                                      encode_histogram, mismatch, open_pairs, pairs_report, watched)
from pingpong.kit.payloads import PING, PONG, make_payload


async def measure(open_connection: OpenConnection, args: argparse.Namespace) -> dict[str, Any]:
    """--workload pingpong --rate R: open the pairs (and the idle connections asked for), wait for the go, then
    drive every pair on the schedule."""
    ping = make_payload(args.payload_kind, args.payload_size, PING)
    pong = make_payload(args.payload_kind, args.payload_size, PONG)
    progress = Progress()
    async with watched(progress, args.stall_timeout) as opened:
        pairs, idle = await open_pairs(open_connection, args, opened, progress)
        WindowEvents().ready_then_wait_for_go()
        result = await _open_loop(pairs, ping, pong, args, progress, opened)
    return pairs_report(result, args, opened, idle)


@dataclass(frozen=True)
class Schedule:
    """Ping i is due at start_ns + i/rate. Pure arithmetic, so the sender and the receiver of a pair agree on
    every due time without sharing state, and a latency is measured from when a ping was due, not from when a
    late sender got round to it (no coordinated omission)."""

    start_ns: int
    rate: float

    def due(self, index: int) -> int:
        return self.start_ns + int(index * 1e9 / self.rate)

    def first_due_at_or_after(self, time_ns: int) -> int:
        """The index of the first ping due at or after time_ns (pings before it are due earlier)."""
        index = max(0, math.ceil((time_ns - self.start_ns) * self.rate / 1e9) - 2)
        while self.due(index) < time_ns:
            index += 1
        return index


async def _send_on_schedule(send: Callable[[Any], Awaitable[Any]], ping: Any, schedule: Schedule, count: int,
                            sent_ns: array) -> int:
    """Send pings 0..count-1 each at its due time, never waiting for a reply; returns when the last was sent.

    Behind schedule (a slow send, a late timer), every ping already due goes out at once: none is skipped, so
    the offered load stays the offered load. sent_ns gets each ping's actual send time.
    """
    clock = time.monotonic_ns
    due = schedule.due
    for index in range(count):
        when = due(index)
        now = clock()
        while now < when:
            await asyncio.sleep((when - now) / 1e9)
            now = clock()
        sent_ns.append(now)
        await send(ping)
    return clock()


async def _receive_on_schedule(recv: Callable[[], Awaitable[Any]], pong: Any, count: int, first_window: int,
                               received_ns: array, progress: Progress) -> None:
    """Receive the pongs of pings 0..count-1 in order (the j-th pong answers the j-th ping), timing each."""
    clock = time.monotonic_ns
    append = received_ns.append
    for index in range(count):
        received = await recv()
        if received != pong:
            raise DriverError(mismatch("A", pong, received))
        append(clock())
        if index < first_window:
            progress.warmup_roundtrips += 1
        else:
            progress.window_roundtrips += 1


async def _answer_pings(connection: Connection, ping: Any, pong: Any) -> None:
    """B of an open-loop pair: answer every ping with a pong at once, until cancelled."""
    recv, send = connection.recv, connection.send
    while True:
        received = await recv()
        if received != ping:
            raise DriverError(mismatch("B", ping, received))
        await send(pong)


async def _until_done(wanted: list[asyncio.Future], watched: list[asyncio.Future],
                      timeout_s: float | None = None) -> bool:
    """Wait until every wanted task is done; raise at once when any wanted or watched task fails.

    Returns False when timeout_s passed first. A responder failing (a payload mismatch on B) thus ends the run
    with its own error at once, instead of as a stall while A keeps waiting for pongs that will not come.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    pending = set(wanted) | set(watched)
    while not all(task.done() for task in wanted):
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        done, pending = await asyncio.wait(pending, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()
    return True


async def _open_loop(pairs: list[tuple[Connection, Connection]], ping: Any, pong: Any, args: argparse.Namespace,
                     progress: Progress, opened: Opened) -> dict[str, Any]:
    """--rate R: every pair's A sends R pings/s on schedule from the warmup's start, B answers each at once.

    Pings due in the warmup are warmup; those due in [warmup end, warmup end + duration) are the window. After
    the last window ping is sent, sending stops and the window's pongs are awaited (at most --stall-timeout).
    """
    clock = time.monotonic_ns
    events = WindowEvents()
    warmup_ns, duration_ns = int(args.warmup * 1e9), int(args.duration * 1e9)
    progress.phase = "warmup"
    schedule = Schedule(clock(), args.rate)
    window_start_ns = schedule.start_ns + warmup_ns
    first = schedule.first_due_at_or_after(window_start_ns)
    total = schedule.first_due_at_or_after(window_start_ns + duration_ns)
    sent = [array("q") for _ in pairs]
    received = [array("q") for _ in pairs]
    responders = [opened.task(asyncio.create_task(_answer_pings(b, ping, pong))) for _, b in pairs]
    receivers = [opened.task(asyncio.create_task(_receive_on_schedule(a.recv, pong, total, first, received[i],
                                                                      progress)))
                 for i, (a, _) in enumerate(pairs)]
    senders = [opened.task(asyncio.create_task(_send_on_schedule(a.send, ping, schedule, total, sent[i])))
               for i, (a, _) in enumerate(pairs)]
    everything = responders + receivers + senders
    window_opens = asyncio.create_task(asyncio.sleep(max(0, window_start_ns - clock()) / 1e9))
    opened.task(window_opens)
    await _until_done([window_opens], everything)
    progress.phase = "measure"
    events.emit(WINDOW_START_EVENT)
    await _until_done(senders, everything)
    window_end_ns = max(sender.result() for sender in senders)
    events.emit(WINDOW_END_EVENT)
    progress.phase = "drain"
    if not await _until_done(receivers, everything, args.stall_timeout):
        answered = sum(len(r) for r in received) - first * len(pairs)
        raise DriverError(f"stall: {answered} of {(total - first) * len(pairs)} window pings answered within "
                          f"{args.stall_timeout:g} s after the window (phase drain)")
    progress.phase = "report"
    return open_loop_report(schedule, first, total, sent, received, window_end_ns, args)


def open_loop_report(schedule: Schedule, first: int, total: int, sent: list[array], received: list[array],
                     window_end_ns: int, args: argparse.Namespace) -> dict[str, Any]:
    """The open-loop report from the raw times: latencies from due times, send lag, what was answered in time."""
    due = schedule.due
    window_start_ns = schedule.start_ns + int(args.warmup * 1e9)
    window = range(first, total)
    latencies = [times[j] - due(j) for times in received for j in window]
    lags = [times[j] - due(j) for times in sent for j in window]
    answered = len(latencies)
    in_window = sum(1 for times in received for j in window if times[j] <= window_end_ns)
    last_pong_ns = max((times[-1] for times in received if len(times) > first), default=None)
    elapsed_s = (last_pong_ns - window_start_ns) / 1e9 if last_pong_ns is not None else args.duration
    pairs = len(received)
    return {
        "warmup": {"roundtrips": first * pairs, "elapsed_s": (window_start_ns - schedule.start_ns) / 1e9},
        "roundtrips": answered,
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": answered / elapsed_s,
        "latency": {"unit": "ns", "recorded": True, "hdr_histogram": encode_histogram(latencies)},
        "open_loop": {
            "rate_per_pair": schedule.rate,
            "offered_per_s": schedule.rate * pairs,
            "sent": len(lags),
            "answered": answered,
            "answered_in_window": in_window,
            "achieved_per_s": in_window / args.duration,
            "send_lag_max_ns": max(lags, default=0),
            "send_lag_mean_ns": sum(lags) / len(lags) if lags else 0,
        },
    }
