"""Rates at the reference pace: pure functions of a window's roundtrips and the host's pace measured in it.

A window with the host's pace in it (measure/pacer.py) has the cell's roundtrips, its length, the time its pauses
took, and the host sentinel's ns per roundtrip over its slices. From them:
- the raw rate: roundtrips per second the cell ran, its pauses left out;
- the unit-free figure: the cell's roundtrip measured in host-sentinel roundtrips timed in the same window. It
  carries across hours as far as the host slows the cell and the sentinel alike; across hosts only for cells whose
  time goes to the kernel, as the sentinel's does (a faster host of 2026-11-29 ran the C floor at the same figure and
  the interpreted pairs at 0.52-0.60 of it: docs/methodology.md, "The fast mode's jitter, and another host");
- the rate at the reference pace: the raw rate as it would be on a host whose sentinel roundtrip takes
  REFERENCE_SENTINEL_NS, i.e. 1e9 / (unit-free figure x REFERENCE_SENTINEL_NS).

The sentinel's class is part of the scale: on one CPU it now runs in the real-time class and takes the CPU from the
cell (measure/pacer.py, STOP_PREEMPT; the record's "stop"), where the sentinel that stopped the cell ran as an ordinary
process (files from before 2026-11-27 15:00 UTC, and where the real-time class is refused). The real-time one's slices
time a roundtrip about 15% shorter (11-25% by runtime, docs/methodology.md), so windows timed by the two are on scales
about that far apart (sentinel_classes says which a run has).

The reference is a fixed constant, not the run's own fast level or median: a constant puts every run, at any hour
and on any host, on one scale, so that two runs' rates compare as their unit-free figures do; the run's own levels
move with the hour (and would move every rate with them). 10 us is a round figure near this project's hosts' fast
level (11.8 us on the EPYC VM of 2026-11-27), so the rates read near what such a host does when it runs fast.
"""

from __future__ import annotations

import collections
import statistics
import threading
from dataclasses import dataclass
from typing import Any

from pingpong.harness.analysis.host_modes import FAST_QUANTILE, SLOW_FACTOR, observed_quantile

REFERENCE_SENTINEL_NS = 10_000.0  # ns per host-sentinel roundtrip at the reference pace
MIN_PAUSES = 1  # a window without a pause is not paced. One slice says the pace, less precisely than a dozen; a
# busy client of several threads on one CPU delays the sentinel's turn (cpprestsdk's: 2-9 pauses in 0.2 s windows
# that had room for 11, 2026-11-27), and failing such a window would lose a measured attempt for a noisier figure


# How a paced window's pause kept the cell off its CPUs (the record's "stop", measure/pacer.py):
STOP_PREEMPT = "preempt"  # one CPU: the sentinel runs in the real-time class and takes the CPU; no one is stopped,
# the groups get a SIGCONT after the slice, which the clients count
STOP_SENTINEL = "sentinel"  # one CPU: the sentinel stops the groups (SIGSTOP) and continues them (SIGCONT) itself
STOP_ORCHESTRATOR = "orchestrator"  # several CPUs: stopped and continued from the orchestrator, around every slice

TRIM_SHARE = 0.2  # of a window's slices, the fastest and the slowest this share each are left out of its pace


# The fast mode's typical slice is the median of its main peak, the slices within this factor of the fast level. On
# the calm host of 2026-11-29 afternoon the slices within SLOW_FACTOR of the level formed three peaks, at 1.00, 1.04
# and 1.08-1.10 times it; in windows whose slices sat in the upper two the cell ran no slower (its raw rate
# 0.993-1.001 of its median), and their share moved over a run (most in its first minute): the median of all of them
# moved the typical slice, and every rate with it, by 1.7% between a run's first round and its fifth. 1.02, 1.03 and
# 1.05 read alike over 18 stored runs (docs/methodology.md, "The fast mode's peak").
FAST_PEAK_FACTOR = 1.03


@dataclass(frozen=True)
class FastMode:
    """The host's fast mode as the slices timed so far show it: its level (the FAST_QUANTILE of every slice, as the
    report's Pace: line reads it) and what a slice in the fast mode typically reads: the median of its main peak, the
    slices within FAST_PEAK_FACTOR of that level."""

    level_ns: float
    typical_ns: float
    slices: int

    def to_json(self) -> dict[str, Any]:
        return {"level_ns": round(self.level_ns, 1), "typical_ns": round(self.typical_ns, 1), "slices": self.slices}


