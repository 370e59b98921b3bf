"""How fast a CPU runs right now: this thread's CPU time for a fixed loop, run on that CPU.

On a shared VM a vCPU's pace moves with what else the host runs on the physical core (a busy SMT sibling, a noisy
neighbour in the shared caches) without any steal time: the same work takes longer. A side's CPU time per roundtrip
then moves with it, and so does a cell's rate, most of all on one CPU, where a roundtrip is all CPU. The watcher
reads the pace of the attempt's CPUs right after each window (the attempt's `cpu_pace_ns`), so that a reader can
see whether a slow attempt ran on a slow CPU (analysis/pace.py). One reading: about 1 ms of the orchestrator's CPU,
after the window, on the measured CPU; affinity is per thread, so only the calling thread moves.
"""

from __future__ import annotations

import os
import time

PACE_LOOPS = 20_000  # about 1 ms of CPython here


def fixed_work(loops: int) -> int:
    """The loop whose CPU time is the pace: integer arithmetic, no allocation beyond small ints, no system call."""
    total = 0
    for number in range(loops):
        total += number * number % 7
    return total


def cpu_pace_ns(cpu: int, loops: int = PACE_LOOPS) -> float | None:
    """ns of this thread's CPU time per iteration of fixed_work on cpu (lower: faster; about 90 here); None when this
    thread may not run there."""
    previous = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        return None
    try:
        fixed_work(loops // 10)  # on the CPU now, caches warm
        began = time.thread_time_ns()
        fixed_work(loops)
        return (time.thread_time_ns() - began) / loops
    finally:
        os.sched_setaffinity(0, previous)


def paces(cpus: set[int]) -> dict[str, float] | None:
    """{"cpu1": ns per iteration} for each CPU; None for none."""
    if not cpus:
        return None
    found = {f"cpu{cpu}": pace for cpu in sorted(cpus) if (pace := cpu_pace_ns(cpu)) is not None}
    return found or None
