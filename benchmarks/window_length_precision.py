"""Which matrix window is more precise at the reference pace: a cell's attempts of each window length in the same
rounds, paired, with the rounds each length affords in the default run's budget.

A longer window averages more of the pace's error within it (its slices sample the host's slow stretches, which on
a noisy host come and go within milliseconds), but it costs every attempt its extra length, so the default run's
budget affords fewer rounds, and the median's interval of fewer rounds is wider for the same spread (6 and 7 rounds:
the minimum and maximum; 8: the second smallest and the maximum). Runs of each length made one after another meet
different hosts (a noisy host's slow share moved from 5% to 19% between two runs five minutes apart, 2026-11-30);
here every round starts each cell's server once and runs one attempt of each --windows length on it, in a shuffled
order, all in the matrix's settings and --placement. Per cell and length: the CV of its rounds at the reference
pace and raw; the half-width its median's interval is expected to have at the rounds that length affords
(analysis/precision.expected_precision: the interval's ranks at that many rounds, read from the cell's own rates);
and whether that is within --precision. Per cell, each longer length's rate over the shortest's, paired by
round (the rates should not depend on the window). --afforded gives the rounds per length: by default what the
default runs gave in their 290 s: 8 rounds of 0.1 s windows (34 s a round) and 6 of 0.3 s (45-46 s) on 2026-11-30,
7 of 0.2 s on 2026-11-29.

Prints one JSON object on stdout; a table on stderr.
Usage: python -m benchmarks.window_length_precision [--rounds 12] [--windows 0.1,0.2,0.3] [--afforded 0.1:8,...]
                                                    [--precision 0.03] [--cells sanic:websockets,...] [--seed 1]
                                                    [--placement auto|same-cpu|split|...]
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import replace
from datetime import datetime, timezone

from benchmarks.rounds_setup import ROOT, add_placement_option, paced_cells, parse_arguments, server_rounds
from benchmarks.window_pace import cv
from pingpong.harness.analysis.host_modes import FAST_QUANTILE, SLOW_FACTOR, observed_quantile
from pingpong.harness.analysis.precision import expected_precision
from pingpong.harness.analysis.stats import median_interval
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.measure.pacer import MIN_WINDOW_S
from pingpong.harness.system import host_sentinel
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

# Python x Python pairs (their rounds also differ by each process's code addresses), the C floor, and pairs with a
# JavaScript or a compiled side: 6 of the default matrix's 16 Python pairs and 8 of its 42 others
DEFAULT_CELLS = ("sanic:websockets,aiohttp:websockets,blacksheep:picows,websockets:aiohttp,picows:picows,"
                 "raw-tcp-python:raw-tcp-python,raw-tcp-c:raw-tcp-c,node-ws:node-ws,bun:bun,node-ws:websockets,"
                 "bun:websockets,sanic:node-ws,raw-tcp-node:raw-tcp-bun,raw-tcp-c:raw-tcp-python")
PYTHON_SIDES = {"sanic", "blacksheep", "aiohttp", "websockets", "picows", "raw-tcp-python", "websockets-plain"}


def parse_windows(text: str) -> list[float]:
    """--windows: seconds, comma-separated, each a matrix window the pacer paces (MIN_WINDOW_S or more), none twice;
    in ascending order (the shortest is the one the others are paired against). ValueError names what is wrong;
    pure."""
    try:
        lengths = sorted(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"--windows: {text!r} is not seconds, comma-separated") from None
    if not all(math.isfinite(length) for length in lengths):
        raise ValueError(f"--windows: {text!r} is not seconds, comma-separated")
    if len(lengths) < 2 or len(set(lengths)) != len(lengths):
        raise ValueError(f"--windows: {text!r} must name two lengths or more, each once")
    if lengths[0] < MIN_WINDOW_S:
        raise ValueError(f"--windows: {lengths[0]:g} s is shorter than the {MIN_WINDOW_S:g} s the pacer paces")
    return lengths


def parse_afforded(text: str, lengths: list[float]) -> dict[float, int]:
    """--afforded: LENGTH:ROUNDS, comma-separated, for every --windows length (3 rounds or more); ValueError names
    what is wrong; pure."""
    afforded: dict[float, int] = {}
    for part in (piece for piece in text.split(",") if piece.strip()):
        length, _, rounds = part.partition(":")
        try:
            afforded[float(length)] = int(rounds)
        except ValueError:
            raise ValueError(f"--afforded: {part!r} is not LENGTH:ROUNDS") from None
    missing = [length for length in lengths if length not in afforded]
    if missing:
        raise ValueError(f"--afforded: no rounds for the {missing[0]:g} s window")
    if min(afforded[length] for length in lengths) < 3:
        raise ValueError("--afforded: every length needs 3 rounds or more")
    return {length: afforded[length] for length in lengths}


def cell_figures(rounds: dict[int, dict[float, dict[str, float]]], afforded: dict[float, int],
                 target: float) -> dict:
    """A cell's figures per window length from its rounds, {round: {length: {"reference": rate at the reference
    pace, "raw": raw rate}}} (pure): per length the rounds' CV of each, the expected half-width of the median's
    interval at the rounds it affords (None with fewer than 3 rounds) and whether it is within target; and each longer
    length's reference rate over the shortest's, paired over the rounds that have both (median and interval)."""
    lengths = list(afforded)
    figures: dict = {"lengths": {}, "paired": {}}
    for length in lengths:
        reference = [kinds[length]["reference"] for kinds in rounds.values()
                     if length in kinds and kinds[length].get("reference")]
        raw = [kinds[length]["raw"] for kinds in rounds.values() if length in kinds and kinds[length].get("raw")]
        expected = expected_precision(reference, afforded[length]) if len(reference) >= 3 else None
        figures["lengths"][str(length)] = {
            "rounds": len(reference), "reference_median": statistics.median(reference) if reference else None,
            "reference_cv": cv(reference), "raw_cv": cv(raw), "afforded_rounds": afforded[length],
            "expected_half_width": expected, "within": expected is not None and expected <= target}
    first = lengths[0]
    for length in lengths[1:]:
        ratios = [kinds[length]["reference"] / kinds[first]["reference"] for kinds in rounds.values()
                  if kinds.get(length, {}).get("reference") and kinds.get(first, {}).get("reference")]
        interval = median_interval(ratios)
        figures["paired"][str(length)] = {
            "rounds": len(ratios), "median_ratio": statistics.median(ratios) if ratios else None,
            "interval": [interval.low, interval.high] if interval else None,
            "coverage": interval.coverage if interval else None}
    return figures


def cell_line(cell: dict, lengths: list[float]) -> str:
    """One cell's line of the table on stderr (pure)."""
    parts = []
    for length in lengths:
        figures = cell["lengths"][str(length)]
        if figures["reference_cv"] is None or figures["expected_half_width"] is None:
            parts.append(f"{length:g} s: {figures['rounds']} round(s), too few")
            continue
        parts.append(f"{length:g} s: CV {100 * figures['reference_cv']:.1f}% (raw {100 * figures['raw_cv']:.1f}%), "
                     f"at {figures['afforded_rounds']} rounds ±{100 * figures['expected_half_width']:.1f}%")
    for length, paired in cell["paired"].items():
        if paired["median_ratio"] is not None:
            parts.append(f"{length} s / {lengths[0]:g} s {paired['median_ratio']:.3f}")
    return f"{cell['server']} × {cell['client']}: {'; '.join(parts)}"