def fast_mode(slices_ns: list[float], peak: float = FAST_PEAK_FACTOR) -> FastMode | None:
    """The fast mode of these slices (pure); None without slices. peak: the typical slice is the median of those
    within this factor of the level (SLOW_FACTOR: of every slice in the fast mode, as before 2026-11-29 15:00 UTC)."""
    if not slices_ns:
        return None
    level = observed_quantile(slices_ns, FAST_QUANTILE)
    return FastMode(level_ns=level, typical_ns=statistics.median(v for v in slices_ns if v <= peak * level),
                    slices=len(slices_ns))


def window_pace_ns(slices_ns: list[float], trim: float = TRIM_SHARE, fast: FastMode | None = None) -> float | None:
    """A window's pace from its slices' ns per sentinel roundtrip: their mean with the fastest and the slowest `trim`
    of them left out (none with fewer than 1 / trim slices); None without slices. A slice the host took the vCPU
    from for milliseconds reads several times slower and says nothing of the cell's running time around it, which
    a plain mean would carry whole into the window's pace: over five default runs the trimmed mean left a cell's
    rounds 5-20% less spread (benchmarks/pace_estimators.py; docs/methodology.md, the sentinel takes the CPU).

    Given the host's fast mode, a slice within SLOW_FACTOR of its level counts as the mode's typical slice: it says
    the host was fast, and how much it read above or below the typical one is the sentinel's own jitter (and what the
    cell left in the caches), not the host's pace. On a calm host (5% of slices slow, 2026-11-29 12:09 UTC) the
    slices' jitter alone had made the rates at the reference pace spread more than the raw ones (a median CV of a
    cell's rounds of 4.0% against 3.1%); counted so, 2.8% (docs/methodology.md, "The fast mode's jitter")."""
    if not slices_ns:
        return None
    if fast is not None:
        slices_ns = [fast.typical_ns if value <= SLOW_FACTOR * fast.level_ns else value for value in slices_ns]
    ordered = sorted(slices_ns)
    cut = int(len(ordered) * trim)
    kept = ordered[cut:len(ordered) - cut] if cut else ordered
    return sum(kept) / len(kept)


class SliceLog:
    """Every slice the pacers of a process timed (measure/pacer.py keeps one, RUN_SLICES), by how they stopped the
    cell (the two sentinel classes time a roundtrip on scales about 15% apart): the host's fast mode that each
    window's pace is read against (window_pace_ns). A run's first windows read it from the few slices seen so far, later
    ones from thousands (the last LOGGED_SLICES, so that a long session follows a host whose fast level moves); each
    window's record keeps the fast mode it was read against."""

    LOGGED_SLICES = 20_000  # about 5 default runs' slices

    def __init__(self) -> None:
        self._slices: dict[str, collections.deque[float]] = {}
        self._lock = threading.Lock()

    def add(self, stop_mode: str, slices_ns: list[float], peak: float = FAST_PEAK_FACTOR) -> FastMode | None:
        """Logs a window's slices; the fast mode of every slice logged in that stop mode, these included (peak: as
        fast_mode's)."""
        with self._lock:
            logged = self._slices.setdefault(stop_mode, collections.deque(maxlen=self.LOGGED_SLICES))
            logged.extend(slices_ns)
            return fast_mode(list(logged), peak)


def replayed_paces(windows: list[tuple[str, list[float]]], peak: float = FAST_PEAK_FACTOR) -> list[float | None]:
    """The pace of each window, (stop mode, slices) in the order they were measured, as a pacer with a fresh SliceLog
    would have read it (pure): so that stored runs can be read again with the fast mode (peak: as fast_mode's)."""
    log = SliceLog()
    return [window_pace_ns(slices, fast=log.add(stop_mode, slices, peak)) for stop_mode, slices in windows]


def running_intervals(start: tuple[int, int], pauses: list[tuple[int, int, int]],
                      end: tuple[int, int]) -> dict[str, list[int]]:
    """A paced window's running time cut at its pauses, with the data segments the cell's client received in each
    piece (pure). start: (monotonic ns, segments so far) as the pauses began; pauses: (monotonic ns it began, ns it
    lasted, segments read while it held the cell) each; end: (monotonic ns, segments) as they ended. Piece k runs up
    to pause k, the last one from the last pause to the end."""
    running: list[int] = []
    segments: list[int] = []
    since_ns, since_count = start
    for began_ns, paused_ns, count in pauses:
        running.append(max(0, began_ns - since_ns))
        segments.append(count - since_count)
        since_ns, since_count = began_ns + paused_ns, count
    running.append(max(0, end[0] - since_ns))
    segments.append(end[1] - since_count)
    return {"running_ns": running, "segments_in": segments}


