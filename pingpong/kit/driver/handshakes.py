"""The handshake workload: open a connection, one roundtrip, close it, in a loop; its rate is handshakes per second.

node/driver/handshakes.js is the Node.js twin of this module.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from array import array
from typing import Any

from pingpong.contract import WINDOW_END_EVENT, WINDOW_START_EVENT
from pingpong.kit.driver.core import (Connection, DriverError, OpenConnection, Progress, WindowEvents, encode_histogram,
                                      mismatch, running_loop_name, watched)
from pingpong.kit.payloads import PING, PONG, make_payload


async def measure(open_connection: OpenConnection, args: argparse.Namespace) -> dict[str, Any]:
    """The handshake workload: a responder B stays in the room; A opens, sends one ping, gets the pong, closes.

    One "roundtrip" here is that whole cycle: TCP connect, opening handshake, one relayed exchange, closing
    handshake. Its rate is handshakes per second; its latency is the cycle's duration.
    """
    ping = make_payload(args.payload_kind, args.payload_size, PING)
    pong = make_payload(args.payload_kind, args.payload_size, PONG)
    progress = Progress()
    last_details: dict[str, Any] = {}
    clock = time.monotonic_ns
    events = WindowEvents()

    async def answer(responder: Connection) -> None:
        while True:
            received = await responder.recv()
            if received != ping:
                raise DriverError(mismatch("B", ping, received))
            await responder.send(pong)

    async def cycle() -> None:
        connection = await open_connection(args.url, args)
        try:
            await connection.send(ping)
            received = await connection.recv()
            if received != pong:
                raise DriverError(mismatch("A", pong, received))
            last_details.update(connection.details)
        finally:
            await connection.close()
        if answering.done():  # the responder failed: report its error, not a hang
            answering.result()

    async with watched(progress, args.stall_timeout) as opened:
        responder = opened.connection(await open_connection(args.url, args))
        answering = opened.task(asyncio.create_task(answer(responder)))
        events.ready_then_wait_for_go()
        progress.phase = "warmup"
        warmup_start = clock()
        deadline = warmup_start + int(args.warmup * 1e9)
        while clock() < deadline:
            await cycle()
            progress.warmup_roundtrips += 1
        progress.phase = "measure"
        latencies = array("q")
        progress.window = latencies
        events.emit(WINDOW_START_EVENT)
        start = clock()
        deadline = start + int(args.duration * 1e9)
        cycle_start = start
        while True:
            await cycle()
            end = clock()
            latencies.append(end - cycle_start)
            cycle_start = end
            if end >= deadline:
                break
        events.emit(WINDOW_END_EVENT)
        progress.phase = "report"
    elapsed_s = (end - start) / 1e9
    return {
        "warmup": {"roundtrips": progress.warmup_roundtrips, "elapsed_s": (start - warmup_start) / 1e9},
        "roundtrips": len(latencies),
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": len(latencies) / elapsed_s,
        "handshakes": len(latencies),
        "latency": {"unit": "ns", "recorded": True, "hdr_histogram": encode_histogram(latencies)},
        "loop": running_loop_name(),
        "pairs": 1,
        "connections": [dict(name="B (responder)", **responder.details), dict(name="A (last opened)", **last_details)],
    }
