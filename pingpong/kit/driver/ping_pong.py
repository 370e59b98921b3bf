"""The closed-loop ping-pong workload: in each pair A sends a ping, B answers with a pong, A sends the next.

One pair (and --ab-windows, the benchmark of the recording's own cost) or --pairs N driven at once; warmup, then
the measured window, every roundtrip's payload verified. A roundtrip that a pause of the process may have touched
(a SIGCONT counted between its start and the end of the roundtrip after it) counts, but its latency is left out.
node/driver/ping_pong.js is the Node.js twin.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from array import array
from typing import Any

from pingpong.contract import WINDOW_END_EVENT, WINDOW_START_EVENT
from pingpong.kit.driver.core import (CONTINUES, Connection, DriverError, OpenConnection, Progress, WindowEvents,
                                      count_continues, encode_histogram, mismatch, open_pairs, pairs_report, watched)
from pingpong.kit.payloads import PING, PONG, make_payload


async def measure(open_connection: OpenConnection, args: argparse.Namespace) -> dict[str, Any]:
    """--workload pingpong (without --rate): open the pairs (and the idle connections asked for), wait for the go,
    then one pair's ping-pong, or --pairs N of them at once."""
    count_continues()
    ping = make_payload(args.payload_kind, args.payload_size, PING)
    pong = make_payload(args.payload_kind, args.payload_size, PONG)
    progress = Progress()
    async with watched(progress, args.stall_timeout) as opened:
        pairs, idle = await open_pairs(open_connection, args, opened, progress)
        WindowEvents().ready_then_wait_for_go()
        if len(pairs) == 1:
            a, b = pairs[0]
            result = await _ping_pong(a, b, ping, pong, args, progress)
        else:
            result = await _many_pairs(pairs, ping, pong, args, progress)
    return pairs_report(result, args, opened, idle)


async def _many_pairs(pairs: list[tuple[Connection, Connection]], ping: Any, pong: Any, args: argparse.Namespace,
                      progress: Progress) -> dict[str, Any]:
    """N pairs at once, each its own ping-pong task: warmup together, then one shared measured window.

    Every pair's roundtrips count and its latencies join one histogram, and each pair's also make its own; the rate
    is the sum over pairs.
    """
    clock = time.monotonic_ns
    events = WindowEvents()
    progress.phase = "warmup"
    warmup_start = clock()
    warmup_deadline = warmup_start + int(args.warmup * 1e9)
    await asyncio.gather(*(_warm_up(a, b, ping, pong, warmup_deadline, progress) for a, b in pairs))
    progress.phase = "measure"
    duration_ns = int(args.duration * 1e9)
    continued_start = CONTINUES.count  # before the event: the orchestrator may pause the cell as soon as it reads it
    events.emit(WINDOW_START_EVENT)
    windows = await asyncio.gather(*(_measured_window(a.send, a.recv, b.send, b.recv, ping, pong, duration_ns,
                                                      not args.no_latency, progress) for a, b in pairs))
    continued = CONTINUES.count - continued_start
    events.emit(WINDOW_END_EVENT)
    progress.phase = "report"
    count = sum(window[0] for window in windows)
    start = min(window[1] for window in windows)
    end = max(window[2] for window in windows)
    elapsed_s = (end - start) / 1e9
    per_pair = [_latencies(window[3]) for window in windows]
    result = {
        "warmup": {"roundtrips": progress.warmup_roundtrips, "elapsed_s": (start - warmup_start) / 1e9},
        "roundtrips": count,
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": count / elapsed_s,
        "per_pair_roundtrips": [window[0] for window in windows],
        "latency": {"unit": "ns", "recorded": not args.no_latency,
                    "hdr_histogram": encode_histogram([value for latencies in per_pair for value in latencies])
                    if not args.no_latency else None},
        "pauses": {"continued": continued, "latency_dropped": sum(_dropped(window[3]) for window in windows)},
    }
    if not args.no_latency:
        result["per_pair_hdr_histograms"] = [encode_histogram(latencies) for latencies in per_pair]
    return result


async def _warm_up(a: Connection, b: Connection, ping: Any, pong: Any, deadline_ns: int, progress: Progress) -> None:
    clock = time.monotonic_ns
    while clock() < deadline_ns:
        await a.send(ping)
        received = await b.recv()
        if received != ping:
            raise DriverError(mismatch("B", ping, received))
        await b.send(pong)
        received = await a.recv()
        if received != pong:
            raise DriverError(mismatch("A", pong, received))
        progress.warmup_roundtrips += 1