def fast_intervals(intervals: dict[str, Any] | None, slices_ns: list[float],
                   fast: FastMode | None) -> dict[str, float] | None:
    """How the cell ran while the host ran fast (pure): over the window's running pieces (running_intervals) whose
    neighbouring slices were both in the host's fast mode (within SLOW_FACTOR of its level), the cell's rate against
    its rate over every piece ("rate_ratio"), and their share of the running time ("running_share"); the last piece,
    after the last slice, is in neither. None without pieces, a fast mode, a fast piece or segments. The cell
    measured only where the host ran fast needs no assumption of how a slow stretch slows it (docs/methodology.md,
    "What the pace leaves on a noisy host")."""
    if not intervals or fast is None or "running_ns" not in intervals:
        return None
    running, segments = intervals["running_ns"], intervals["segments_in"]
    if len(running) != len(slices_ns) + 1 or not slices_ns:
        return None
    # the last piece is left out of both rates: it runs on until the orchestrator has read the window's end, past
    # the client's own (its rate read 0.96-0.97 of the window's middle pieces', the median over a default run's)
    in_fast_mode = [value <= SLOW_FACTOR * fast.level_ns for value in slices_ns]
    counted = range(len(running) - 1)
    chosen = [k for k in counted if in_fast_mode[k] and (k == 0 or in_fast_mode[k - 1])]
    chosen_ns = sum(running[k] for k in chosen)
    chosen_segments = sum(segments[k] for k in chosen)
    all_ns = sum(running[k] for k in counted)
    all_segments = sum(segments[k] for k in counted)
    if not chosen_ns or not chosen_segments or not all_ns or not all_segments:
        return None
    return {"rate_ratio": (chosen_segments / chosen_ns) / (all_segments / all_ns), "running_share": chosen_ns / all_ns}


MIN_BUSY = 0.25  # on one CPU, a cell busy less than this share of its running time waits on more than the CPU
# (a CPU-bound cell is busy 0.83-1.0 of it; two C-floor windows of 2026-11-27 read 0.48-0.52, the host slow)


def wait_bound(host_pace: dict[str, Any] | None, cpu_s: float | None, wall_s: float | None) -> str | None:
    """Why a paced window's rate is not taken to the reference pace, or None: on one CPU, a cell whose processes were
    busy less than MIN_BUSY of the window's running time spends its roundtrips waiting on something a pause does not
    stop (a kernel timer such as a delayed ACK, another host): its roundtrips go on in wall time through the pauses,
    and the CPU's pace does not set its rate. Its rate stays the client's own, over the whole window."""
    if not host_pace or host_pace.get("off") or len(host_pace.get("cpus") or ()) != 1:
        return None
    if cpu_s is None or not wall_s:
        return None
    running_s = wall_s - host_pace.get("paused_s", 0.0)
    if running_s <= 0 or cpu_s / running_s >= MIN_BUSY:
        return None
    return (f"the cell's processes were busy {cpu_s / running_s:.0%} of the window's running time on its one CPU: "
            "its roundtrips wait on more than the CPU (a timer, another host), which a pause does not stop, so its "
            "rate is the client's own over the whole window, not taken to the reference pace")


@dataclass(frozen=True)
class PacedWindow:
    """A window's figures with the host's pace in it."""

    running_s: float  # the window less its pauses
    raw_roundtrips_per_s: float  # roundtrips / running_s
    sentinel_ns_per_roundtrip: float  # the host's pace over the window's slices
    sentinel_roundtrips_per_roundtrip: float  # the unit-free figure
    roundtrips_per_s: float  # at the reference pace


def paced_window(roundtrips: int, elapsed_s: float, host_pace: dict[str, Any] | None) -> PacedWindow | None:
    """The window's figures at the reference pace; None when it had no usable pace (off, too few pauses, or
    nothing left of its time once the pauses are out)."""
    if not host_pace or host_pace.get("off") or not host_pace.get("sentinel_ns_per_roundtrip"):
        return None
    if host_pace.get("pauses", 0) < MIN_PAUSES or roundtrips <= 0:
        return None
    running_s = elapsed_s - host_pace["paused_s"]
    if running_s <= 0:
        return None
    raw = roundtrips / running_s
    sentinel_ns = float(host_pace["sentinel_ns_per_roundtrip"])
    unit_free = 1e9 / raw / sentinel_ns
    return PacedWindow(running_s=running_s, raw_roundtrips_per_s=raw, sentinel_ns_per_roundtrip=sentinel_ns,
                       sentinel_roundtrips_per_roundtrip=unit_free,
                       roundtrips_per_s=1e9 / (unit_free * REFERENCE_SENTINEL_NS))


