"""The in-window pace's bias through the matrix's own attempts: a cell's attempts with slices and without, on one
server process per round, paired by round.

benchmarks/window_pace.py checks the bias inside one long client window, with the orchestrator asleep between its
sub-windows. A matrix attempt is not that quiet: its client starts, warms up and reports, and the orchestrator
samples CPU, counters and sockets as the window opens. This measures what a user of the matrix gets: every round
starts each cell's server once and runs, in a shuffled order, --per-round attempts with the slices and as many with
the measurement switch PINGPONG_RAW_WINDOWS=1 (no slices), all in the matrix's settings and --placement. Per round,
the paced attempts' mean raw rate per running second (roundtrips / (window - pauses)) over the unpaced attempts'
mean rate; per cell, the median of those ratios with its order-statistic interval, and the spread across rounds
(CV of the rounds' means) of the unpaced attempts' rates, of the paced ones' raw rates and of their rates at the
reference pace (the matrix's headline).

Prints one JSON object on stdout; a table on stderr.
Usage: python -m benchmarks.attempt_pace_bias [--rounds 12] [--per-round 2] [--placement split]
                                              [--cells raw-tcp-c:raw-tcp-c,node-ws:node-ws,...]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from datetime import datetime, timezone

from benchmarks.window_pace import BIAS_TARGET, cv  # the long-window check's target and spread
from benchmarks.rounds_setup import ROOT, add_placement_option, paced_cells, parse_arguments, server_rounds
from pingpong.contract import RAW_WINDOWS_ENV
from pingpong.harness.analysis.stats import median_interval
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.system import host_sentinel
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

DEFAULT_CELLS = "raw-tcp-c:raw-tcp-c,node-ws:node-ws,sanic:websockets,bun:bun"


def options(parser) -> None:
    add_placement_option(parser)
    parser.add_argument("--per-round", type=int, default=2,
                        help="attempts of each kind per cell and round (default %(default)s)")


def cell_figures(rounds: dict[int, dict[str, list[float]]]) -> dict:
    """A cell's bias and spreads from its rounds' rates, {round: {"paced": [raw rates per running second],
    "unpaced": [rates], "reference": [the paced attempts' rates at the reference pace]}} (pure): rounds missing
    either of the first two are left out."""
    both = {number: kinds for number, kinds in sorted(rounds.items()) if kinds.get("paced") and kinds.get("unpaced")}
    paced = [statistics.fmean(kinds["paced"]) for kinds in both.values()]
    unpaced = [statistics.fmean(kinds["unpaced"]) for kinds in both.values()]
    reference = [statistics.fmean(kinds["reference"]) for kinds in both.values() if kinds.get("reference")]
    ratios = [a / b for a, b in zip(paced, unpaced)]
    interval = median_interval(ratios)
    return {"rounds": len(both), "median_ratio": statistics.median(ratios) if ratios else None,
            "interval": [interval.low, interval.high] if interval else None,
            "coverage": interval.coverage if interval else None,
            "paced_median": statistics.median(paced) if paced else None,
            "unpaced_median": statistics.median(unpaced) if unpaced else None,
            "paced_cv": cv(paced), "unpaced_cv": cv(unpaced), "reference_cv": cv(reference), "ratios": ratios,
            "piece_profile": piece_profile([window for kinds in both.values() for window in kinds.get("pieces", [])])}


def piece_profile(windows: list[dict | None]) -> list[float] | None:
    """Where in a paced window its client ran slower (pure): per running piece between pauses (the pacer's
    "intervals", analysis/host_pace.running_intervals), the median over the windows of the piece's rate relative to
    the median rate of its window's middle pieces (the third to the last but one). None without such windows."""
    relative: list[list[float]] = []
    for intervals in windows:
        if not intervals or "running_ns" not in intervals:
            continue
        rates = [segments / ns if ns else None for segments, ns in zip(intervals["segments_in"],
                                                                         intervals["running_ns"])]
        middle = [rate for rate in rates[2:-1] if rate]
        if len(middle) < 2 or not statistics.median(middle):
            continue
        level = statistics.median(middle)
        for index, rate in enumerate(rates):
            if rate is not None:
                while len(relative) <= index:
                    relative.append([])
                relative[index].append(rate / level)
    return [statistics.median(values) for values in relative] if relative else None


def main() -> int:
    args = parse_arguments(__doc__.splitlines()[0], DEFAULT_CELLS, options)
    if args.per_round < 1 or args.rounds < 3:
        print("attempt_pace_bias: --per-round must be at least 1 and --rounds at least 3", file=sys.stderr)
        return 2
    prepared = paced_cells("attempt_pace_bias", args.cell_pairs, args.placement)
    if prepared is None:
        return 2
    implementations, settings, server_cpus = prepared
    variants = [(kind, index) for kind in ("paced", "unpaced") for index in range(args.per_round)]
    rates: dict[tuple[str, str], dict[int, dict[str, list[float]]]] = {}
    failures: list[str] = []
    began = datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        with stop_signals_raise_interrupt():
            for round_number, server, started, client, (kind, _) in server_rounds(
                    "attempt-pace-bias", args.cell_pairs, variants, args.rounds, args.seed, implementations,
                    settings, server_cpus):
                try:
                    if kind == "unpaced":
                        os.environ[RAW_WINDOWS_ENV] = "1"
                    attempt = run_attempt_on(started, implementations[("client", client)], settings, round_number,
                                             ROOT)
                finally:
                    os.environ.pop(RAW_WINDOWS_ENV, None)
                paced_off = (attempt.host_pace or {}).get("off")
                rate = attempt.raw_roundtrips_per_s if kind == "paced" else attempt.roundtrips_per_s
                if not attempt.ok or rate is None or (kind == "paced") == bool(paced_off):
                    failures.append(f"{server}×{client} round {round_number} {kind}: {attempt.status} "
                                    f"{attempt.reason or paced_off or attempt.pace_not_applied or 'no rate'}")
                    print(f"attempt_pace_bias: {failures[-1]}", file=sys.stderr)
                    continue
                rounds = rates.setdefault((server, client), {}).setdefault(round_number, {})
                rounds.setdefault(kind, []).append(rate)
                if kind == "paced":
                    if attempt.roundtrips_per_s is not None:
                        rounds.setdefault("reference", []).append(attempt.roundtrips_per_s)
                    rounds.setdefault("pieces", []).append(attempt.host_pace.get("intervals"))
                    rounds.setdefault("warm_slice_ms", []).append(attempt.host_pace.get("warm_slice_ms"))
    finally:
        host_sentinel.close_all()
    cells = []
    for server, client in args.cell_pairs:
        figures = {"server": server, "client": client, **cell_figures(rates.get((server, client), {})),
                   "raw_rounds": {str(number): kinds for number, kinds in rates.get((server, client), {}).items()}}
        cells.append(figures)
        if figures["median_ratio"] is None:
            print(f"{server} × {client}: no round with both kinds", file=sys.stderr)
            continue
        low, high = figures["interval"] or (float("nan"), float("nan"))
        print(f"{server} × {client}: paced/unpaced {figures['median_ratio']:.3f} [{low:.3f}–{high:.3f}, "
              f"{100 * (figures['coverage'] or 0):.0f}%] over {figures['rounds']} rounds; medians "
              f"{figures['paced_median']:,.0f} and {figures['unpaced_median']:,.0f}/s; CV of the rounds "
              f"{100 * (figures['paced_cv'] or 0):.1f}% and {100 * (figures['unpaced_cv'] or 0):.1f}% (paced at "
              f"the reference pace {100 * (figures['reference_cv'] or 0):.1f}%)",
              file=sys.stderr)
        if figures["piece_profile"]:
            print(f"  paced pieces' rate against their window's middle: "
                  f"{' '.join(f'{value:.3f}' for value in figures['piece_profile'])}", file=sys.stderr)
    measured = [cell for cell in cells if cell["median_ratio"] is not None]
    within = [cell for cell in measured if abs(cell["median_ratio"] - 1) <= BIAS_TARGET]
    print(f"bias within ±{100 * BIAS_TARGET:g}%: {len(within)} of {len(measured)} cells ({args.placement})",
          file=sys.stderr)
    json.dump({"benchmark": "attempt_pace_bias", "started_at": began, "placement": args.placement,
               "rounds": args.rounds, "per_round": args.per_round, "seed": args.seed,
               "window_s": settings.duration_s, "warmup_s": settings.warmup_s, "bias_target": BIAS_TARGET,
               "cells": cells, "failures": failures}, sys.stdout, indent=1)
    print()
    return 0 if measured else 1


if __name__ == "__main__":
    sys.exit(main())
