"""When a Sanic worker can be stopped without the stop being lost (sanic 25.12, app.run's worker manager).

Two stops are lost, and the server then runs until it is killed (the orchestrator's SIGKILL after its grace):
1. Sanic's manager waits for every worker's ack (WorkerManager.wait_for_ack: read the workers' states, poll its pipe
   0.1 s, again). A SIGTERM meanwhile marks the workers TERMINATED, and it waits to see them ACKED for ever. A worker
   acks before it listens, so a client's first handshake can come before the manager has seen the ack: the plain
   sanic server stopped right after its first handshake was killed after 5 s in 10 of 10 tries at rest
   (`python -m benchmarks.server_stops --servers sanic --right-away`, 2026-11-28).
2. A SIGINT (the manager's stop to its workers) handled as a worker's after_server_start listeners end stops the loop
   that ran them, not the one Sanic runs next. app.state.is_running turns True between the two (app.set_serving).
wait_until_stoppable waits both out: every worker ACKED, then 4 sleeps of the manager's main thread (its voluntary
context switches; a read answered before, its poll, a fresh read, the monitor's poll), then is_running (where
Sanic sets it in a worker: not 23.6, whose stop 2 is then left as it was).
"""

from __future__ import annotations

import asyncio
import os
import time

MANAGER_SLEEPS_PAST_THE_ACKS = 4
MANAGER_WAIT_LIMIT_S = 10.0  # and so long at most (its counts unreadable, or it never sleeps), then on
ACKED_OR_LATER = ("ACKED", "JOINED", "TERMINATED", "FAILED", "COMPLETED")
POLL_S = 0.01


def manager_sleeps() -> int | None:
    """How often the manager's main thread (this worker's parent) has slept; None where unreadable."""
    manager = os.getppid()
    try:
        with open(f"/proc/{manager}/task/{manager}/status") as status:
            for line in status:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


_stoppable = False


async def wait_until_stoppable(app) -> None:
    """Return once a stop of this worker can no longer be lost (see the module's text); at once after the first."""
    global _stoppable
    if _stoppable:
        return
    if getattr(app, "multiplexer", None) is not None:  # under Sanic's manager (not single_process)
        while not all(state.get("state") in ACKED_OR_LATER for state in app.m.workers.values()
                      if state.get("server")):
            await asyncio.sleep(POLL_S)
        first, deadline = manager_sleeps(), time.monotonic() + MANAGER_WAIT_LIMIT_S
        while first is not None and time.monotonic() < deadline:
            slept = manager_sleeps()
            if slept is None or slept - first >= MANAGER_SLEEPS_PAST_THE_ACKS:
                break
            await asyncio.sleep(POLL_S)
    # app.set_serving turns is_running True in the worker as its loop runs for good; a Sanic without it (23.6, the
    # lemire-2023 set-up's) never does in a worker, and waiting for it there left every handshake unanswered
    while hasattr(app, "set_serving") and not app.state.is_running:
        await asyncio.sleep(POLL_S)
    _stoppable = True