@dataclass(frozen=True)
class RunPace:
    """What the host's pace did over a run's paced windows: the sentinel's fast level and slow share over every
    slice, the pauses' share of the windows, and the windows' paces."""

    attempts: int  # paced attempts
    slices: int
    fast_level_ns: float  # FAST_QUANTILE of every slice's ns per roundtrip
    slow_share: float  # of the slices above SLOW_FACTOR x the fast level
    median_window_ns: float  # the median window's sentinel ns per roundtrip
    paused_share: float  # of the paced windows' time spent paused
    off: dict[str, int]  # unpaced attempts by reason
    classes: dict[str, int]  # paced attempts by the sentinel's class (sentinel_class)

    def sentence(self) -> str:
        return (f"the host's pace in the windows: sentinel fast level {self.fast_level_ns / 1000:.1f} µs a "
                f"roundtrip, {100 * self.slow_share:.0f}% of {self.slices:,} slices slower than "
                f"{SLOW_FACTOR:g}× it, a window's median {self.median_window_ns / 1000:.1f} µs; "
                f"pauses took {100 * self.paused_share:.1f}% of {self.attempts} windows "
                f"({classes_text(self.classes)}); rates at the reference pace of {REFERENCE_SENTINEL_NS / 1000:g} µs "
                "a sentinel roundtrip")


REAL_TIME = "real-time"  # the sentinel took the CPU in the real-time class (the record's stop: preempt)
ORDINARY = "ordinary"  # the sentinel ran as an ordinary process and stopped the cell (stop: sentinel, orchestrator,
# or absent: files from before the real-time sentinel)


def sentinel_class(host_pace: dict[str, Any]) -> str:
    """The class the sentinel of a paced window ran in: REAL_TIME or ORDINARY (the two time a roundtrip on scales
    about 15% apart)."""
    return REAL_TIME if host_pace.get("stop") == STOP_PREEMPT else ORDINARY


def classes_text(classes: dict[str, int]) -> str:
    """How a run's windows were paused, in words."""
    words = {REAL_TIME: "the sentinel in the real-time class, taking the CPU from the cell",
             ORDINARY: "the cell stopped with SIGSTOP, the sentinel an ordinary process"}
    return "; ".join(f"{count} with {words[name]}" if len(classes) > 1 else words[name]
                     for name, count in sorted(classes.items()))


def sentinel_classes(run) -> set[str]:
    """The sentinel classes of a run's (records.RunResult) paced windows on one CPU: the ones the class depends on
    (a cell on several CPUs is stopped from the orchestrator and timed by ordinary sentinels wherever it runs)."""
    return {sentinel_class(a.host_pace) for cell in run.cells for a in cell.attempts
            if a.ok and a.paced and a.host_pace and len(a.host_pace.get("cpus") or ()) == 1
            and a.host_pace.get("stop") != STOP_ORCHESTRATOR}


def is_paced(run) -> bool:
    """Whether any of the run's (records.RunResult) rates is at the reference pace."""
    return any(attempt.paced for cell in run.cells for attempt in cell.attempts)


def run_pace(run) -> RunPace | None:
    """The run's (records.RunResult) pace figures from its attempts; None when none was paced."""
    attempts = [attempt for cell in run.cells for attempt in cell.attempts]
    paced = [a for a in attempts if a.ok and a.paced and a.host_pace]
    off: dict[str, int] = {}
    for attempt in attempts:
        reason = (attempt.host_pace or {}).get("off")
        if attempt.ok and reason:
            off[reason] = off.get(reason, 0) + 1
    if not paced:
        return None
    slices = [value for a in paced for value in a.host_pace.get("slices_ns") or ()]
    level = observed_quantile(slices, FAST_QUANTILE) if slices else float("nan")
    classes: dict[str, int] = {}
    for attempt in paced:
        name = sentinel_class(attempt.host_pace)
        classes[name] = classes.get(name, 0) + 1
    paused = sum(a.host_pace["paused_s"] for a in paced)
    elapsed = sum(a.elapsed_s for a in paced if a.elapsed_s)
    return RunPace(attempts=len(paced), slices=len(slices), fast_level_ns=level,
                   slow_share=(sum(value > SLOW_FACTOR * level for value in slices) / len(slices)) if slices else 0.0,
                   median_window_ns=statistics.median(a.host_pace["sentinel_ns_per_roundtrip"] for a in paced),
                   paused_share=paused / elapsed if elapsed else 0.0, off=off, classes=classes)


def reference_pace_text(run) -> str:
    """What a rate heading adds for a run (records.RunResult) with rates at the reference pace; "" otherwise."""
    if not is_paced(run):
        return ""
    return (f" at the reference pace (a host-sentinel roundtrip of {REFERENCE_SENTINEL_NS / 1000:g} µs; raw rates "
            "in the files)")
