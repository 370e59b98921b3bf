"""The regression gate's false alarms and power on this machine, from committed runs (it measures nothing itself).

`compare A B --fail-above PCT` fails a cell when its ratio B/A, divided by the raw-TCP floors' drift, has its
interval's top below 1 − PCT/100. This reads runs of the same settings made here at different hours (the default
matrix of 2026-11-22: the same servers and clients, the harness a few commits apart) and asks, over every pair of
them (A the earlier):
- **false alarms**: the same code, runs apart: the fraction of pairs in which the gate fails any cell, and of
  judged cells it fails, at each PCT;
- **power**: B's rates of one WebSocket cell multiplied by (1 − s) (each cell in turn), or of most WebSocket cells
  at once (3 of every 4, the floors untouched: a driver, the harness or a new Python), and the fraction of those
  cells the gate fails, and of pairs in which it fails any of them, at each s and PCT.
The same again without the floors (nothing corrected for drift), to show what the anchor does, and across runs:
three runs against three others (`compare A1 A2 A3 --against B1 B2 B3`), over every split of the runs into two such
sides (overlapping, so not independent; one cell slowed over every 14th split). Prints one JSON
object on stdout (written to results/reference/<date>-gate-power.json with --save), a summary on stderr.
Usage: python -m benchmarks.gate_power [RESULTS.json ...] [--save]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import itertools
import json
import statistics
import sys
from pathlib import Path

from pingpong.harness.analysis.replication import first_setting_difference
from pingpong.harness.commands.compare import Comparison, compare_run_sets, compare_runs, gate, is_floor
from pingpong.harness.results.records import Cell, RunResult, load

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "results" / "reference"
# The default matrix runs of 2026-11-22 with the same settings (0.2 s windows, malloc settled, 0.5 s JIT warmup);
# -settled is left out: it ran with server_warmup_s instead of jit_warmup_s.
DEFAULT_RUNS = tuple(REFERENCE / f"2026-11-22-default-matrix-{name}.json.xz"
                     for name in ("busy", "jit-warmup", "calm", "budget-330s", "ahead", "group", "waits", "waits-2"))
THRESHOLDS = (3, 5, 10)  # --fail-above PCT
SLOWDOWNS = (0.05, 0.10, 0.20)  # s: B's rates times (1 − s)
MOST_EVERY = 4  # "most WebSocket cells": all but every 4th, in the run's order (75%)

SIDE_RUNS = 3  # across runs: three runs a side
ONE_CELL_SPLIT_STEP = 14  # across runs, one cell slowed: every 14th split (each split is 42 comparisons per s)

CellKey = tuple[str, str]
Side = RunResult | tuple[RunResult, ...]  # one run, or several runs of the same settings
Pair = tuple[Side, Side]


def websocket_cells(run: RunResult) -> list[CellKey]:
    """The measured cells that are not raw-TCP floors, in the run's order."""
    return [(c.server, c.client) for c in run.cells if c.rates() and not is_floor(run, c.server, c.client)]


def most_of(cells: list[CellKey]) -> list[CellKey]:
    return [key for number, key in enumerate(cells) if number % MOST_EVERY != MOST_EVERY - 1]


def compared(a: Side, b: Side) -> Comparison:
    """compare A B for one run a side, compare A1 A2 ... --against B1 B2 ... for several."""
    if isinstance(a, RunResult) and isinstance(b, RunResult):
        return compare_runs(a, b)
    return compare_run_sets(list(a), list(b))


def slowed(run: Side, cells: list[CellKey], slowdown: float) -> Side:
    """A copy of run (of each run of a side) with the good attempts of those cells at (1 − slowdown) their rate."""
    if not isinstance(run, RunResult):
        return tuple(slowed(one, cells, slowdown) for one in run)
    chosen = set(cells)

    def scaled(cell: Cell) -> Cell:
        if (cell.server, cell.client) not in chosen:
            return cell
        attempts = [dataclasses.replace(a, roundtrips_per_s=a.roundtrips_per_s * (1 - slowdown)) if a.ok else a
                    for a in cell.attempts]
        return dataclasses.replace(cell, attempts=attempts)
    return dataclasses.replace(run, cells=[scaled(cell) for cell in run.cells])


def without_floors(run: RunResult) -> RunResult:
    return dataclasses.replace(run, cells=[c for c in run.cells if not is_floor(run, c.server, c.client)])


def failed_cells(comparison: Comparison, pct: float) -> set[CellKey]:
    return {(server, client) for server, client, _ in gate(comparison, pct).failed}


def judged(comparison: Comparison) -> int:
    return sum(c.verdict not in ("anchor", "unknown") for c in comparison.cells)


def false_alarms(pairs: list[Pair], thresholds: list[float]) -> dict[float, dict[str, float]]:
    """Per PCT: the fraction of pairs in which the gate fails any cell, and of judged cells it fails."""
    comparisons = [compared(a, b) for a, b in pairs]
    found = {}
    for pct in thresholds:
        failing = [len(failed_cells(comparison, pct)) for comparison in comparisons]
        found[pct] = {"pairs": sum(count > 0 for count in failing) / len(comparisons),
                      "cells": sum(failing) / sum(judged(comparison) for comparison in comparisons)}
    return found


def caught(pairs: list[Pair], cells: list[CellKey], slowdown: float,
           thresholds: list[float]) -> dict[float, dict[str, float]]:
    """B's rates of cells slowed by slowdown, all at once: per PCT, the fraction of those cells the gate fails
    (over every pair), and of pairs in which it fails any of them."""
    comparisons = [compared(a, slowed(b, cells, slowdown)) for a, b in pairs]
    found = {}
    for pct in thresholds:
        hits = [len(failed_cells(comparison, pct) & set(cells)) for comparison in comparisons]
        found[pct] = {"cells": sum(hits) / (len(cells) * len(comparisons)),
                      "pairs": sum(hit > 0 for hit in hits) / len(comparisons)}
    return found


