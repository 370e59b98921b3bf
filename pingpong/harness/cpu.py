"""CPU time and peak memory of process trees, read from /proc at the window's edges."""

from __future__ import annotations

import os

import psutil


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User+system CPU seconds of each given process still alive, read from /proc/PID/stat (a few µs each)."""
    seconds = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        seconds[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S  # utime, stime: stat fields 14, 15
    return seconds


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds used between two samples, over the processes present in both."""
    return sum(after[pid] - before[pid] for pid in after if pid in before)


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