async def _ping_pong(a: Connection, b: Connection, ping: Any, pong: Any, args: argparse.Namespace,
                     progress: Progress) -> dict[str, Any]:
    send_a, recv_a, send_b, recv_b = a.send, a.recv, b.send, b.recv
    clock = time.monotonic_ns
    events = WindowEvents()

    progress.phase = "warmup"
    warmup_start = clock()
    await _warm_up(a, b, ping, pong, warmup_start + int(args.warmup * 1e9), progress)

    progress.phase = "measure"
    # Normally one window, recording as asked. --ab-windows N (a benchmark of the recording's own cost) runs 2N
    # windows on the same connections, recording on and off in ABBA order, and reports each window's rate.
    if args.ab_windows:
        plan = [(i % 4) in (0, 3) for i in range(2 * args.ab_windows)]
    else:
        plan = [not args.no_latency]
    duration_ns = int(args.duration * 1e9)
    continued_start = CONTINUES.count  # before the event: the orchestrator may pause the cell as soon as it reads it
    events.emit(WINDOW_START_EVENT)
    usage_start = resource.getrusage(resource.RUSAGE_SELF)
    windows = []
    for record in plan:
        windows.append(await _measured_window(send_a, recv_a, send_b, recv_b, ping, pong, duration_ns, record,
                                              progress))
    usage_end = resource.getrusage(resource.RUSAGE_SELF)
    continued = CONTINUES.count - continued_start
    events.emit(WINDOW_END_EVENT)
    progress.phase = "report"

    count = sum(window[0] for window in windows)
    elapsed_s = sum(window[2] - window[1] for window in windows) / 1e9
    chunks = [chunk for window in windows for chunk in window[3]]
    result = {
        "warmup": {"roundtrips": progress.warmup_roundtrips, "elapsed_s": (windows[0][1] - warmup_start) / 1e9},
        "roundtrips": count,
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": count / elapsed_s,
        "latency": {
            "unit": "ns",
            "recorded": any(plan),
            "hdr_histogram": encode_histogram(_latencies(chunks)) if any(plan) else None,
        },
        "pauses": {"continued": continued, "latency_dropped": _dropped(chunks)},
        "cpu": {
            "user_s": usage_end.ru_utime - usage_start.ru_utime,
            "system_s": usage_end.ru_stime - usage_start.ru_stime,
        },
    }
    if args.ab_windows:
        result["ab_windows"] = [
            {"recording": record, "roundtrips": window[0], "roundtrips_per_s": window[0] / (window[2] - window[1]) * 1e9}
            for record, window in zip(plan, windows)]
    return result


# Latencies are recorded into chunks of this many (64 KiB each, far below any mmap threshold): appending to one array
# for the whole window grew it by reallocation, which at tens of thousands of roundtrips moved it into glibc's mapped
# blocks and back, and made a long window slower than a short one (benchmarks/window_length.py measures it).
LATENCY_CHUNK = 8192
# In a chunk, the place of a roundtrip whose latency a pause may have touched: it counts, its latency is left out.
DROPPED = -1


async def _measured_window(send_a, recv_a, send_b, recv_b, ping: Any, pong: Any, duration_ns: int, record: bool,
                           progress: Progress) -> tuple[int, int, int, list[array]]:
    """The measured loop: (roundtrips, start ns, end ns, latencies ns in chunks). Recording is one array append, and
    a new chunk every LATENCY_CHUNK roundtrips: its cost per roundtrip does not grow with the window.

    A pause (a slice of the host sentinel, then a SIGCONT) must not enter the histogram as a slow roundtrip. The SIGCONT count c[k] is read
    at each roundtrip's end, just before its timestamp (c[0] before the window's start): roundtrip k's latency is
    kept iff c[k+1] == c[k-1] (the window's last: iff c[k] == c[k-1]). So a change seen at a roundtrip's end drops it
    and the one before it, where a pause may have ended with the handler run late; both stay in their chunk, as
    DROPPED, and count. Read after the timestamp, a count could take in a pause that falls in the next roundtrip and
    keep it.
    """
    clock = time.monotonic_ns
    continues = CONTINUES
    chunk = array("q")
    chunks = [chunk]
    progress.window = chunk
    seen = continues.count
    start = clock()
    deadline = start + duration_ns
    roundtrip_start = start
    if record:
        append = chunk.append
        room = LATENCY_CHUNK
        while True:
            await send_a(ping)
            received = await recv_b()
            if received != ping:
                raise DriverError(mismatch("B", ping, received))
            await send_b(pong)
            received = await recv_a()
            if received != pong:
                raise DriverError(mismatch("A", pong, received))
            continued = continues.count
            end = clock()
            if continued == seen:
                append(end - roundtrip_start)
            else:
                seen = continued
                _drop_the_last(chunks)
                append(DROPPED)
            roundtrip_start = end
            room -= 1
            if not room:
                progress.window_roundtrips += LATENCY_CHUNK
                chunk = array("q")
                chunks.append(chunk)
                progress.window = chunk
                append = chunk.append
                room = LATENCY_CHUNK
            if end >= deadline:
                return sum(len(recorded) for recorded in chunks), start, end, chunks
    count = 0
    while True:
        await send_a(ping)
        received = await recv_b()
        if received != ping:
            raise DriverError(mismatch("B", ping, received))
        await send_b(pong)
        received = await recv_a()
        if received != pong:
            raise DriverError(mismatch("A", pong, received))
        count += 1
        progress.window_roundtrips = count
        end = clock()
        if end >= deadline:
            return count, start, end, []


def _drop_the_last(chunks: list[array]) -> None:
    """Mark the window's last roundtrip so far DROPPED, if the window has one (the current chunk may be new)."""
    last = chunks[-1] if chunks[-1] else chunks[-2] if len(chunks) > 1 else None
    if last is not None:
        last[-1] = DROPPED


def _latencies(chunks: list[array]) -> list[int]:
    """The latencies in a window's chunks, less the DROPPED."""
    return [value for chunk in chunks for value in chunk if value != DROPPED]


def _dropped(chunks: list[array]) -> int:
    return sum(chunk.count(DROPPED) for chunk in chunks)
