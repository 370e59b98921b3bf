"""Window length (and warmup) against the spread between rounds: the data behind the matrix's default window.

Every round starts each server once and measures every (warmup, window) setting of every one of its cells on it,
in a shuffled order, so all settings share the machine's drift. For each cell and setting it prints the rates'
spread between rounds (CV), the half-width of the median's 95% interval over those rounds, and what one attempt
costs in wall time (window, client start, room probe, report). A shorter window is better when its spread is not
larger: more rounds fit in the same time. Each later setting of a cell is also compared with its first, paired by
round: a shorter warmup must not change the rate (a side still warming up would measure slower).

Prints one JSON object on stdout; a table on stderr.
Usage: python -m benchmarks.window_spread [--rounds 8] [--cells websockets:websockets,node-ws:node-ws,...]
                                          [--settings 0.2:0.25,0.1:0.5,...]  (warmup:window pairs, seconds)
                                          [--jit-warmup S] [--server-warmup S]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import replace

from benchmarks.rounds_setup import (ROOT, count_agreeing, implementations_by_role, matrix_settings, paired_agreement,
                                     parse_arguments, server_rounds)
from pingpong.harness.analysis.stats import summarize
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.settings.cell import cpus_for
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

DEFAULT_CELLS = ("websockets:websockets,node-ws:node-ws,aiohttp:node-ws,sanic:picows,bun:bun,raw-tcp-c:raw-tcp-c,"
                 "blacksheep:aiohttp")
DEFAULT_SETTINGS = "0.2:0.25,0.1:0.5,0.2:0.5,0.5:0.5,0.2:1,0.2:2"  # warmup:window, seconds


def setting_options(parser) -> None:
    parser.add_argument("--settings", default=DEFAULT_SETTINGS, help="warmup:window pairs in seconds, comma-separated")
    parser.add_argument("--jit-warmup", type=float, default=None,
                        help="the matrix's --jit-warmup (default: the matrix's); --server-warmup below replaces it")
    parser.add_argument("--server-warmup", type=float, default=None,
                        help="instead of --jit-warmup: the first client of every server process, whatever its "
                             "runtime, warms up this much longer (how 2026-11-22-window-spread-server-warmup.json.xz "
                             "was measured)")


def main() -> int:
    args = parse_arguments(__doc__.splitlines()[0], DEFAULT_CELLS, setting_options)
    settings_measured = [tuple(float(part) for part in pair.split(":")) for pair in args.settings.split(",")]
    implementations = implementations_by_role()
    cells = args.cell_pairs
    base = matrix_settings()
    if args.jit_warmup is not None:
        base = replace(base, jit_warmup_s=args.jit_warmup)
    if args.server_warmup is not None:
        base = replace(base, jit_warmup_s=0.0)
    server_cpus, _ = cpus_for(base)
    rates: dict[tuple[str, str, float, float], list[float]] = {}
    by_round: dict[tuple[str, str, float, float], dict[int, float]] = {}
    costs: dict[tuple[str, str, float, float], list[float]] = {}
    with stop_signals_raise_interrupt():
        for round_number, server_name, started, client, (warmup, window) in server_rounds(
                "spread", cells, settings_measured, args.rounds, args.seed, implementations, base, server_cpus):
            settings = replace(base, warmup_s=warmup, duration_s=window)
            if args.server_warmup and started.turns == 0:
                settings = replace(settings, warmup_s=warmup + args.server_warmup)
            began = time.monotonic()
            attempt = run_attempt_on(started, implementations[("client", client)], settings, round_number, ROOT)
            key = (server_name, client, warmup, window)
            if not attempt.ok:
                print(f"{key} round {round_number}: {attempt.status}: {attempt.reason}", file=sys.stderr)
                continue
            rates.setdefault(key, []).append(attempt.roundtrips_per_s)
            by_round.setdefault(key, {})[round_number] = attempt.roundtrips_per_s
            costs.setdefault(key, []).append(time.monotonic() - began)
    report = {"rounds": args.rounds, "seed": args.seed, "settings": [list(s) for s in settings_measured],
              "jit_warmup_s": base.jit_warmup_s, "server_warmup_s": args.server_warmup, "cells": []}
    for (server, client, warmup, window), values in sorted(rates.items()):
        summary = summarize(values)
        cost = statistics.median(costs[(server, client, warmup, window)])
        report["cells"].append({"server": server, "client": client, "warmup_s": warmup, "window_s": window,
                                "rates": values, "median": summary.median, "cv": summary.cv,
                                "precision": summary.precision,
                                "attempt_wall_s": cost, "overhead_s": cost - warmup - window})
    report["by_setting"] = by_setting(report["cells"], settings_measured)
    first = settings_measured[0]
    report["paired_to_first_setting"] = []
    for server, client in cells:
        for warmup, window in settings_measured[1:]:
            label = f"{warmup:g}+{window:g} / {first[0]:g}+{first[1]:g}"
            report["paired_to_first_setting"].append(
                {"server": server, "client": client, "warmup_s": warmup, "window_s": window,
                 **paired_agreement(server, client, by_round.get((server, client, warmup, window), {}),
                                    by_round.get((server, client, *first), {}), label)})
    if report["paired_to_first_setting"]:
        report["agreeing_with_first_setting"] = count_agreeing(report["paired_to_first_setting"])
    print(f"{'warmup':>6} {'window':>6} {'median CV':>9} {'max CV':>7} {'within ±3%':>10} {'attempt':>8} "
          f"{'overhead':>8}", file=sys.stderr)
    for row in report["by_setting"]:
        print(f"{row['warmup_s']:>6g} {row['window_s']:>6g} {row['median_cv']:>9.1%} {row['max_cv']:>7.1%} "
              f"{row['cells_within_3_percent']:>5} of {row['cells']:<2} {row['attempt_wall_s']:>7.2f}s "
              f"{row['overhead_s']:>7.2f}s", file=sys.stderr)
    print(json.dumps(report, indent=1))
    return 0


def by_setting(cells: list[dict], settings_measured: list[tuple[float, ...]]) -> list[dict]:
    """Per (warmup, window): the median and largest between-round CV over the cells, and the attempt's cost."""
    rows = []
    for warmup, window in settings_measured:
        members = [c for c in cells if c["warmup_s"] == warmup and c["window_s"] == window and c["cv"] is not None]
        if not members:
            continue
        rows.append({"warmup_s": warmup, "window_s": window,
                     "median_cv": statistics.median(c["cv"] for c in members),
                     "max_cv": max(c["cv"] for c in members),
                     "cells_within_3_percent": sum(summarize(c["rates"]).precision <= 0.03 for c in members),
                     "cells": len(members),
                     "attempt_wall_s": statistics.median(c["attempt_wall_s"] for c in members),
                     "overhead_s": statistics.median(c["overhead_s"] for c in members)})
    return rows


if __name__ == "__main__":
    sys.exit(main())
