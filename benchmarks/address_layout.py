"""Does a cell's rate depend on where its two processes' code lies? The same cells with the kernel's random address
layout and with it fixed, in the same rounds.

On one CPU (the default placement of a one-pair cell) the server and the client share one core: its caches and its
branch predictors. Two processes of one binary (a Python server and a Python client both run libpython) map that
binary at random, different addresses under the kernel's randomization, and at the same addresses with it off
(FIXED_ADDRESS_LAYOUT_ENV, as `setarch -R`). Each round measures every cell once each way (the two layouts in
shuffled order, the cells shuffled within each, a fresh server process per attempt, the matrix's window and warmup),
so the layouts are paired by round. Per cell and layout it prints the median rate, the CV of the rounds, how many
attempts fell below 0.85x of that median (the slow processes), both sides' CPU µs per roundtrip, and the fixed
layout's rate over the random one's, paired by round, with its order-statistic interval and the coverage it has.

Prints one JSON object on stdout (every attempt's figures); a table on stderr; --output also writes the JSON.
Usage: python -m benchmarks.address_layout [--rounds 8] [--cells S:C,...] [--placement auto|same-cpu|split]
       [--seed 1] [--output FILE]
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.process_modes import per_roundtrip
from benchmarks.rounds_setup import (ROOT, add_placement_option, implementations_by_role, matrix_settings,
                                   parse_arguments)
from pingpong.contract import FIXED_ADDRESS_LAYOUT_ENV
from pingpong.harness.analysis.stats import paired_ratio
from pingpong.harness.measure.local import run_attempt
from pingpong.harness.settings.cell import placement_of
from pingpong.harness.settings.environment import suite_commit
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

DEFAULT_CELLS = ("websockets:websockets,aiohttp:websockets,picows:aiohttp,raw-tcp-python:raw-tcp-python,"
                 "sanic:node-ws,node-ws:websockets,bun:bun")
LAYOUTS = ("random", "fixed")
SLOW_BELOW = 0.85  # an attempt below this share of its cell's median (in its layout) counts as a slow process


def layout_figures(attempts: dict[int, dict]) -> dict:
    """Median, CV and slow attempts of one cell in one layout, and both sides' median CPU µs per roundtrip (pure)."""
    rates = [attempt["rate"] for attempt in attempts.values()]
    if not rates:
        return {"attempts": 0}
    median = statistics.median(rates)
    return {"attempts": len(rates), "median": round(median, 1),
            "cv": round(statistics.stdev(rates) / statistics.fmean(rates), 4) if len(rates) > 1 else None,
            "slow": sum(rate < SLOW_BELOW * median for rate in rates),
            "server_us_per_roundtrip": round(statistics.median(a["server_us"] for a in attempts.values()), 2),
            "client_us_per_roundtrip": round(statistics.median(a["client_us"] for a in attempts.values()), 2)}


def more_options(parser) -> None:
    add_placement_option(parser)
    parser.add_argument("--output", type=Path, help="also write the JSON here")


def main() -> int:
    args = parse_arguments(__doc__.splitlines()[0], DEFAULT_CELLS, more_options)
    implementations = implementations_by_role()
    unknown = [name for server, client in args.cell_pairs
               for role, name in (("server", server), ("client", client)) if (role, name) not in implementations]
    if unknown or args.rounds < 2:
        problem = f"unknown implementations: {', '.join(unknown)}" if unknown else "--rounds takes 2 or more"
        print(f"address_layout: {problem}", file=sys.stderr)
        return 2
    settings = matrix_settings(args.placement)
    measured: dict[str, dict[tuple[str, str], dict[int, dict]]] = {layout: {} for layout in LAYOUTS}
    generator = random.Random(args.seed)
    commit, modified = suite_commit(ROOT)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    switch_before = os.environ.get(FIXED_ADDRESS_LAYOUT_ENV)
    try:
        with stop_signals_raise_interrupt(), tempfile.TemporaryDirectory(prefix="pingpong-layout-"):
            for round_number in range(1, args.rounds + 1):
                layouts = list(LAYOUTS)
                generator.shuffle(layouts)
                for layout in layouts:
                    if layout == "fixed":
                        os.environ[FIXED_ADDRESS_LAYOUT_ENV] = "1"
                    else:
                        os.environ.pop(FIXED_ADDRESS_LAYOUT_ENV, None)
                    cells = list(args.cell_pairs)
                    generator.shuffle(cells)
                    for server, client in cells:
                        attempt = run_attempt(implementations[("server", server)],
                                              implementations[("client", client)], settings, round_number, ROOT)
                        if not attempt.ok:
                            print(f"{server} × {client} {layout}: {attempt.status}: {attempt.reason}", file=sys.stderr)
                            continue
                        figures = per_roundtrip(attempt)
                        measured[layout].setdefault((server, client), {})[round_number] = {
                            "rate": round(figures["rate"], 1),
                            "server_us": round(figures["server_us_per_roundtrip"], 2),
                            "client_us": round(figures["client_us_per_roundtrip"], 2),
                            "placement": attempt.cpu_placement}
                print(f"round {round_number}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        if switch_before is None:
            os.environ.pop(FIXED_ADDRESS_LAYOUT_ENV, None)
        else:
            os.environ[FIXED_ADDRESS_LAYOUT_ENV] = switch_before
    report = {"benchmark": "address_layout", "commit": commit, "suite_modified": modified, "started_at": started_at,
              "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "settings": {"rounds": args.rounds, "seed": args.seed, "placement": placement_of(settings),
                           "warmup_s": settings.warmup_s, "window_s": settings.duration_s,
                           "slow_below": SLOW_BELOW, "switch": FIXED_ADDRESS_LAYOUT_ENV},
              "cells": []}
    for server, client in args.cell_pairs:
        by_layout = {layout: measured[layout].get((server, client), {}) for layout in LAYOUTS}
        ratio = paired_ratio({n: a["rate"] for n, a in by_layout["fixed"].items()},
                             {n: a["rate"] for n, a in by_layout["random"].items()})
        cell = {"server": server, "client": client,
                **{layout: {"figures": layout_figures(by_layout[layout]),
                            "rounds": {str(n): a for n, a in sorted(by_layout[layout].items())}}
                   for layout in LAYOUTS},
                "fixed_over_random": asdict(ratio)}
        report["cells"].append(cell)
        line = [f"{server} × {client}:"]
        for layout in LAYOUTS:
            figures = cell[layout]["figures"]
            if figures["attempts"]:
                line.append(f"{layout} {figures['median']:,.0f}/s cv {figures['cv'] or 0:.1%} slow {figures['slow']}"
                            f"/{figures['attempts']} (µs/rt {figures['server_us_per_roundtrip']}"
                            f"+{figures['client_us_per_roundtrip']});")
        if ratio.low is not None:
            line.append(f"fixed/random {ratio.value:.3f} [{ratio.low:.3f}–{ratio.high:.3f}, {ratio.label()}]")
        print(" ".join(line), file=sys.stderr)
    text = json.dumps(report, indent=1)
    if args.output:
        args.output.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
