"""Where a roundtrip's time goes, per side: a pure function of a cell's attempts (their scheduling readings, the
measured CPU and the rate).

Per side, in µs per roundtrip: its CPU time, split into user and system time; its run delay (runnable, waiting for a
CPU); and the rest of the roundtrip, the time it was blocked: waiting on the other side, on the kernel's network
path, for a wake-up. The parts add up to the roundtrip by construction (the rest is what the others leave). The
roundtrip is 1e6 / the cell's median rate: with several pairs, the time between two of the cell's roundtrips.

The split of the CPU time comes from the processes' user and system clock ticks (10 ms each): too coarse for one
window's CPU, so the user share is taken over all the cell's attempts together and applied to the precise CPU time
the suite measures (cpu.py); with no tick in any window (a side using under 10 ms) there is no split.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from pingpong.harness.results.records import Attempt
from pingpong.harness.system.scheduling import Scheduling


@dataclass(frozen=True)
class TimeBudget:
    """One side's share of a roundtrip, µs per roundtrip; per-roundtrip figures are medians over the attempts.

    JSON mapping (a summary's "server_time_budget" and "client_time_budget"): every field under its own name.
    """

    roundtrip_us: float  # 1e6 / the cell's median rate
    cpu_us: float  # the side's CPU time per roundtrip (user + system, the summary's <side>_cpu_us_per_roundtrip)
    user_us: float | None  # cpu_us × the user ticks' share over the cell's attempts; None without a tick
    system_us: float | None  # cpu_us × the system ticks' share
    run_delay_us: float  # runnable but waiting for a CPU (its main threads' when the split below is known)
    # roundtrip_us - main-thread CPU - run_delay_us (cpu_us without the split): blocked, waiting on the other side,
    # the network path, wake-ups. Below 0 when the side's main threads run on more than one timeline (several client
    # processes or workers)
    blocked_us: float
    voluntary_switches: float  # per roundtrip: the side's threads gave up their CPU (blocked)
    involuntary_switches: float  # per roundtrip: preempted while runnable
    ticks: int  # the user and system ticks the split was taken from (its precision: 1/ticks)
    # cpu_us split by the threads' own CPU times (schedstat): each process's main thread, where its event loop runs,
    # and its other threads (a thread pool's zlib, GC, the JIT), which run beside it and so are no part of the
    # roundtrip's timeline. None in files from before the split
    main_thread_cpu_us: float | None = None
    other_threads_cpu_us: float | None = None
    # per roundtrip, with PINGPONG_COUNT_WAKEUPS=1 (system/wakeup_trace.py): the side's threads woken, woken from
    # another CPU than the waker's, moved to another CPU. None when not counted in every attempt
    wakeups: float | None = None
    cross_cpu_wakeups: float | None = None
    migrations: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"roundtrip_us": self.roundtrip_us, "cpu_us": self.cpu_us, "user_us": self.user_us,
                "system_us": self.system_us, "run_delay_us": self.run_delay_us, "blocked_us": self.blocked_us,
                "voluntary_switches": self.voluntary_switches, "involuntary_switches": self.involuntary_switches,
                "ticks": self.ticks, "main_thread_cpu_us": self.main_thread_cpu_us,
                "other_threads_cpu_us": self.other_threads_cpu_us, "wakeups": self.wakeups,
                "cross_cpu_wakeups": self.cross_cpu_wakeups, "migrations": self.migrations}


def window_roundtrips(attempt: Attempt) -> float | None:
    """The roundtrips of the orchestrator's sampled window (its raw rate times its running length; several client
    processes share one), or the driver's count when the window's length is unknown."""
    return attempt.sampled_roundtrips or attempt.roundtrips or None


def user_share(readings: list[Scheduling]) -> tuple[float | None, int]:
    """The user ticks' share of all the readings' user and system ticks, and how many ticks it rests on."""
    user = sum(reading.user_ticks for reading in readings)
    ticks = user + sum(reading.system_ticks for reading in readings)
    return (user / ticks if ticks > 0 else None), ticks


def main_thread_share(readings: list[Scheduling]) -> float | None:
    """The main threads' share of the threads' CPU time over all the readings; None without the split (older files)
    or without any CPU time."""
    split = [(r.main_thread_cpu_ns, r.other_threads_cpu_ns) for r in readings
             if r.main_thread_cpu_ns is not None and r.other_threads_cpu_ns is not None]
    if not split or len(split) < len(readings):
        return None
    total = sum(main + other for main, other in split)
    return sum(main for main, _ in split) / total if total > 0 else None


def time_budget(good: list[Attempt], side: str, cpu_us_per_roundtrip: float | None,
                median_rate: float | None) -> TimeBudget | None:
    """One side's budget from the cell's good attempts; None when no attempt read its scheduling, or the CPU or the
    rate is missing."""
    # each window's roundtrips, and its times per roundtrip taken to the reference pace as the CPU and the rate are
    # (multiplied by pace_scale); counts per roundtrip (switches) stay as they are
    measured = [(reading, roundtrips, attempt.pace_scale) for attempt in good
                if (reading := attempt.scheduling(side)) is not None and (roundtrips := window_roundtrips(attempt))]
    if not measured or cpu_us_per_roundtrip is None or not median_rate:
        return None
    share, ticks = user_share([reading for reading, _, _ in measured])
    main_share = main_thread_share([reading for reading, _, _ in measured])
    main_cpu_us = None if main_share is None else cpu_us_per_roundtrip * main_share
    run_delay_us = statistics.median(
        (reading.run_delay_ns if main_share is None else reading.main_thread_run_delay_ns) / 1e3 / roundtrips * scale
        for reading, roundtrips, scale in measured)
    roundtrip_us = 1e6 / median_rate
    return TimeBudget(
        roundtrip_us=roundtrip_us, cpu_us=cpu_us_per_roundtrip,
        user_us=None if share is None else cpu_us_per_roundtrip * share,
        system_us=None if share is None else cpu_us_per_roundtrip * (1 - share),
        run_delay_us=run_delay_us,
        blocked_us=roundtrip_us - (cpu_us_per_roundtrip if main_cpu_us is None else main_cpu_us) - run_delay_us,
        main_thread_cpu_us=main_cpu_us,
        other_threads_cpu_us=None if main_cpu_us is None else cpu_us_per_roundtrip - main_cpu_us,
        voluntary_switches=statistics.median(reading.voluntary_switches / roundtrips
                                             for reading, roundtrips, _ in measured),
        involuntary_switches=statistics.median(reading.involuntary_switches / roundtrips
                                               for reading, roundtrips, _ in measured),
        ticks=ticks, **{name: per_roundtrip(measured, name) for name in ("wakeups", "cross_cpu_wakeups", "migrations")})


def per_roundtrip(measured: list[tuple[Scheduling, float, float]], name: str) -> float | None:
    """The median over the attempts of a count per roundtrip; None unless every attempt counted it."""
    counts = [(getattr(reading, name), roundtrips) for reading, roundtrips, _ in measured]
    if any(value is None for value, _ in counts):
        return None
    return statistics.median(value / roundtrips for value, roundtrips in counts)
