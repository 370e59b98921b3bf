"""How each cell's rate follows the host sentinel's pace across a run's rounds, and whether a slope other than 1 would
take more of the host out of the rates at the reference pace than the pace itself does.

The reference pace takes a window's raw rate to raw x pace / reference: it assumes the cell slows exactly as the
sentinel does (an elasticity of 1). For each stored run (run_bench.py's JSON, plain or .json.xz, paced with slices_ns
kept; each window's pace read as the pacer reads it, analysis/host_pace, the fast mode replayed in the order the
windows were measured) and each cell with 5 rounds or more, this reads the least-squares slope of log raw rate on log
pace (1: the cell slows as the sentinel; above 1: more), and the median over the cells of the CV of a cell's rounds:
- raw, and at the pace (a slope of 1: what the report prints);
- with one slope for the whole run, fitted on every cell's rounds at once (each cell about its own means);
- with a slope per cell fitted on its other rounds (each round left out of its own slope);
- with a slope per cell taken from the other runs given (the median of its slopes there), so that nothing of a run
  sets its own correction. A cell's rate is then raw x (pace / its median pace) ^ slope: a CV does not depend on the
  scale.
Per cell over all the runs: its slopes' median, range and how many were above 1. Pure arithmetic on recorded slices:
nothing is measured. Prints one JSON object on stdout and a line per run on stderr.
Usage: python -m benchmarks.cell_elasticity RUN.json[.xz] [RUN.json[.xz] ...]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from benchmarks.pace_estimators import cv, window_paces
from pingpong.harness.results.stored import read_json

MIN_ROUNDS = 5  # a cell with fewer paced rounds in a run is left out of it
Cell = tuple[str, str]
Points = list[tuple[float, float]]  # (raw rate, pace ns) of each round

ESTIMATORS = ("raw", "pace", "one slope for the run", "slope per cell, round left out",
              "slope per cell, from the other runs")


def cell_points(run: dict) -> dict[Cell, Points]:
    """Each cell's (raw rate, pace) of every paced round, the pace read with the fast mode (pure)."""
    found: dict[Cell, Points] = {}
    for key, raw, pace in window_paces(run)["fast mode"]:
        if pace:
            found.setdefault(key, []).append((raw, pace))
    return {key: points for key, points in found.items() if len(points) >= MIN_ROUNDS}


def _centred(points: Points) -> tuple[list[float], list[float]]:
    """log pace and log raw rate, each about its mean."""
    paces = [math.log(pace) for _, pace in points]
    rates = [math.log(raw) for raw, _ in points]
    mean_pace, mean_rate = statistics.fmean(paces), statistics.fmean(rates)
    return [value - mean_pace for value in paces], [value - mean_rate for value in rates]


def _slope(paces: list[float], rates: list[float]) -> float:
    spread = sum(value * value for value in paces)
    return -sum(p * r for p, r in zip(paces, rates)) / spread if spread > 0 else 1.0


def slope(points: Points) -> float:
    """How many per cent the cell's rate fell per per cent the sentinel's pace rose across these rounds: the
    least-squares slope of log raw rate on log pace, negated (1 when the pace did not move)."""
    return _slope(*_centred(points))


def pooled_slope(cells: dict[Cell, Points]) -> float:
    """One slope for every cell's rounds at once, each cell about its own means."""
    paces: list[float] = []
    rates: list[float] = []
    for points in cells.values():
        cell_paces, cell_rates = _centred(points)
        paces += cell_paces
        rates += cell_rates
    return _slope(paces, rates)


def at_slope(points: Points, elasticity: float) -> list[float]:
    """The rounds' rates taken to the cell's median pace by this slope."""
    middle = statistics.median(pace for _, pace in points)
    return [raw * (pace / middle) ** elasticity for raw, pace in points]


def left_out(points: Points) -> list[float]:
    """Each round's rate by the slope of the cell's other rounds (at the cell's median pace)."""
    middle = statistics.median(pace for _, pace in points)
    return [raw * (pace / middle) ** slope(points[:index] + points[index + 1:])
            for index, (raw, pace) in enumerate(points)]


def read_runs(runs: dict[str, dict[Cell, Points]]) -> dict:
    """Every run's median CV of a cell's rounds by each estimator, and each cell's slopes over the runs (pure)."""
    slopes = {name: {key: slope(points) for key, points in cells.items()} for name, cells in runs.items()}
    found = []
    for name, cells in runs.items():
        if not cells:
            continue
        pooled = pooled_slope(cells)
        spread: dict[str, list[float]] = {estimator: [] for estimator in ESTIMATORS}
        for key, points in cells.items():
            others = [slopes[other][key] for other in runs if other != name and key in slopes[other]]
            spread["raw"].append(cv([raw for raw, _ in points]))
            spread["pace"].append(cv(at_slope(points, 1.0)))
            spread["one slope for the run"].append(cv(at_slope(points, pooled)))
            spread["slope per cell, round left out"].append(cv(left_out(points)))
            if others:
                spread["slope per cell, from the other runs"].append(cv(at_slope(points, statistics.median(others))))
        median_cv = {estimator: statistics.median(values) for estimator, values in spread.items() if values}
        found.append({"run": name, "cells": len(cells), "slope_for_the_run": round(pooled, 3),
                      "median_cv": {estimator: round(value, 4) for estimator, value in median_cv.items()},
                      "over_raw": {estimator: round(value / median_cv["raw"], 3)
                                   for estimator, value in median_cv.items() if estimator != "raw"}
                      if median_cv["raw"] else None})
    by_cell: dict[Cell, list[float]] = {}
    for cells in slopes.values():
        for key, value in cells.items():
            by_cell.setdefault(key, []).append(value)
    cells_out = [{"server": key[0], "client": key[1], "runs": len(values),
                  "median_slope": round(statistics.median(values), 3), "lowest": round(min(values), 3),
                  "highest": round(max(values), 3), "above_1": sum(value > 1 for value in values)}
                 for key, values in sorted(by_cell.items(), key=lambda item: statistics.median(item[1]))]
    return {"runs": found, "cells": cells_out}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    runs = {}
    for path in args.runs:
        try:
            runs[Path(path).name] = cell_points(read_json(Path(path)))
        except (OSError, ValueError, KeyError) as exc:
            print(f"cell_elasticity: {path}: {exc}", file=sys.stderr)
            return 2
        if not runs[Path(path).name]:
            print(f"cell_elasticity: {path}: no cell has {MIN_ROUNDS} paced rounds with their slices",
                  file=sys.stderr)
            return 2
    figures = read_runs(runs)
    for run in figures["runs"]:
        print(f"{run['run']}: {run['cells']} cells, one slope {run['slope_for_the_run']:.2f}; median CV of a cell's "
              "rounds " + ", ".join(f"{name} {100 * value:.1f}%" for name, value in run["median_cv"].items()),
              file=sys.stderr)
    json.dump({"benchmark": "cell_elasticity", "files": list(runs), **figures}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
