"""How much pairing by round cancels, measured on results files (it measures nothing itself).

Ratios within a run are medians of per-round ratios, on the premise that a round's state of the machine slows both
cells alike. This reads runs of many cells and rounds and asks how true that is, at two distances in time:
- **same round**: for every two cells of the run, the correlation of their per-round log rates (each minus its own
  median), and the variance of their per-round log ratio over the sum of their variances (1: pairing cancels
  nothing; 0: it cancels everything). A round lasts tens of seconds.
- **back to back**: the same correlation over the couples of attempts that ran one right after the other in a
  round (ordered by start time, then client PID, which the engine starts in attempt order), against couples of
  the same round that ran at least FAR attempts apart. An attempt lasts under a second.
If back-to-back attempts share the machine's state and rounds do not, pairing what runs back to back would pay and
pairing by round does not. Prints one JSON object on stdout, a line per run on stderr.
Usage: python -m benchmarks.pairing_gain RESULTS.json [...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from pathlib import Path

from pingpong.harness.results.stored import read_json

FAR = 5  # attempts apart: couples this far or farther in a round count as "not back to back"


def correlation(pairs: list[tuple[float, float]]) -> float | None:
    """Pearson's r of the couples; None for fewer than 3 or no spread."""
    if len(pairs) < 3:
        return None
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in pairs)
    sxx, syy = sum((x - mean_x) ** 2 for x in xs), sum((y - mean_y) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def residuals(run: dict) -> dict[str, dict[int, float]]:
    """Per cell, per round: log rate minus the cell's median log rate (cells with 3 good rounds or more)."""
    found = {}
    for cell in run["cells"]:
        rates = {a["repeat"]: math.log(a["roundtrips_per_s"]) for a in cell["attempts"]
                 if a["status"] == "ok" and a.get("roundtrips_per_s")}
        if len(rates) >= 3:
            middle = statistics.median(rates.values())
            found[f"{cell['server']} × {cell['client']}"] = {r: v - middle for r, v in rates.items()}
    return found


def same_round(cells: dict[str, dict[int, float]]) -> dict:
    correlations, variance_ratios = [], []
    for (_, a), (_, b) in itertools.combinations(cells.items(), 2):
        common = sorted(a.keys() & b.keys())
        if len(common) < 3:
            continue
        r = correlation([(a[k], b[k]) for k in common])
        if r is not None:
            correlations.append(r)
        differences = [a[k] - b[k] for k in common]
        spread = statistics.pvariance([a[k] for k in common]) + statistics.pvariance([b[k] for k in common])
        if spread > 0:
            variance_ratios.append(statistics.pvariance(differences) / spread)
    return {"cell_pairs": len(variance_ratios),
            "correlation_median": statistics.median(correlations) if correlations else None,
            "paired_over_unpaired_variance_median": statistics.median(variance_ratios) if variance_ratios else None,
            "paired_over_unpaired_variance_quartiles": (statistics.quantiles(variance_ratios, n=4)[0::2]
                                                        if len(variance_ratios) >= 4 else None)}


def in_time(run: dict, cells: dict[str, dict[int, float]]) -> dict:
    by_round: dict[int, list[tuple[str, int, str]]] = {}
    for cell in run["cells"]:
        name = f"{cell['server']} × {cell['client']}"
        if name not in cells:
            continue
        for attempt in cell["attempts"]:
            if attempt["repeat"] in cells[name]:
                by_round.setdefault(attempt["repeat"], []).append(
                    (attempt["started_at"], attempt.get("client_pid") or 0, name))
    adjacent, far = [], []
    for number, attempts in by_round.items():
        ordered = [name for _, _, name in sorted(attempts)]
        for i, j in itertools.combinations(range(len(ordered)), 2):
            couple = (cells[ordered[i]][number], cells[ordered[j]][number])
            if j - i == 1:
                adjacent.append(couple)
            elif j - i >= FAR:
                far.append(couple)
    return {"back_to_back_couples": len(adjacent), "back_to_back_correlation": correlation(adjacent),
            "far_couples": len(far), "far_correlation": correlation(far)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    args = parser.parse_args()
    found = {}
    for path in args.results:
        run = read_json(path)  # plain or compressed (the reference runs are .json.xz)
        cells = residuals(run)
        entry = {"cells": len(cells), **same_round(cells), **in_time(run, cells)}
        found[path.name] = entry
        print(f"{path.name}: {entry['cells']} cells; same round: r {entry['correlation_median']:.2f}, paired/unpaired "
              f"variance {entry['paired_over_unpaired_variance_median']:.2f}; back to back r "
              f"{entry['back_to_back_correlation']:.2f} ({entry['back_to_back_couples']} couples), {FAR}+ apart r "
              f"{entry['far_correlation']:.2f}", file=sys.stderr)
    print(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