def summary(cells: list[dict], lengths: list[float]) -> dict:
    """Per window length over the cells (pure): the median CV at the reference pace and raw, and how many cells
    are expected within the target at the rounds it affords, in all and among the Python x Python pairs."""
    result = {}
    for length in lengths:
        key = str(length)
        rows = [(cell, cell["lengths"][key]) for cell in cells if cell["lengths"][key]["reference_cv"] is not None]
        python = [figures for cell, figures in rows if {cell["server"], cell["client"]} <= PYTHON_SIDES]
        result[key] = {
            "cells": len(rows),
            "median_reference_cv": statistics.median(f["reference_cv"] for _, f in rows) if rows else None,
            "median_raw_cv": (statistics.median(f["raw_cv"] for _, f in rows if f["raw_cv"] is not None)
                              if rows else None),
            "within": sum(f["within"] for _, f in rows),
            "python_pairs": len(python), "python_pairs_within": sum(f["within"] for f in python)}
    return result


def slow_share(slices_ns: list[float]) -> float | None:
    """The share of the slices slower than SLOW_FACTOR times their fast level, as the report's Pace: line reads
    it; pure."""
    if not slices_ns:
        return None
    level = observed_quantile(slices_ns, FAST_QUANTILE)
    return sum(value > SLOW_FACTOR * level for value in slices_ns) / len(slices_ns)


