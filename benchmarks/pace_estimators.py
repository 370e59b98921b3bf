"""How a window's pace is best read from its slices: stored default runs taken to the reference pace again from
each window's slices, with the plain mean of the slices, with their trimmed mean (the fastest and the slowest fifth
left out), and with the trimmed mean of slices whose fast-mode ones count as the mode's typical slice (the fast mode
of every slice timed so far in the run, replayed in the order the windows were measured, as the pacer reads it:
analysis/host_pace.window_pace_ns, SliceLog). The typical slice two ways: the median of every slice in the fast mode
(within 1.15x of its level; the pacer's until 2026-11-29 15:00 UTC) and the median of its main peak (within 1.03x:
"fast mode", the pacer's since). And "fast intervals": the cell's rate over the running pieces between pauses whose
neighbouring slices were all in the fast mode, at the mode's typical slice (analysis/host_pace.fast_intervals; windows
recorded since 2026-11-29 20:30 UTC keep their pieces; a window without them, or without a fast one, is read by the
fast mode).

For each run (run_bench.py's JSON, plain or .json.xz, paced with slices_ns kept): the median over its cells of the
CV of a cell's rounds and the cells within ±3% (the median's interval as the report's Precision: line takes it: the
range of 6 or 7 rounds, the 2nd lowest to the highest of 8), raw and at the reference pace by each estimator, and the
median ratio of each pace to the trimmed one (how far the scale moves). Pure arithmetic on recorded slices: nothing
is measured. Prints one JSON object on stdout and a line per run on stderr.
Usage: python -m benchmarks.pace_estimators RUN.json[.xz] [RUN.json[.xz] ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from pingpong.harness.analysis.host_modes import SLOW_FACTOR
from pingpong.harness.analysis.host_pace import (REFERENCE_SENTINEL_NS, FastMode, SliceLog, fast_intervals,
                                                replayed_paces, window_pace_ns)
from pingpong.harness.analysis.stats import RATE_DISTURBED_SIDE, summarize
from pingpong.harness.results.stored import read_json

ESTIMATORS = ("mean", "trimmed", "fast mode, every fast slice", "fast mode", "fast intervals")
WITHIN = 0.03


def paced_windows(run: dict) -> list[tuple[tuple[str, str], dict]]:
    """The run's paced windows that kept their slices, (server, client) and attempt, in the order they were measured
    (their start times; the file's order within one second)."""
    found = [((cell["server"], cell["client"]), a) for cell in run["cells"] for a in cell["attempts"]
             if a["status"] == "ok" and a.get("raw_roundtrips_per_s") and (a.get("host_pace") or {}).get("slices_ns")]
    return sorted(found, key=lambda item: item[1].get("started_at") or "")


def window_paces(run: dict) -> dict[str, list[tuple[tuple[str, str], float, float]]]:
    """Each estimator's (cell, raw rate, pace) of every paced window of the run (pure)."""
    windows = paced_windows(run)
    slices = [a["host_pace"]["slices_ns"] for _, a in windows]
    stopped = [(a["host_pace"].get("stop") or "", a["host_pace"]["slices_ns"]) for _, a in windows]
    paces = {"mean": [statistics.fmean(s) for s in slices], "trimmed": [window_pace_ns(s) for s in slices],
             "fast mode, every fast slice": replayed_paces(stopped, SLOW_FACTOR),
             "fast mode": replayed_paces(stopped), "fast intervals": fast_interval_paces(windows)}
    return {name: [(key, a["raw_roundtrips_per_s"], pace) for (key, a), pace in zip(windows, values)]
            for name, values in paces.items()}


def replayed_pieces(windows: list[tuple[tuple[str, str], dict]]) -> list[tuple[FastMode, dict | None]]:
    """Each window's fast mode, replayed in the order the windows were measured as for "fast mode", and its fast
    pieces read against it (analysis/host_pace.fast_intervals; None without)."""
    log = SliceLog()
    found = []
    for _, attempt in windows:
        pace = attempt["host_pace"]
        fast = log.add(pace.get("stop") or "", pace["slices_ns"])
        found.append((fast, fast_intervals(pace.get("intervals"), pace["slices_ns"], fast)))
    return found


def fast_interval_paces(windows: list[tuple[tuple[str, str], dict]]) -> list[float | None]:
    """Each window's pace such that raw x pace is the cell's rate over its fast pieces at the fast mode's typical
    slice; a window without a fast piece takes its "fast mode" pace."""
    return [fast.typical_ns * pieces["rate_ratio"] if pieces
            else window_pace_ns(attempt["host_pace"]["slices_ns"], fast=fast)
            for (_, attempt), (fast, pieces) in zip(windows, replayed_pieces(windows))]


def within(rates: list[float], share: float = WITHIN) -> bool:
    """Whether the median's interval lies within share of it, as the report's Precision: line takes it (the
    order-statistic interval of the rounds, a low one set aside first where the coverage allows: the range of 6 or 7
    rounds, the 2nd lowest to the highest of 8)."""
    return summarize(rates, RATE_DISTURBED_SIDE).precision <= share


def run_figures(run: dict) -> dict | None:
    """The run's median CV of a cell's rounds and its cells within ±3%, raw and by each estimator, and each pace's
    scale against the trimmed one (pure); None when no window kept its slices."""
    paces = window_paces(run)
    by_cell: dict[str, dict[tuple[str, str], list[float]]] = {name: {} for name in ("raw", *ESTIMATORS)}
    for key, raw, _ in paces["trimmed"]:
        by_cell["raw"].setdefault(key, []).append(raw)
    for name in ESTIMATORS:
        for key, raw, pace in paces[name]:
            by_cell[name].setdefault(key, []).append(raw * pace / REFERENCE_SENTINEL_NS)
    cells = [key for key, rates in by_cell["raw"].items() if len(rates) >= 3]
    if not cells:
        return None
    return {"cells": len(cells), "pieces": pieces_figures(run),
            "median_cv": {name: statistics.median(cv(by_cell[name][key]) for key in cells) for name in by_cell},
            "within": {name: sum(within(by_cell[name][key]) for key in cells) for name in by_cell},
            "over_trimmed": {name: statistics.median(pace / trimmed for (_, _, pace), (_, _, trimmed)
                                                     in zip(paces[name], paces["trimmed"]))
                             for name in ESTIMATORS}}


def pieces_figures(run: dict) -> dict:
    """How many of the run's paced windows kept their running pieces, how many had a fast one, and the median share
    of a window's running time in its fast pieces (pure)."""
    windows = paced_windows(run)
    shares = [pieces["running_share"] if pieces else 0.0
              for (_, attempt), (_, pieces) in zip(windows, replayed_pieces(windows))
              if "running_ns" in (attempt["host_pace"].get("intervals") or {})]
    return {"windows": len(windows), "with_pieces": len(shares),
            "with_a_fast_piece": sum(share > 0 for share in shares),
            "median_fast_share": statistics.median(shares) if shares else None}


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    found = []
    for path in args.runs:
        try:
            figures = run_figures(read_json(Path(path)))
        except (OSError, ValueError, KeyError) as exc:
            print(f"pace_estimators: {path}: {exc}", file=sys.stderr)
            return 2
        if figures is None:
            print(f"pace_estimators: {path}: no paced window kept its slices", file=sys.stderr)
            return 2
        found.append({"run": path, **figures})
        spread, near = figures["median_cv"], figures["within"]
        print(f"{Path(path).name}: {figures['cells']} cells; median CV of a cell's rounds (cells within "
              f"±{100 * WITHIN:g}%) raw {100 * spread['raw']:.1f}% ({near['raw']}), " + ", ".join(
                  f"{name} {100 * spread[name]:.1f}% ({near[name]}, scale {figures['over_trimmed'][name]:.3f})"
                  for name in ESTIMATORS) + "; windows with their running pieces {with_pieces} of {windows}, with a "
              "fast one {with_a_fast_piece}".format(**figures["pieces"]), file=sys.stderr)
    json.dump({"benchmark": "pace_estimators", "runs": found}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
