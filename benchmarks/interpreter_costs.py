"""What an interpreter change costs or saves: each Python side's CPU µs per roundtrip at each point of a --python run.

Reads the point files of one run over --python (the same rounds measured every point) and prints, per cell and side
that runs on Python, its CPU per roundtrip at each interpreter (the time budget's cpu_us: every thread of the side),
the change from the first interpreter, and whether the side's allocator settled (minor faults per roundtrip under
the run's threshold in every attempt). Prints one JSON object on stdout, a table on stderr.
Usage: python -m benchmarks.interpreter_costs RUN-python-3.9.json RUN-python-3.11.json ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.results.records import load


def python_sides(run, key) -> list[str]:
    """Which sides of a cell ran on Python (from what the processes reported)."""
    cell = next(c for c in run.cells if (c.server, c.client) == key)
    attempt = next((a for a in cell.attempts if a.ok), None)
    if attempt is None:
        return []
    sides = []
    if ((attempt.server_info or {}).get("runtime") or {}).get("name") in ("cpython", "pypy"):
        sides.append("server")
    if ((attempt.client_report or {}).get("runtime") or {}).get("name") in ("cpython", "pypy"):
        sides.append("client")
    return sides


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("points", type=Path, nargs="+")
    args = parser.parse_args()
    runs = [load(path) for path in args.points]
    names = [run.configuration.get("python") or "running" for run in runs]
    summaries = [summarize_run(run) for run in runs]
    rows = []
    for key in sorted(summaries[0]):
        for side in python_sides(runs[0], key):
            figures = []
            for summary in summaries:
                cell = summary.get(key)
                budget = getattr(cell, f"{side}_time_budget", None) if cell else None
                figures.append(None if budget is None else round(budget.cpu_us, 1))
            settled = [bool(summary.get(key)) and getattr(summary[key], f"{side}_cpu").unsettled_attempts == 0
                       for summary in summaries]
            rows.append({"server": key[0], "client": key[1], "side": side, "cpu_us": dict(zip(names, figures)),
                         "change_us": {name: None if value is None or figures[0] is None else round(value - figures[0],
                                                                                                    1)
                                       for name, value in zip(names[1:], figures[1:])},
                         "settled": dict(zip(names, settled))})
    print(f"{'cell, side':<36}" + "".join(f"{name:>10}" for name in names) + "   (CPU µs per roundtrip)",
          file=sys.stderr)
    for row in rows:
        values = "".join(f"{'–' if value is None else f'{value:.0f}':>10}" for value in row["cpu_us"].values())
        print(f"{row['server'] + ' × ' + row['client'] + ', ' + row['side']:<36}{values}", file=sys.stderr)
    print(json.dumps({"files": [str(path) for path in args.points], "interpreters": names, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
