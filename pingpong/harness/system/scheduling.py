"""How the kernel scheduled a side's threads over the measured window: the time each spent runnable but waiting for a
CPU (run delay), its context switches, and its user and system clock ticks, read from /proc at the window's edges.

Per thread (/proc/PID/task/TID/): schedstat's second field, the run delay in ns ("<runtime ns> <run delay ns>
<timeslices>"), and status's voluntary_ctxt_switches (the thread blocked: it waited for I/O, a lock, a timer) and
nonvoluntary_ctxt_switches (it was preempted while it could still run). Per process: utime and stime of
/proc/PID/stat, in clock ticks (10 ms at USER_HZ 100), charged to whichever mode a thread was in at each tick: too
coarse for a roundtrip's CPU, fine for the share of user and system time over many windows.

A delta counts the threads (and processes) present at both edges: one that starts or exits inside the window is
left out, with what it did there. One reading costs about 30 µs per thread plus 20 µs per process, measured here
(a one-thread process: 41-52 µs).
PINGPONG_SCHEDULING_READINGS=off turns the readings off (benchmarks/budget_overhead.py measures their cost).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from pingpong.harness.system.wakeup_trace import WakeupCounts

READINGS_ENV = "PINGPONG_SCHEDULING_READINGS"  # "off": no readings (their cost is measured against it)


def readings_on() -> bool:
    """Whether the window's edges read scheduling figures (on unless PINGPONG_SCHEDULING_READINGS=off)."""
    return os.environ.get(READINGS_ENV, "on").strip().lower() != "off"


@dataclass(frozen=True)
class Scheduling:
    """One side's scheduling over the window, summed over its threads (and processes) present at both edges.

    JSON mapping (an attempt's "server_scheduling" and "client_scheduling"): every field under its own name.
    """

    run_delay_ns: int  # time runnable but waiting for a CPU (schedstat's 2nd field), ns
    voluntary_switches: int  # voluntary_ctxt_switches: the thread gave up its CPU (blocked)
    involuntary_switches: int  # nonvoluntary_ctxt_switches: the thread was preempted while runnable
    user_ticks: int  # utime of /proc/PID/stat, clock ticks (SC_CLK_TCK a second)
    system_ticks: int  # stime
    threads: int  # the threads counted: present at both edges
    # CPU time (schedstat's 1st field, ns) of each process's main thread, the one that ran its event loop (its
    # busiest in the window: main_threads), and of its other threads (a runtime's thread pool, GC and compiler
    # threads), which run beside it. None in files from before this split
    main_thread_cpu_ns: int | None = None
    other_threads_cpu_ns: int | None = None
    main_thread_run_delay_ns: int | None = None  # the main threads' share of run_delay_ns
    # with PINGPONG_COUNT_WAKEUPS=1 (system/wakeup_trace.py), the kernel's events for the side's threads: woken,
    # woken from another CPU than the waker's, moved to another CPU. None when not counted
    wakeups: int | None = None
    cross_cpu_wakeups: int | None = None
    migrations: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Scheduling | None":
        """The record from its JSON mapping; None stays None (files and hosts from before the readings)."""
        if data is None:
            return None
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})


def combined(readings: list["Scheduling | None"]) -> Scheduling | None:
    """Several hosts' (or processes') figures added up, as one reading of all of them; None if any is missing."""
    if not readings or any(reading is None for reading in readings):
        return None
    return Scheduling(**{f.name: None if any(getattr(reading, f.name) is None for reading in readings)
                         else sum(getattr(reading, f.name) for reading in readings) for f in fields(Scheduling)})


def with_wakeups(reading: Scheduling | None, counts: WakeupCounts) -> Scheduling | None:
    """The reading with a wakeup trace's counts for the same side."""
    if reading is None:
        return None
    return replace(reading, wakeups=counts.wakeups, cross_cpu_wakeups=counts.cross_cpu_wakeups,
                   migrations=counts.migrations)


ThreadFigures = tuple[int, int, int, int]  # run delay ns, voluntary switches, involuntary switches, CPU time ns


@dataclass
class SchedulingSample:
    """One edge's readings: per (pid, tid) its ThreadFigures, per pid its (user ticks, system ticks)."""

    threads: dict[tuple[int, int], ThreadFigures] = field(default_factory=dict)
    ticks: dict[int, tuple[int, int]] = field(default_factory=dict)


