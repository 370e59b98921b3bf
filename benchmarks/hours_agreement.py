"""How far apart default runs at different hours are: each cell's run medians against their median, at the reference
pace and raw, for every cell, the Python × Python cells (the address-layout lottery on one CPU) and the rest.

Reads saved runs (run_bench.py's JSON, paced or not); prints one JSON object on stdout and the sentences on stderr:
the rates as recorded (at the reference pace, and raw), and at the reference pace taken again from each window's
recorded slices by their plain mean, by their trimmed mean, and by the trimmed mean with the fast mode replayed in
the order the windows were measured (host_pace.window_pace_ns, replayed_paces): its typical slice the median of its
main peak (the pacer's since 2026-11-29 15:00 UTC) and, as before, of every slice in the fast mode; so that runs
recorded with any of these paces compare alike.
Usage: python -m benchmarks.hours_agreement RUN.json RUN.json RUN.json [--tolerance 0.05]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict
from pathlib import Path

from pingpong.harness.analysis.host_modes import SLOW_FACTOR
from pingpong.harness.analysis.host_pace import (FAST_PEAK_FACTOR, REFERENCE_SENTINEL_NS, replayed_paces, run_pace,
                                                window_pace_ns)
from pingpong.harness.analysis.precision import median_cv, precision_reach
from pingpong.harness.analysis.replication import agreement, raw_run_medians, run_medians
from pingpong.harness.results.records import load


def python_cells(run) -> set[tuple[str, str]]:
    """The cells whose server and client both run on CPython."""
    runtimes = {(role, name): entry.get("runtime") for role, entries in run.implementations.items()
                for name, entry in entries.items()}
    return {(cell.server, cell.client) for cell in run.cells
            if runtimes.get(("server", cell.server)) == runtimes.get(("client", cell.client)) == "python"}


def slice_run_medians(run, estimator) -> dict[tuple[str, str], float]:
    """Each cell's median rate at the reference pace taken again from its windows' recorded slices with estimator
    (the plain mean, or host_pace.window_pace_ns), so that runs recorded with either pace compare alike; cells
    without slices are left out."""
    medians = {}
    for cell in run.cells:
        rates = [a.raw_rate * estimator(a.host_pace["slices_ns"]) / REFERENCE_SENTINEL_NS for a in cell.attempts
                 if a.ok and a.paced and a.host_pace and a.host_pace.get("slices_ns")]
        if rates:
            medians[(cell.server, cell.client)] = statistics.median(rates)
    return medians


def fast_mode_run_medians(run, peak: float = FAST_PEAK_FACTOR) -> dict[tuple[str, str], float]:
    """As slice_run_medians, each window's pace read with the run's fast mode as the pacer would have read it then
    (its slices and those of the windows before it); peak: as host_pace.fast_mode's."""
    windows = sorted(((cell, a) for cell in run.cells for a in cell.attempts
                      if a.ok and a.paced and a.host_pace and a.host_pace.get("slices_ns")),
                     key=lambda item: item[1].started_at or "")
    paces = replayed_paces([(a.host_pace.get("stop") or "", a.host_pace["slices_ns"]) for _, a in windows], peak)
    rates: dict[tuple[str, str], list[float]] = {}
    for (cell, attempt), pace in zip(windows, paces):
        rates.setdefault((cell.server, cell.client), []).append(attempt.raw_rate * pace / REFERENCE_SENTINEL_NS)
    return {key: statistics.median(values) for key, values in rates.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--tolerance", type=float, default=0.05)
    args = parser.parse_args()
    runs = [load(Path(path)) for path in args.runs]
    python = python_cells(runs[0])
    everything = set.union(*({(c.server, c.client) for c in run.cells} for run in runs))
    found = {"runs": [], "tolerance": args.tolerance}
    for path, run in zip(args.runs, runs):
        pace = run_pace(run)
        paced, raw = precision_reach(run), precision_reach(run, raw=True)
        found["runs"].append({
            "file": path, "started_at": run.started_at, "cpu_model": run.environment.get("cpu_model"),
            "pace": asdict(pace) if pace else None,
            "within_paced": paced and paced.within, "within_raw": raw and raw.within, "cells": paced and paced.cells,
            "rounds": paced and paced.rounds, "median_cv_paced": median_cv(run), "median_cv_raw": median_cv(run, True)})
    families = (("paced", run_medians), ("raw", raw_run_medians),
                ("paced again from the slices, their mean", lambda run: slice_run_medians(run, statistics.fmean)),
                ("paced again from the slices, trimmed", lambda run: slice_run_medians(run, window_pace_ns)),
                ("paced again from the slices, fast mode, every fast slice",
                 lambda run: fast_mode_run_medians(run, SLOW_FACTOR)),
                ("paced again from the slices, fast mode", fast_mode_run_medians))
    for name, medians_of in families:
        medians = [medians_of(run) for run in runs]
        for group, cells in (("all", everything), ("python × python", python), ("the rest", everything - python)):
            result = agreement(medians, args.tolerance, cells)
            found[f"{name}, {group}"] = asdict(result)
            print(result.sentence(f"{name}, {group}"), file=sys.stderr)
    json.dump(found, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
