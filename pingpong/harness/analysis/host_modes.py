"""The host's speed over time, read from the host sentinel's slices (benchmarks/host_modes.py): pure functions.

The sentinel (native/host_sentinel.c) is a ping-pong between two C processes on one CPU; each slice is a fixed
number of its roundtrips, timed. Its ns per roundtrip moves only with the host: the same code, no allocation, no
network, nothing else of ours on that CPU. From a series of slices this module says
- where the host's fast level lies (a low quantile of the slices) and which slices ran in a slow mode (more than
  SLOW_FACTOR times that level), how long such stretches last, and how alike slices some time apart are
  (autocorrelation by lag);
- how much a window of the suite's length would vary from that alone (the windows' CV), and how often a cell
  measured in `rounds` such windows would have its median's interval within ±precision, by the suite's own
  criterion (stats.summarize with the rate's disturbed side) on windows drawn from the series;
- what a probe before and after each attempt could do: one slice just before the warmup, one just after the
  window, the attempt kept only when neither ran in the slow mode.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

from pingpong.harness.analysis.stats import RATE_DISTURBED_SIDE, summarize

FAST_QUANTILE = 0.10  # the fast level: this quantile of the slices' ns per roundtrip
SLOW_FACTOR = 1.15  # a slice more than this times the fast level ran in the slow mode


def observed_quantile(values: list[float], probability: float) -> float:
    """The value at this probability of the sorted values, nearest rank below: always one of the values (a level a
    slice really ran at), unlike analysis/precision.quantile, which interpolates between them."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(probability * (len(ordered) - 1))))]


def fast_level(ns_per_roundtrip: list[float]) -> float:
    return observed_quantile(ns_per_roundtrip, FAST_QUANTILE)


def slow_flags(ns_per_roundtrip: list[float], level: float, factor: float = SLOW_FACTOR) -> list[bool]:
    return [value > factor * level for value in ns_per_roundtrip]


def autocorrelation(values: list[float], lag: int) -> float | None:
    """The series' correlation with itself `lag` slices later; None when there is too little or no variation."""
    count = len(values) - lag
    if lag < 1 or count < 3:
        return None
    mean = statistics.fmean(values)
    variance = sum((value - mean) ** 2 for value in values)
    if variance == 0:
        return None
    return sum((values[i] - mean) * (values[i + lag] - mean) for i in range(count)) / variance


def episodes(flags: list[bool]) -> list[int]:
    """The lengths, in slices, of the runs of consecutive True flags."""
    lengths, current = [], 0
    for flag in flags:
        if flag:
            current += 1
        elif current:
            lengths.append(current)
            current = 0
    if current:
        lengths.append(current)
    return lengths


def window_rates(ns_per_roundtrip: list[float], slices_per_window: int) -> list[float]:
    """Roundtrips per second of consecutive, non-overlapping windows of slices_per_window slices each (each slice
    is the same number of roundtrips, so a window's rate is the inverse of its mean ns per roundtrip)."""
    return [1e9 * slices_per_window / sum(ns_per_roundtrip[start:start + slices_per_window])
            for start in range(0, len(ns_per_roundtrip) - slices_per_window + 1, slices_per_window)]


def coefficient_of_variation(values: list[float]) -> float | None:
    if len(values) < 2 or statistics.fmean(values) == 0:
        return None
    return statistics.stdev(values) / statistics.fmean(values)


def chance_within(rates: list[float], rounds: int, precision: float, draws: int = 2000, seed: int = 1) -> float | None:
    """How often `rounds` windows drawn from these (without replacement) give a median whose interval lies within
    ±precision, as the suite decides it for a cell; None with fewer windows than rounds."""
    if len(rates) < rounds or rounds < 2:
        return None
    generator = random.Random(seed)
    hits = 0
    for _ in range(draws):
        summary = summarize(generator.sample(rates, rounds), RATE_DISTURBED_SIDE)
        hits += summary.precision is not None and summary.precision <= precision
    return hits / draws


@dataclass(frozen=True)
class Gated:
    """Simulated attempts over the series: every one, and those whose probes both ran in the fast mode."""

    every: list[float]  # each attempt's window rate
    kept: list[float]