def parse_run_delay_ns(text: bytes) -> int:
    """The run delay, ns, from one task's schedstat: "<runtime ns> <run delay ns> <timeslices>"."""
    return int(text.split()[1])


def parse_runtime_and_delay_ns(text: bytes) -> tuple[int, int]:
    """(CPU time ns, run delay ns) from one task's schedstat."""
    runtime, delay = text.split()[:2]
    return int(runtime), int(delay)


def parse_context_switches(text: bytes) -> tuple[int, int]:
    """(voluntary, involuntary) context switches from a task's status (its last two lines, on every kernel since
    2.6.23)."""
    found: dict[bytes, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(b":")
        if name in (b"voluntary_ctxt_switches", b"nonvoluntary_ctxt_switches"):
            found[name] = int(value)
    return found[b"voluntary_ctxt_switches"], found[b"nonvoluntary_ctxt_switches"]


def parse_user_and_system_ticks(text: bytes) -> tuple[int, int]:
    """(utime, stime), clock ticks, from /proc/PID/stat (fields 14 and 15, counted after the name's last ')', which
    may hold spaces and parentheses)."""
    fields_after_name = text.rsplit(b")", 1)[1].split()
    return int(fields_after_name[11]), int(fields_after_name[12])


def _read(path: str) -> bytes:
    """A /proc file's text (one read: each of these is far under 4 KiB)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        return os.read(descriptor, 8192)
    finally:
        os.close(descriptor)


def sample(pids: list[int]) -> SchedulingSample:
    """The given processes' threads' figures and each process's ticks now; what has exited meanwhile is left out."""
    reading = SchedulingSample()
    for pid in pids:
        try:
            reading.ticks[pid] = parse_user_and_system_ticks(_read(f"/proc/{pid}/stat"))
            tids = os.listdir(f"/proc/{pid}/task")
        except (OSError, ValueError, IndexError):  # the process exited since the listing
            continue
        for tid in tids:
            task = f"/proc/{pid}/task/{tid}"
            try:
                runtime_ns, delay_ns = parse_runtime_and_delay_ns(_read(f"{task}/schedstat"))
                reading.threads[(pid, int(tid))] = (delay_ns, *parse_context_switches(_read(f"{task}/status")),
                                                    runtime_ns)
            except (OSError, ValueError, IndexError, KeyError):  # the thread exited since the listing
                continue
    return reading


def delta(before: SchedulingSample, after: SchedulingSample) -> Scheduling | None:
    """What the threads and processes present at both edges did between them; None when no thread is in both."""
    common = before.threads.keys() & after.threads.keys()
    if not common:
        return None
    grown = {key: tuple(now - then for now, then in zip(after.threads[key], before.threads[key])) for key in common}
    main = main_threads(grown)
    processes = before.ticks.keys() & after.ticks.keys()
    return Scheduling(
        run_delay_ns=sum(figures[0] for figures in grown.values()),
        voluntary_switches=sum(figures[1] for figures in grown.values()),
        involuntary_switches=sum(figures[2] for figures in grown.values()),
        user_ticks=sum(after.ticks[pid][0] - before.ticks[pid][0] for pid in processes),
        system_ticks=sum(after.ticks[pid][1] - before.ticks[pid][1] for pid in processes), threads=len(common),
        main_thread_cpu_ns=sum(figures[3] for key, figures in grown.items() if key in main),
        other_threads_cpu_ns=sum(figures[3] for key, figures in grown.items() if key not in main),
        main_thread_run_delay_ns=sum(figures[0] for key, figures in grown.items() if key in main))


def main_threads(grown: dict[tuple[int, int], tuple[int, ...]]) -> set[tuple[int, int]]:
    """Each process's thread that ran its event loop in the window: its busiest (the most CPU time, figures[3]).
    Node.js, Bun and Python run their loop on the process's first thread; Go runs goroutines on threads of its
    own and leaves the first one idle, so "the first thread" would say its server did nothing."""
    busiest: dict[int, tuple[int, int]] = {}
    for (pid, tid), figures in grown.items():
        if pid not in busiest or figures[3] > grown[busiest[pid]][3]:
            busiest[pid] = (pid, tid)
    return set(busiest.values())
