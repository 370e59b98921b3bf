"""Holding idle connections (--pairs 0 --idle-connections N): a process that only opens connections and keeps them.

It stands beside the process measuring the pair, so the connections the server holds cost that process nothing.
node/driver/idle_holders.js is the Node.js twin of this module.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from pingpong.kit.driver.core import (OpenConnection, Progress, WindowEvents, open_idle_connections, running_loop_name,
                                      watched)

HOLD_MARGIN_S = 1.0  # a holder keeps its connections this long beyond warmup + duration (through the pair's window)


async def measure(open_connection: OpenConnection, args: argparse.Namespace) -> dict[str, Any]:
    """--pairs 0 --idle-connections N: a holder. It opens the idle connections, says ready, waits for the go,
    holds them through warmup + duration (+ HOLD_MARGIN_S) and reports them with zero roundtrips: the pair measured
    beside it, in another process, then pays nothing in its own process for the connections the server holds."""
    progress = Progress()
    async with watched(progress, args.stall_timeout) as opened:
        idle = await open_idle_connections(open_connection, args, opened, progress)
        WindowEvents().ready_then_wait_for_go()
        progress.phase = "holding"
        started = time.monotonic()
        deadline = started + args.warmup + args.duration + HOLD_MARGIN_S
        while time.monotonic() < deadline:  # in steps, each one progress for the stall watchdog
            await asyncio.sleep(min(0.25, deadline - time.monotonic()))
            progress.warmup_roundtrips += 1
    return {"roundtrips": 0, "elapsed_s": time.monotonic() - started, "roundtrips_per_s": 0, "pairs": 0,
            "holder": True, "latency": {"unit": "ns", "recorded": False, "hdr_histogram": None},
            "connections": [], "idle_connections": idle, "loop": running_loop_name()}
