"""What the profilers cost the pair: the same cell with both sides profiled and without, paired by round.

`diagnose --profile` and `run --profile` take their profiles in attempts of their own, because the profilers slow
the pair down: py-spy stops a Python process for each sample (needed for its native frames), and V8's profiler
interrupts the JavaScript thread. This measures by how much. Each round runs, for every cell, one attempt with
both sides profiled (settings.profile_dir: system/profilers.py) and one without, each on a fresh server started
the same way (a profiled Node.js side gets NODE_OPTIONS --inspect-port), in ABBA order across rounds. The figure
per cell: the per-round rate ratio profiled/unprofiled with its interval, and each side's CPU per roundtrip both
ways. Prints one JSON object on stdout; a summary goes to stderr.
Usage: python -m benchmarks.profiler_overhead [--cells websockets:websockets,node-ws:node-ws,aiohttp:node-ws]
       [--rounds 6] [--duration 2]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from benchmarks.rounds_setup import ROOT, implementations_by_role, matrix_settings, parse_arguments
from pingpong.harness.analysis.stats import interval_label, median_interval
from pingpong.harness.measure.local import run_attempt

DEFAULT_CELLS = "websockets:websockets,node-ws:node-ws,aiohttp:node-ws"


def more_options(parser) -> None:
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per attempt's window (as profiled)")


def cpu_us(attempt, side: str) -> float | None:
    cpu_s = attempt.server_cpu_s if side == "server" else attempt.client_cpu_s
    return None if cpu_s is None or not attempt.roundtrips else cpu_s * 1e6 / attempt.roundtrips


def main() -> int:
    args = parse_arguments(__doc__.splitlines()[0], DEFAULT_CELLS, more_options)
    implementations = implementations_by_role()
    settings = replace(matrix_settings(), duration_s=args.duration)
    found = {"rounds": args.rounds, "window_s": args.duration, "cells": {}}
    with tempfile.TemporaryDirectory(prefix="profiler-overhead-") as work:
        measured = {pair: {"profiled": {}, "plain": {}} for pair in args.cell_pairs}
        for round_number in range(1, args.rounds + 1):
            order = ("profiled", "plain") if round_number % 2 else ("plain", "profiled")
            for pair in args.cell_pairs:
                server, client = implementations[("server", pair[0])], implementations[("client", pair[1])]
                for mode in order:
                    folder = Path(work) / f"{pair[0]}-{pair[1]}-{round_number}"
                    folder.mkdir(exist_ok=True)
                    attempt = run_attempt(server, client, replace(settings, profile_dir=str(folder) if
                                                                  mode == "profiled" else None),
                                          round_number, ROOT)
                    if not attempt.ok:
                        raise SystemExit(f"profiler_overhead: {pair} round {round_number} ({mode}): {attempt.reason}")
                    missing = [capture.get("error") for capture in (attempt.profiles or {}).values()
                               if capture.get("error")]
                    if missing:
                        raise SystemExit(f"profiler_overhead: {pair}: a side was not profiled: {missing[0]}")
                    measured[pair][mode][round_number] = attempt
    for (server, client), modes in measured.items():
        ratios = [modes["profiled"][r].roundtrips_per_s / modes["plain"][r].roundtrips_per_s
                  for r in sorted(modes["plain"])]
        interval = median_interval(ratios)
        entry = {"rate_ratio_profiled_over_plain": statistics.median(ratios),
                 "interval": [interval.low, interval.high] if interval else None,
                 "interval_label": interval_label(interval.kind, interval.coverage, interval.n, ranks=interval.ranks)
                 if interval else None,
                 "ratios_by_round": ratios,
                 "cpu_us_per_roundtrip": {mode: {side: statistics.median(cpu_us(a, side) for a in by_round.values())
                                                 for side in ("server", "client")}
                                          for mode, by_round in modes.items()}}
        found["cells"][f"{server} × {client}"] = entry
        cpu = entry["cpu_us_per_roundtrip"]
        print(f"{server} × {client}: profiled/unprofiled {entry['rate_ratio_profiled_over_plain']:.2f}× "
              f"[{interval.low:.2f}–{interval.high:.2f}, {entry['interval_label']}]; CPU µs per roundtrip server "
              f"{cpu['plain']['server']:.0f} → {cpu['profiled']['server']:.0f}, client {cpu['plain']['client']:.0f} "
              f"→ {cpu['profiled']['client']:.0f}", file=sys.stderr)
    print(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