def gated_attempts(ns_per_roundtrip: list[float], warmup_slices: int, window_slices: int, level: float,
                   factor: float = SLOW_FACTOR, step: int | None = None) -> Gated:
    """Attempts laid over the series every `step` slices (default: a whole attempt, so none overlap): a probe
    slice, the warmup, the window, a probe slice; kept when neither probe ran in the slow mode."""
    span = 1 + warmup_slices + window_slices + 1
    every, kept = [], []
    for start in range(0, len(ns_per_roundtrip) - span + 1, step or span):
        window = ns_per_roundtrip[start + 1 + warmup_slices:start + 1 + warmup_slices + window_slices]
        rate = 1e9 * len(window) / sum(window)
        every.append(rate)
        before, after = ns_per_roundtrip[start], ns_per_roundtrip[start + span - 1]
        if max(before, after) <= factor * level:
            kept.append(rate)
    return Gated(every, kept)


def share_below(rates: list[float], reference: float, factor: float) -> float | None:
    """The share of rates below factor times the reference (e.g. 0.9: more than 10% slower)."""
    return sum(rate < factor * reference for rate in rates) / len(rates) if rates else None


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def describe(ns_per_roundtrip: list[float], slice_roundtrips: int, window_s: float, warmup_s: float,
             rounds: int, precision: float, lags_s: tuple[float, ...] = (0.01, 0.05, 0.2, 0.5, 1.0, 2.0)) -> dict:
    """What the series says, as the benchmark's JSON "summary": levels, the slow mode, its stretches, the
    autocorrelation at lags given in seconds, and what windows of window_s would show (with and without the
    probes)."""
    if len(ns_per_roundtrip) < 10:
        raise ValueError("a description needs at least 10 slices")
    slice_s = statistics.median(ns_per_roundtrip) * slice_roundtrips / 1e9
    level = fast_level(ns_per_roundtrip)
    flags = slow_flags(ns_per_roundtrip, level)
    slow = [value for value, flag in zip(ns_per_roundtrip, flags) if flag]
    fast = [value for value, flag in zip(ns_per_roundtrip, flags) if not flag]
    stretches = episodes(flags)
    window_slices = max(1, round(window_s / slice_s))
    warmup_slices = max(0, round(warmup_s / slice_s))
    windows = window_rates(ns_per_roundtrip, window_slices)
    gated = gated_attempts(ns_per_roundtrip, warmup_slices, window_slices, level)
    kept_median = statistics.median(gated.kept) if gated.kept else None
    every_median = statistics.median(gated.every) if gated.every else None
    return {
        "slices": len(ns_per_roundtrip), "slice_roundtrips": slice_roundtrips, "slice_s": round(slice_s, 5),
        "fast_level_ns": round(level, 1), "fast_quantile": FAST_QUANTILE, "slow_factor": SLOW_FACTOR,
        "median_ns": round(statistics.median(ns_per_roundtrip), 1),
        "fast_mode_median_ns": _rounded(statistics.median(fast), 1) if fast else None,
        "slow_mode_median_ns": _rounded(statistics.median(slow), 1) if slow else None,
        "slow_share": round(len(slow) / len(ns_per_roundtrip), 4),
        "slow_stretches": {"count": len(stretches),
                           "median_s": _rounded(statistics.median(stretches) * slice_s, 4) if stretches else None,
                           "p90_s": _rounded(observed_quantile(stretches, 0.9) * slice_s, 4) if stretches else None,
                           "longest_s": _rounded(max(stretches) * slice_s, 4) if stretches else None},
        "autocorrelation": {f"{lag:g}s": _rounded(autocorrelation(ns_per_roundtrip, max(1, round(lag / slice_s))))
                            for lag in lags_s},
        "windows": {"window_s": window_s, "slices_per_window": window_slices, "count": len(windows),
                    "cv": _rounded(coefficient_of_variation(windows), 4),
                    "rounds": rounds, "precision": precision,
                    "chance_within": _rounded(chance_within(windows, rounds, precision))},
        "probed_attempts": {"warmup_s": warmup_s, "warmup_slices": warmup_slices, "attempts": len(gated.every),
                            "kept": len(gated.kept),
                            "kept_share": _rounded(len(gated.kept) / len(gated.every)) if gated.every else None,
                            "cv_every": _rounded(coefficient_of_variation(gated.every), 4),
                            "cv_kept": _rounded(coefficient_of_variation(gated.kept), 4),
                            "slower_than_0.9_every": _rounded(share_below(gated.every, every_median or 0, 0.9)),
                            "slower_than_0.9_kept": _rounded(share_below(gated.kept, kept_median or 0, 0.9)),
                            "chance_within_every": _rounded(chance_within(gated.every, rounds, precision)),
                            "chance_within_kept": _rounded(chance_within(gated.kept, rounds, precision))},
    }