def options(parser) -> None:
    add_placement_option(parser)
    parser.add_argument("--windows", default="0.1,0.2,0.3", help="window lengths, s (default %(default)s)")
    parser.add_argument("--afforded", default="0.1:8,0.2:7,0.3:6",
                        help="LENGTH:ROUNDS the default run affords each (default %(default)s)")
    parser.add_argument("--precision", type=float, default=0.03, help="the target (default %(default)g)")


def main() -> int:
    args = parse_arguments(__doc__.splitlines()[0], DEFAULT_CELLS, options)
    try:
        lengths = parse_windows(args.windows)
        afforded = parse_afforded(args.afforded, lengths)
    except ValueError as error:
        print(f"window_length_precision: {error}", file=sys.stderr)
        return 2
    if args.rounds < 3:
        print("window_length_precision: --rounds must be at least 3", file=sys.stderr)
        return 2
    repeated = [pair for index, pair in enumerate(args.cell_pairs) if pair in args.cell_pairs[:index]]
    prepared = paced_cells("window_length_precision", args.cell_pairs, args.placement,
                           also=f"--cells: {':'.join(repeated[0])} is named twice" if repeated else None)
    if prepared is None:
        return 2
    implementations, settings, server_cpus = prepared
    rates: dict[tuple[str, str], dict[int, dict[float, dict[str, float]]]] = {}
    slices: list[float] = []
    failures: list[str] = []
    began = datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        with stop_signals_raise_interrupt():
            for round_number, server, started, client, length in server_rounds(
                    "window-length-precision", args.cell_pairs, lengths, args.rounds, args.seed, implementations,
                    settings, server_cpus):
                attempt = run_attempt_on(started, implementations[("client", client)],
                                         replace(settings, duration_s=length), round_number, ROOT)
                if not attempt.ok or attempt.roundtrips_per_s is None or not attempt.paced:
                    off = (attempt.host_pace or {}).get("off")
                    failures.append(f"{server}×{client} round {round_number} {length:g} s: {attempt.status} "
                                    f"{attempt.reason or off or attempt.pace_not_applied or 'no rate'}")
                    print(f"window_length_precision: {failures[-1]}", file=sys.stderr)
                    continue
                rates.setdefault((server, client), {}).setdefault(round_number, {})[length] = {
                    "reference": attempt.roundtrips_per_s, "raw": attempt.raw_roundtrips_per_s}
                slices.extend(attempt.host_pace.get("slices_ns") or ())
    finally:
        host_sentinel.close_all()
    cells = [{"server": server, "client": client,
              **cell_figures(rates.get((server, client), {}), afforded, args.precision),
              "raw_rounds": {str(number): {str(length): kinds for length, kinds in by_length.items()}
                             for number, by_length in rates.get((server, client), {}).items()}}
             for server, client in args.cell_pairs]
    for cell in cells:
        print(cell_line(cell, lengths), file=sys.stderr)
    overall = summary(cells, lengths)
    share = slow_share(slices)
    for length in lengths:
        figures = overall[str(length)]
        if not figures["cells"]:
            continue
        print(f"{length:g} s windows at {afforded[length]} rounds: {figures['within']} of {figures['cells']} cells "
              f"expected within ±{100 * args.precision:g}% ({figures['python_pairs_within']} of "
              f"{figures['python_pairs']} Python pairs); median CV {100 * figures['median_reference_cv']:.1f}% at "
              f"the reference pace, {100 * figures['median_raw_cv']:.1f}% raw", file=sys.stderr)
    if share is not None:
        print(f"host: {100 * share:.0f}% of {len(slices):,} slices slower than {SLOW_FACTOR:g}× their fast level",
              file=sys.stderr)
    json.dump({"benchmark": "window_length_precision", "started_at": began, "placement": args.placement,
               "rounds": args.rounds, "seed": args.seed, "windows_s": lengths,
               "afforded_rounds": {str(length): rounds for length, rounds in afforded.items()},
               "precision": args.precision, "warmup_s": settings.warmup_s, "slow_share": share,
               "slices": len(slices), "summary": overall, "cells": cells, "failures": failures},
              sys.stdout, indent=1)
    print()
    return 0 if any(figures["cells"] for figures in overall.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