def caught_fraction(pairs: list[Pair], cells: list[CellKey], slowdown: float, pct: float) -> float:
    """The fraction of the slowed cells the gate fails at PCT, over every pair."""
    return caught(pairs, cells, slowdown, [pct])[pct]["cells"]


def one_cell_caught(pairs: list[Pair], cells: list[CellKey], slowdown: float,
                    thresholds: list[float]) -> dict[float, float]:
    """Each cell slowed on its own, in turn: per PCT, the fraction of (pair, cell) in which the gate fails it."""
    totals = dict.fromkeys(thresholds, 0.0)
    for key in cells:
        for pct, fractions in caught(pairs, [key], slowdown, thresholds).items():
            totals[pct] += fractions["cells"] / len(cells)
    return totals


def runs_of(side: Side) -> tuple[RunResult, ...]:
    return (side,) if isinstance(side, RunResult) else tuple(side)


def splits(runs: list[RunResult], size: int) -> list[Pair]:
    """Every way to take two disjoint sets of size runs, each split once (A the set with the earliest run)."""
    found = []
    for a in itertools.combinations(runs, size):
        rest = [run for run in runs if run not in a]
        found += [(a, b) for b in itertools.combinations(rest, size) if a[0].started_at < b[0].started_at]
    return found


def assess(pairs: list[Pair], thresholds: list[float], slowdowns: list[float], one_cell_step: int = 1) -> dict:
    everyone = [run for pair in pairs for side in pair for run in runs_of(side)]
    cells = [key for key in websocket_cells(everyone[0]) if all(key in websocket_cells(run) for run in everyone)]
    most = most_of(cells)
    sampled = pairs[::one_cell_step]
    return {"false_alarms": {str(pct): value for pct, value in false_alarms(pairs, thresholds).items()},
            "power_one_cell": {str(s): {str(pct): value for pct, value in
                                        one_cell_caught(sampled, cells, s, thresholds).items()} for s in slowdowns},
            "power_most_cells": {str(s): {str(pct): value for pct, value in
                                          caught(pairs, most, s, thresholds).items()} for s in slowdowns},
            "websocket_cells": len(cells), "most_cells": len(most), "pairs": len(pairs),
            "pairs_one_cell": len(sampled)}


def summary_lines(name: str, found: dict) -> list[str]:
    lines = [f"{name}: {found['pairs']} pairs, {found['websocket_cells']} WebSocket cells; most = "
             f"{found['most_cells']}; one cell slowed over {found['pairs_one_cell']} pairs"]
    for pct, alarm in found["false_alarms"].items():
        lines.append(f"  --fail-above {pct}: false alarms in {alarm['pairs']:.0%} of pairs, "
                     f"{alarm['cells']:.1%} of cells")
    for s, by_pct in found["power_one_cell"].items():
        lines.append(f"  one cell {float(s):.0%} slower: caught " + ", ".join(
            f"{value:.0%} at {pct}" for pct, value in by_pct.items()))
    for s, by_pct in found["power_most_cells"].items():
        lines.append(f"  most cells {float(s):.0%} slower: cells caught " + ", ".join(
            f"{value['cells']:.0%} at {pct}" for pct, value in by_pct.items()) + "; the gate fails in " + ", ".join(
            f"{value['pairs']:.0%} of pairs at {pct}" for pct, value in by_pct.items()))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*", type=Path, default=list(DEFAULT_RUNS),
                        help="runs of the same settings (default: the 2026-11-22 default matrix runs)")
    parser.add_argument("--save", action="store_true",
                        help="also write results/reference/<date>-gate-power.json")
    args = parser.parse_args()
    loaded = [(path.name, load(path)) for path in args.results]
    names = {run.started_at: name for name, run in loaded}
    runs = sorted((run for _, run in loaded), key=lambda run: run.started_at)
    difference = first_setting_difference(runs, [names[run.started_at] for run in runs])
    if difference:
        print(f"gate_power: {difference}", file=sys.stderr)
        return 2
    pairs = list(itertools.combinations(runs, 2))  # A the earlier run
    thresholds, slowdowns = list(THRESHOLDS), list(SLOWDOWNS)
    floors_drift = [compare_runs(a, b).drift for a, b in pairs]
    found = {"runs": [{"file": names[run.started_at], "started_at": run.started_at,
                       "suite_commit": run.environment.get("suite_commit")} for run in runs],
             "pairs": len(pairs), "thresholds_pct": thresholds, "slowdowns": slowdowns,
             "floors_drift_median_abs": statistics.median(abs(d.value - 1) for d in floors_drift if d),
             "with_floors": assess(pairs, thresholds, slowdowns),
             "without_floors": assess([(without_floors(a), without_floors(b)) for a, b in pairs], thresholds,
                                      slowdowns),
             "across_runs": assess(splits(runs, SIDE_RUNS), thresholds, slowdowns, ONE_CELL_SPLIT_STEP)}
    print(f"{len(runs)} runs, {len(pairs)} pairs; the floors' drift between two runs: median "
          f"{found['floors_drift_median_abs']:.1%}", file=sys.stderr)
    for name in ("with_floors", "without_floors", "across_runs"):
        print("\n".join(summary_lines(name, found[name])), file=sys.stderr)
    text = json.dumps(found, indent=1)
    print(text)
    if args.save:
        path = REFERENCE / f"{datetime.date.today().isoformat()}-gate-power.json"
        path.write_text(text + "\n")
        print(f"written: {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
