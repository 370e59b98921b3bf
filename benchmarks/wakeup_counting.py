"""What counting wakeups costs a cell: the same cells with PINGPONG_COUNT_WAKEUPS=1 and without, paired by round.

Each round measures every cell twice, counted and not, in an order that alternates by round, each on a fresh server
process, with no slices in the window (PINGPONG_RAW_WINDOWS=1, as the counting's documentation asks). Per cell it
prints the paired ratio of the counted rate over the uncounted one with its order-statistic interval, the events
counted per roundtrip (a wakeup is two: its waking and its wakeup), and the µs a roundtrip the counting added,
over those events: what one event costs.

Usage: python -m benchmarks.wakeup_counting [--rounds 10] [--cells aiohttp:node-ws,raw-tcp-c:raw-tcp-c]
                                            [--placement split]
Prints one JSON object on stdout; a line per cell on stderr.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import asdict, replace

from benchmarks.rounds_setup import ROOT, implementations_by_role, matrix_settings, parse_arguments
from pingpong.contract import RAW_WINDOWS_ENV
from pingpong.harness.analysis.stats import paired_ratio
from pingpong.harness.measure.local import run_attempt
from pingpong.harness.system import wakeup_trace
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

DEFAULT_CELLS = "aiohttp:node-ws,raw-tcp-c:raw-tcp-c"
MODES = ("uncounted", "counted")


def events_per_roundtrip(attempt) -> float | None:
    """Both sides' wakeups per roundtrip, twice (each is a sched_waking and a sched_wakeup event), moves once."""
    sides = (attempt.server_scheduling, attempt.client_scheduling)
    if any(side is None or side.wakeups is None for side in sides) or not attempt.roundtrips:
        return None
    return sum(2 * side.wakeups + side.migrations for side in sides) / attempt.roundtrips


def main() -> int:
    args = parse_arguments(__doc__.splitlines()[0], DEFAULT_CELLS,
                           lambda parser: parser.add_argument("--placement", default="split"))
    if (why_not := wakeup_trace.available()) is not None:
        raise SystemExit(f"wakeup_counting: {why_not}")
    implementations = implementations_by_role()
    settings = replace(matrix_settings(args.placement), duration_s=0.2)
    os.environ[RAW_WINDOWS_ENV] = "1"
    rates: dict[tuple[str, str], dict[str, dict[int, float]]] = {cell: {m: {} for m in MODES} for cell in
                                                                  args.cell_pairs}
    events: dict[tuple[str, str], list[float]] = {cell: [] for cell in args.cell_pairs}
    with stop_signals_raise_interrupt():
        for round_number in range(1, args.rounds + 1):
            for cell in args.cell_pairs:
                for mode in (MODES if round_number % 2 else tuple(reversed(MODES))):
                    if mode == "counted":
                        os.environ[wakeup_trace.ENV] = "1"
                    else:
                        os.environ.pop(wakeup_trace.ENV, None)
                    attempt = run_attempt(implementations[("server", cell[0])], implementations[("client", cell[1])],
                                          settings, round_number, ROOT)
                    if not attempt.ok:
                        print(f"{cell[0]} × {cell[1]} {mode}: {attempt.status}: {attempt.reason}", file=sys.stderr)
                        continue
                    rates[cell][mode][round_number] = attempt.roundtrips_per_s
                    if mode == "counted" and (counted := events_per_roundtrip(attempt)) is not None:
                        events[cell].append(counted)
            print(f"round {round_number}/{args.rounds} done", file=sys.stderr, flush=True)
    os.environ.pop(wakeup_trace.ENV, None)
    report = {"rounds": args.rounds, "placement": args.placement, "window_s": settings.duration_s, "cells": []}
    for cell in args.cell_pairs:
        ratio = paired_ratio(rates[cell]["counted"], rates[cell]["uncounted"])
        uncounted = statistics.median(rates[cell]["uncounted"].values())
        counted = statistics.median(rates[cell]["counted"].values())
        added_us = 1e6 / counted - 1e6 / uncounted
        per_roundtrip = statistics.median(events[cell]) if events[cell] else None
        entry = {"server": cell[0], "client": cell[1], "counted_over_uncounted": asdict(ratio),
                 "uncounted_rates": rates[cell]["uncounted"], "counted_rates": rates[cell]["counted"],
                 "events_per_roundtrip": per_roundtrip, "added_us_per_roundtrip": added_us,
                 "us_per_event": added_us / per_roundtrip if per_roundtrip else None}
        report["cells"].append(entry)
        interval = f"[{ratio.low:.3f}–{ratio.high:.3f}, {ratio.label()}]" if ratio.low is not None else ""
        print(f"{cell[0]} × {cell[1]}: counted/uncounted {ratio.value:.3f} {interval}; {uncounted:,.0f} → "
              f"{counted:,.0f}/s, {added_us:+.1f} µs a roundtrip over {per_roundtrip or 0:.1f} events"
              + (f": {entry['us_per_event']:.2f} µs an event" if entry["us_per_event"] else ""), file=sys.stderr)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
