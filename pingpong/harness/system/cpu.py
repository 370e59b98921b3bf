"""CPU time, page faults and peak memory of process trees, read from the kernel at the window's edges.

CPU time comes from the most precise source this kernel offers, chosen once per run (cpu_source()):
- "process-clock": the process's CPU-time clock, clock_gettime() on the clock id of its pid (Linux
  CPUCLOCK_SCHED). It is the scheduler's nanosecond runtime (sum_exec_runtime) of every thread of the process,
  including threads that have already exited. One system call per process.
- "schedstat": the first field of /proc/PID/task/TID/schedstat, the same nanosecond runtime, per live thread.
  A thread that exits between two samples drops out of the delta.
- "stat-ticks": utime + stime of /proc/PID/stat, in clock ticks (10 ms at USER_HZ 100).
A sample maps a key (pid, tid) to nanoseconds; tid is 0 when the source gives a whole process.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass

import psutil

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSource:
    """Where CPU times come from, as recorded in the results."""

    name: str  # "process-clock", "schedstat" or "stat-ticks"
    resolution_s: float  # the smallest step the source counts in

    def to_json(self) -> dict[str, object]:
        return {"source": self.name, "resolution_s": self.resolution_s}


PROCESS_CLOCK = CpuSource("process-clock", 1e-9)
SCHEDSTAT = CpuSource("schedstat", 1e-9)
STAT_TICKS = CpuSource("stat-ticks", 1 / CLOCK_TICKS_PER_S)

Sample = dict[tuple[int, int], int]  # (pid, tid or 0 for the whole process) -> CPU ns


def process_clock_id(pid: int) -> int:
    """The clock id of a process's CPU-time clock: Linux's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)."""
    return ((~pid) << 3) | 2


def parse_schedstat_ns(text: bytes) -> int:
    """Nanoseconds on the CPU from one task's /proc/.../schedstat: "<runtime ns> <wait ns> <timeslices>"."""
    return int(text.split(None, 1)[0])


def parse_stat_ticks(text: bytes) -> int:
    """utime + stime, in clock ticks, from /proc/PID/stat (fields 14 and 15; the name in parentheses may hold
    spaces and parentheses, so fields are counted after its last ')')."""
    fields = text.rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _process_clock(pid: int) -> Sample:
    return {(pid, 0): time.clock_gettime_ns(process_clock_id(pid))}


def _schedstat(pid: int) -> Sample:
    sample = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            sample[(pid, int(tid))] = parse_schedstat_ns(_read(f"/proc/{pid}/task/{tid}/schedstat"))
        except OSError:  # the thread exited since the listing
            continue
    return sample


def _stat_ticks(pid: int) -> Sample:
    return {(pid, 0): parse_stat_ticks(_read(f"/proc/{pid}/stat")) * 10**9 // CLOCK_TICKS_PER_S}


READERS = {PROCESS_CLOCK.name: _process_clock, SCHEDSTAT.name: _schedstat, STAT_TICKS.name: _stat_ticks}


@functools.cache
def cpu_source() -> CpuSource:
    """The most precise source that works here, tried on this process: a busy thread must show a runtime."""
    pid = os.getpid()
    for source in (PROCESS_CLOCK, SCHEDSTAT):
        try:
            if sum(READERS[source.name](pid).values()) > 0:
                return source
        except (OSError, ValueError, IndexError):
            continue
    return STAT_TICKS


def sample(pids: list[int], source: CpuSource | None = None) -> Sample:
    """CPU ns of each given process still alive (per thread with schedstat). Cost per process of ten threads,
    measured here: ~1 µs with the process clock, ~160 µs with schedstat, ~19 µs with stat ticks."""
    read = READERS[(source or cpu_source()).name]
    result: Sample = {}
    for pid in pids:
        try:
            result.update(read(pid))
        except (OSError, ValueError, IndexError):  # the process exited (or its files went away) since the listing
            continue
    return result


def cpu_delta(before: Sample, after: Sample) -> float:
    """CPU seconds used between two samples of the same processes.

    A process (or thread) present in both counts its difference; one gone by the second sample drops out. A thread
    first seen in the second sample started in between, so all of its time counts.
    """
    total = 0
    for key, ns in after.items():
        if key in before:
            total += ns - before[key]
        elif key[1] != 0:
            total += ns
    return total / 1e9


def window_cpu_s(before: Sample, after: Sample) -> float | None:
    """A side's CPU seconds over a window, as cpu_delta; None when none of the processes sampled at its start was
    still there at its end: a side that exited before the end was read (a watcher thread late under load) has no
    window figure, where cpu_delta would say it used no CPU at all (a client host's 0.0 of 2026-11-29)."""
    if before and not {pid for pid, _ in before} & {pid for pid, _ in after}:
        return None
    return cpu_delta(before, after)


def parse_minor_faults(text: bytes) -> int:
    """minflt, the minor page faults a process has taken, from /proc/PID/stat (field 10, counted after the name's
    last ')' like parse_stat_ticks)."""
    return int(text.rsplit(b")", 1)[1].split()[7])


def minor_faults(pids: list[int]) -> dict[int, int]:
    """Minor page faults so far of each given process still alive (about 19 µs per process)."""
    result = {}
    for pid in pids:
        try:
            result[pid] = parse_minor_faults(_read(f"/proc/{pid}/stat"))
        except (OSError, ValueError, IndexError):
            continue
    return result


def faults_delta(before: dict[int, int], after: dict[int, int]) -> int | None:
    """Page faults taken between two samples by the processes in both; None when no process is in both."""
    common = before.keys() & after.keys()
    return sum(after[pid] - before[pid] for pid in common) if common else None


def peak_rss_bytes(pid: int) -> int | None:
    """Sum over the tree of each process's peak resident set size (VmHWM), or None if unreadable."""
    total = 0
    found = False
    for process in _tree(pid):
        try:
            with open(f"/proc/{process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1]) * 1024
                        found = True
                        break
        except OSError:
            continue
    return total if found else None


def tree_memory(pid: int) -> dict[str, int] | None:
    """Resident (RSS) and proportional (PSS, shared pages split among their users) memory of a process tree, bytes,
    summed from /proc/PID/smaps_rollup; None when no process of the tree could be read."""
    totals = {"rss_bytes": 0, "pss_bytes": 0}
    found = False
    for process in _tree(pid):
        try:
            with open(f"/proc/{process.pid}/smaps_rollup") as rollup:
                for line in rollup:
                    name, _, rest = line.partition(":")
                    if name in ("Rss", "Pss"):
                        totals[f"{name.lower()}_bytes"] += int(rest.split()[0]) * 1024
                        found = True
        except OSError:
            continue
    return totals if found else None


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