def _percent(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:.{digits}%}"


def interpretation(summary: dict) -> list[str]:
    """The summary in a few lines for a reader (stderr)."""
    windows, probed = summary["windows"], summary["probed_attempts"]
    stretches = summary["slow_stretches"]
    lines = [f"fast level {summary['fast_level_ns']:.0f} ns a roundtrip; {summary['slow_share']:.0%} of "
             f"{summary['slices']} slices of {summary['slice_s'] * 1e3:.1f} ms ran in the slow mode (more than "
             f"{summary['slow_factor']}x), its median {summary['slow_mode_median_ns'] or math.nan:.0f} ns against "
             f"{summary['fast_mode_median_ns'] or math.nan:.0f}"]
    if stretches["count"]:
        lines.append(f"slow stretches: {stretches['count']}, median {stretches['median_s'] * 1e3:.0f} ms, 90th "
                     f"percentile {stretches['p90_s'] * 1e3:.0f} ms, longest {stretches['longest_s'] * 1e3:.0f} ms")
    lines.append("autocorrelation: " + ", ".join(f"{lag} {value}" for lag, value in
                                                   summary["autocorrelation"].items()))
    lines.append(f"windows of {windows['window_s']} s: CV {_percent(windows['cv'], 1)}; a cell of "
                 f"{windows['rounds']} such windows within ±{windows['precision']:.0%}: "
                 f"{_percent(windows['chance_within'])} of draws")
    if probed["attempts"]:
        lines.append(f"with a probe slice before the warmup and after the window: {probed['kept']} of "
                     f"{probed['attempts']} attempts kept, CV {_percent(probed['cv_every'], 1)} -> "
                     f"{_percent(probed['cv_kept'], 1)}; a cell within ±{windows['precision']:.0%} at "
                     f"{windows['rounds']} rounds: {_percent(probed['chance_within_every'])} -> "
                     f"{_percent(probed['chance_within_kept'])} of draws")
    return lines


@dataclass(frozen=True)
class ProbeFigures:
    """What a run's host probes did (PINGPONG_HOST_PROBE=1, files from before the in-window pace, 2026-11-27):
    attempts probed, set aside and measured again, and the cells within the run's target counted as measured and,
    paired in the same run, with each round's first attempt instead (as without the probe)."""

    probed: int
    set_aside: int
    slow_kept: int  # kept with a slow probe: measured again and slow again, or not measured again (the cap, the budget)
    cells: int
    within: int | None  # None without a target (--repeat)
    within_first: int | None
    target: float | None

    def sentence(self) -> str:
        text = (f"the host probe set aside {self.set_aside} of {self.probed} attempts (the host in its slow mode just "
                f"before or after them) and measured their units again; {self.slow_kept} kept attempts had a slow "
                f"probe (slow again, or beyond the cap on retries)")
        if self.target is None:
            return text
        return (text + f"; {self.within} of {self.cells} cells within ±{self.target:.0%} as measured, "
                       f"{self.within_first} with each round's first attempt instead")


def probe_figures(run) -> ProbeFigures | None:
    """The run's ProbeFigures (a RunResult), or None when no attempt was probed; without a target (--repeat) the
    cells are not counted against one."""
    attempts = [attempt for cell in run.cells for attempt in cell.attempts if attempt.host_probe]
    target = (run.configuration.get("rounds") or {}).get("precision")
    if not attempts:
        return None
    cells = within = within_first = 0
    for cell in run.cells:
        kept = cell.rates()
        first: dict[int, float] = {}
        for attempt in cell.attempts:
            if (attempt.ok or attempt.set_aside) and attempt.roundtrips_per_s and attempt.repeat not in first:
                first[attempt.repeat] = attempt.roundtrips_per_s
        if len(kept) < 2 or len(first) < 2:
            continue
        cells += 1
        if target is not None:
            within += summarize(kept, RATE_DISTURBED_SIDE).precision <= target
            within_first += summarize(list(first.values()), RATE_DISTURBED_SIDE).precision <= target
    if target is None:
        within = within_first = None
    set_aside = sum(attempt.set_aside for attempt in attempts)
    slow_kept = sum(attempt.ok and attempt.host_probe.get("slow") is True for attempt in attempts)
    return ProbeFigures(len(attempts), set_aside, slow_kept, cells, within, within_first, target)
