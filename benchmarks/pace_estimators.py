"""How a window's pace is best read from its slices: stored default runs taken to the reference pace again from
each window's slices, with the plain mean of the slices and with their trimmed mean (the fastest and the slowest
fifth left out: analysis/host_pace.window_pace_ns), against their raw rates.

For each run (run_bench.py's JSON, plain or .json.xz, paced with slices_ns kept): the median over its cells of the
CV of a cell's rounds, raw and at the reference pace by each estimator, and the median ratio of the trimmed pace to
the mean one (how far the scale moves). Pure arithmetic on recorded slices: nothing is measured. Prints one JSON
object on stdout and a line per run on stderr.
Usage: python -m benchmarks.pace_estimators RUN.json[.xz] [RUN.json[.xz] ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from pingpong.harness.analysis.host_pace import REFERENCE_SENTINEL_NS, window_pace_ns
from pingpong.harness.results.stored import read_json

ESTIMATORS = {"mean": lambda slices: statistics.fmean(slices), "trimmed": window_pace_ns}


def run_figures(run: dict) -> dict | None:
    """The run's median CV of a cell's rounds, raw and by each estimator, and the trimmed-to-mean scale (pure);
    None when no window kept its slices."""
    spreads: dict[str, list[float]] = {name: [] for name in ("raw", *ESTIMATORS)}
    scales = []
    for cell in run["cells"]:
        windows = [a for a in cell["attempts"] if a["status"] == "ok" and a.get("raw_roundtrips_per_s")
                   and (a.get("host_pace") or {}).get("slices_ns")]
        if len(windows) < 3:
            continue
        spreads["raw"].append(cv([a["raw_roundtrips_per_s"] for a in windows]))
        for name, estimator in ESTIMATORS.items():
            spreads[name].append(cv([a["raw_roundtrips_per_s"] * estimator(a["host_pace"]["slices_ns"])
                                     / REFERENCE_SENTINEL_NS for a in windows]))
        scales += [window_pace_ns(a["host_pace"]["slices_ns"]) / statistics.fmean(a["host_pace"]["slices_ns"])
                   for a in windows]
    if not spreads["raw"]:
        return None
    return {"cells": len(spreads["raw"]),
            "median_cv": {name: statistics.median(values) for name, values in spreads.items()},
            "trimmed_over_mean": statistics.median(scales)}


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
        spread = figures["median_cv"]
        print(f"{Path(path).name}: {figures['cells']} cells; median CV of a cell's rounds raw {100 * spread['raw']:.1f}%, "
              f"mean pace {100 * spread['mean']:.1f}%, trimmed {100 * spread['trimmed']:.1f}%; trimmed pace "
              f"{figures['trimmed_over_mean']:.3f}x the mean", file=sys.stderr)
    json.dump({"benchmark": "pace_estimators", "runs": found}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
