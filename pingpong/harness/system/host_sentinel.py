"""The host sentinel (native/host_sentinel.c: two C processes passing one byte over a socketpair), one per CPU, asked
for one slice at a time: how fast the host runs that CPU right now.

On this shared VM each vCPU now and then runs the same work about 1.5x slower for a stretch of milliseconds to
seconds, independently of the other vCPU (docs/methodology.md, "The host's two speeds"). The in-window pace
(measure/pacer.py) times slices of these sentinels inside every measured window; benchmarks/host_modes.py,
benchmarks/window_pace.py and benchmarks/per_cpu_keeping.py use them too. The sentinels are started once per CPU and
run until the run ends (close_all) or this process does: each exits at the end of its stdin, its child with it, and
the guardian ends its process group if this process is killed.
"""

from __future__ import annotations

import os
import select
import subprocess
from pathlib import Path

from pingpong.harness.system import guardian

SENTINEL = Path(__file__).resolve().parents[3] / "build" / "host_sentinel"
SLICE_ROUNDTRIPS = 1000  # about 5 ms here in the fast mode
WARMING_ROUNDTRIPS = 200  # first, not kept: the CPU may have been idle, its caches cold
MAX_GROUPS = 16  # process groups one slice may stop (native/host_sentinel.c)
ANSWER_TIMEOUT_S = 10.0  # a sentinel that does not answer a slice within this is ended (its user says why)


class Sentinel:
    """The sentinel's two processes on one CPU, asked for one slice at a time (benchmarks/host_modes.py uses it too).
    It exits at the end of its stdin, so it ends with this process however this one ends, its child with it."""

    def __init__(self, cpu: int):
        previous = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})  # this thread only, while it starts the sentinel: both its processes inherit it
        try:
            self.process = subprocess.Popen([str(SENTINEL)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, text=True, process_group=0)
        finally:
            os.sched_setaffinity(0, previous)
        guardian.started(self.process.pid)  # a group of its own, ended by the guardian if this process is killed

    def slice_total_ns(self, roundtrips: int) -> int:
        """ns for this many roundtrips, timed by the sentinel itself."""
        self.ask(roundtrips)
        return self.answer()[0]

    def ask(self, roundtrips: int, groups: tuple[int, ...] = ()) -> None:
        """Start a slice of this many roundtrips (answer() reads its time); with groups, the sentinel stops those
        process groups first and continues them after (MAX_GROUPS at most). The in-window pace asks every CPU's
        sentinel first, so that they run at once."""
        if len(groups) > MAX_GROUPS:
            raise ValueError(f"a slice stops at most {MAX_GROUPS} process groups, not {len(groups)}")
        self.process.stdin.write(" ".join(map(str, (roundtrips, *groups))) + "\n")
        self.process.stdin.flush()

    def answer(self) -> tuple[int, int | None]:
        """(ns of the slice asked for, ns the groups it stopped were paused, or None without groups), timed by the
        sentinel itself."""
        if not select.select([self.process.stdout], [], [], ANSWER_TIMEOUT_S)[0]:
            raise OSError(f"the host sentinel did not answer within {ANSWER_TIMEOUT_S:g} s")
        line = self.process.stdout.readline()
        if not line:
            raise OSError(f"the host sentinel exited (code {self.process.poll()})")
        fields = [int(field) for field in line.split()]
        return fields[0], fields[1] if len(fields) > 1 else None

    def slice_ns(self, roundtrips: int) -> float:
        """ns a roundtrip over a slice of this many."""
        return self.slice_total_ns(roundtrips) / roundtrips

    def close(self) -> None:
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        guardian.reaped(self.process.pid)


_sentinels: dict[int, Sentinel] = {}


def sentinel_on(cpu: int) -> Sentinel:
    """This run's sentinel on cpu, started (and warmed) at its first use."""
    sentinel = _sentinels.get(cpu)
    if sentinel is None:
        sentinel = Sentinel(cpu)
        try:
            sentinel.slice_ns(WARMING_ROUNDTRIPS)
        except (OSError, ValueError):
            sentinel.close()  # not kept: an answer it still owes would be read as the next slice's
            raise
        _sentinels[cpu] = sentinel
    return sentinel


def discard(cpu: int) -> None:
    """End cpu's sentinel after a failure: the next use starts a new one."""
    failed = _sentinels.pop(cpu, None)
    if failed is not None:
        failed.close()


def close_all() -> None:
    """End every sentinel of this process (each exits at the end of its stdin)."""
    while _sentinels:
        _sentinels.popitem()[1].close()
