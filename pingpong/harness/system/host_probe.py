"""The host probe: is this CPU running in the host's slow mode right now? Asked before and after an attempt.

On this shared VM each vCPU now and then runs the same work about 1.5x slower for a stretch of milliseconds to
seconds, independently of the other vCPU (benchmarks/host_modes.py; docs/methodology.md, "The host's two speeds").
On one CPU a ping-pong is all CPU, so an attempt measured in such a stretch reads as a slow round of its cell
whatever its libraries did. The probe times the host sentinel (native/host_sentinel.c: two C processes passing one
byte over a socketpair) for one slice on each measured CPU while nothing of ours runs there: just before an
attempt's client gets its go, and just after it has exited. Each CPU's fast level is a low quantile of every slice
it has timed in this run, starting from a calibration of CALIBRATION_SLICES at first use; a slice above
SLOW_FACTOR times that level ran in the slow mode.

On by the measurement switch HOST_PROBE_ENV ("1"). The sentinels are started once per CPU and run until the run
ends (close_all) or this process does: each exits at the end of its stdin, its child with it, and the guardian
ends its process group if this process is killed.
"""

from __future__ import annotations

import os
import select
import subprocess
from pathlib import Path

from pingpong.contract import HOST_PROBE_ENV
from pingpong.harness.analysis.host_modes import FAST_QUANTILE, SLOW_FACTOR, observed_quantile
from pingpong.harness.system import guardian

SENTINEL = Path(__file__).resolve().parents[3] / "build" / "host_sentinel"
SLICE_ROUNDTRIPS = 1000  # about 5 ms here in the fast mode
WARMING_ROUNDTRIPS = 200  # first, not kept: the CPU may have been idle, its caches cold
CALIBRATION_SLICES = 40  # at a CPU's first probe: about 0.2 s
ANSWER_TIMEOUT_S = 10.0  # a sentinel that does not answer a slice within this is ended (the probe says why)


def enabled() -> bool:
    return os.environ.get(HOST_PROBE_ENV) == "1"


class Sentinel:
    """The sentinel's two processes on one CPU, asked for one slice at a time (benchmarks/host_modes.py uses it too).
    It exits at the end of its stdin, so it ends with this process however this one ends, its child with it."""

    def __init__(self, cpu: int):
        self.process = subprocess.Popen(["taskset", "-c", str(cpu), str(SENTINEL)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        process_group=0)
        guardian.started(self.process.pid)  # a group of its own, ended by the guardian if this process is killed
        self.slices_ns: list[float] = []  # ns per roundtrip of every kept slice, for the fast level

    def slice_total_ns(self, roundtrips: int) -> int:
        """ns for this many roundtrips, timed by the sentinel itself."""
        self.process.stdin.write(f"{roundtrips}\n")
        self.process.stdin.flush()
        if not select.select([self.process.stdout], [], [], ANSWER_TIMEOUT_S)[0]:
            raise OSError(f"the host sentinel did not answer within {ANSWER_TIMEOUT_S:g} s")
        line = self.process.stdout.readline()
        if not line:
            raise OSError(f"the host sentinel exited (code {self.process.poll()})")
        return int(line)

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


def _sentinel(cpu: int) -> Sentinel:
    sentinel = _sentinels.get(cpu)
    if sentinel is None:
        sentinel = _sentinels[cpu] = Sentinel(cpu)
        sentinel.slice_ns(WARMING_ROUNDTRIPS)
        sentinel.slices_ns.extend(sentinel.slice_ns(SLICE_ROUNDTRIPS) for _ in range(CALIBRATION_SLICES))
    return sentinel


def probe(cpus: set[int]) -> dict[str, dict[str, float]] | str:
    """{"cpu1": {"ns": this slice's ns per roundtrip, "level_ns": the CPU's fast level}} for each CPU, or why the
    probe could not be read (one line)."""
    if not SENTINEL.exists():
        return f"{SENTINEL.name} is not built (sh native/build.sh)"
    found = {}
    try:
        for cpu in sorted(cpus):
            sentinel = _sentinel(cpu)
            sentinel.slice_ns(WARMING_ROUNDTRIPS)
            value = sentinel.slice_ns(SLICE_ROUNDTRIPS)
            sentinel.slices_ns.append(value)
            found[f"cpu{cpu}"] = {"ns": round(value, 1),
                                  "level_ns": round(observed_quantile(sentinel.slices_ns, FAST_QUANTILE), 1)}
    except (OSError, ValueError) as exc:
        failed = _sentinels.pop(cpu, None)  # the next probe starts a new one
        if failed is not None:
            failed.close()
        return f"the host probe failed: {exc}"
    return found


def verdict(before: dict | str, after: dict | str) -> dict:
    """The attempt's host_probe record: both probes, and whether either ran in the slow mode on any CPU (None when a
    probe could not be read)."""
    record: dict = {"before": before, "after": after, "slow_factor": SLOW_FACTOR}
    if isinstance(before, str) or isinstance(after, str):
        record["slow"] = None
        return record
    readings = list(before.values()) + list(after.values())
    record["slow"] = any(reading["ns"] > SLOW_FACTOR * reading["level_ns"] for reading in readings)
    return record


def close_all() -> None:
    """End every sentinel of this process (each exits at the end of its stdin)."""
    while _sentinels:
        _sentinels.popitem()[1].close()
