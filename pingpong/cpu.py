"""CPU time and peak memory of a process tree, read from /proc (through psutil) at the window's edges."""

from __future__ import annotations

from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class TreeSample:
    """User+system CPU seconds summed over a process and its live descendants, at one instant."""

    cpu_s: float
    processes: int


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def sample_tree(pid: int) -> TreeSample:
    total = 0.0
    count = 0
    for process in _tree(pid):
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
        count += 1
    return TreeSample(total, count)


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
