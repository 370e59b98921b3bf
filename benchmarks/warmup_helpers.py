"""A client's helper threads during its warm-up, on the measured CPU or on the spare one: which reaches the client's
steady state, and at what cost.

    python -m benchmarks.warmup_helpers [--rounds 6] [--cells sanic:node-ws,...]
                                        [--settings default:measured,default:spare,2:measured,2:spare]

A setting is WARMUP:HELPERS. WARMUP is "default" (the matrix's: 0.2 s, a Node.js client 0.5 s) or seconds for
every client (and a Node.js server's first client that much longer, as --jit-warmup does); HELPERS is where the
client's threads but its main one run during the warm-up (--warmup-helpers: measured, or spare until just before
the window). Every window has all threads of both sides on the one measured CPU (the matrix's same-cpu placement).

Every round starts each server once and measures each of its cells in every setting on it, in a shuffled order, so
the settings share the host's drift. It prints, per cell and setting, the median rate (at the reference pace) and
the CV of the rounds, and the paired ratio by round of every later setting to every earlier one, with its interval: a
warm-up that
reaches the steady state measures what a long one does (2:measured / default:spare near 1), and one that does not
measures less (2:measured / default:measured above 1).

Prints one JSON object on stdout; a table on stderr.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from dataclasses import replace

from benchmarks.rounds_setup import ROOT, implementations_by_role, matrix_settings, parse_arguments, server_rounds
from pingpong.harness.analysis.stats import paired_ratio, summarize
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.settings.cell import WARMUP_HELPERS, CellSettings, cpus_for
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

DEFAULT_CELLS = ("sanic:node-ws,sanic:node-builtin,node-ws:node-ws,node-ws:node-builtin,bun:node-ws,sanic:bun,"
                 "bun:bun,raw-tcp-c:raw-tcp-node,raw-tcp-c:raw-tcp-bun,sanic:websockets,node-ws:websockets")
DEFAULT_SETTINGS = "default:measured,default:spare,2:measured,2:spare"


def parse_settings(text: str) -> list[tuple[str, str]]:
    """WARMUP:HELPERS pairs, comma-separated; ValueError (one line) for anything else. Pure."""
    settings = []
    for item in text.split(","):
        warmup, _, helpers = item.partition(":")
        if helpers not in WARMUP_HELPERS:
            raise ValueError(f"--settings {item!r}: HELPERS must be one of {', '.join(WARMUP_HELPERS)}")
        try:
            seconds = None if warmup == "default" else float(warmup)
        except ValueError:
            seconds = 0.0
        if seconds is not None and not seconds > 0:
            raise ValueError(f"--settings {item!r}: WARMUP must be 'default' or seconds above 0")
        settings.append((warmup, helpers))
    return settings


def settings_for(base: CellSettings, warmup: str, helpers: str) -> CellSettings:
    """The cell settings of one WARMUP:HELPERS setting. Pure."""
    if warmup == "default":
        return replace(base, warmup_helpers=helpers)
    seconds = float(warmup)
    return replace(base, warmup_s=seconds, jit_warmup_s=seconds, warmup_helpers=helpers)


def label(setting: tuple[str, str]) -> str:
    return f"{setting[0]}:{setting[1]}"


def main() -> int:
    def options(parser) -> None:
        parser.add_argument("--settings", default=DEFAULT_SETTINGS, help="WARMUP:HELPERS, comma-separated")

    args = parse_arguments(__doc__.splitlines()[0], DEFAULT_CELLS, options)
    implementations = implementations_by_role()
    try:
        settings_measured = parse_settings(args.settings)
        for pair in args.cell_pairs:
            known = len(pair) == 2 and {("server", pair[0]), ("client", pair[1])} <= implementations.keys()
            if not known:
                raise ValueError(f"--cells: {':'.join(pair)!r} is not SERVER:CLIENT of manifest.toml")
    except ValueError as problem:
        print(f"warmup_helpers: {problem}", file=sys.stderr)
        return 2
    base = matrix_settings()
    server_cpus, _ = cpus_for(base)
    by_round: dict[tuple[str, str, str], dict[int, float]] = {}
    with stop_signals_raise_interrupt():
        for round_number, server, started, client, setting in server_rounds(
                "warmup_helpers", args.cell_pairs, settings_measured, args.rounds, args.seed, implementations, base,
                server_cpus):
            attempt = run_attempt_on(started, implementations[("client", client)], settings_for(base, *setting),
                                     round_number, ROOT)
            if not attempt.ok:
                print(f"{server} × {client} {label(setting)} round {round_number}: {attempt.status}: "
                      f"{attempt.reason}", file=sys.stderr)
                continue
            by_round.setdefault((server, client, label(setting)), {})[round_number] = attempt.roundtrips_per_s
    report = {"rounds": args.rounds, "seed": args.seed, "settings": [label(s) for s in settings_measured],
              "warmup_s": base.warmup_s, "jit_warmup_s": base.jit_warmup_s, "cells": []}
    for server, client in args.cell_pairs:
        cell = {"server": server, "client": client, "settings": {}, "paired": []}
        for setting in settings_measured:
            rates = by_round.get((server, client, label(setting)), {})
            summary = summarize(list(rates.values())) if rates else None
            cell["settings"][label(setting)] = {"by_round": rates, "median": summary and summary.median,
                                                "cv": summary and summary.cv}
        for denominator, numerator in itertools.combinations([label(s) for s in settings_measured], 2):
            top, bottom = by_round.get((server, client, numerator), {}), by_round.get((server, client, denominator), {})
            if not top.keys() & bottom.keys():
                continue  # no round measured both
            ratio = paired_ratio(top, bottom)
            cell["paired"].append({"ratio": f"{numerator} / {denominator}", "value": ratio.value, "low": ratio.low,
                                   "high": ratio.high, "interval": ratio.label()})
        report["cells"].append(cell)
    labels = [label(s) for s in settings_measured]
    print(f"{'cell':32} " + " ".join(f"{name:>17}" for name in labels), file=sys.stderr)
    for cell in report["cells"]:
        medians = [cell["settings"][name]["median"] for name in labels]
        print(f"{cell['server'] + ' × ' + cell['client']:32} " +
              " ".join(f"{m:>17,.0f}" if m else f"{'—':>17}" for m in medians), file=sys.stderr)
        for pair in cell["paired"]:
            if pair["value"] is not None:
                interval = f"{pair['low']:.2f}–{pair['high']:.2f}" if pair["low"] is not None else "no interval"
                print(f"    {pair['ratio']:38} {pair['value']:.2f} ({interval}, {pair['interval']})",
                      file=sys.stderr)
    cvs = {name: [c["settings"][name]["cv"] for c in report["cells"] if c["settings"][name]["cv"] is not None]
           for name in labels}
    report["median_cv"] = {name: statistics.median(values) if values else None for name, values in cvs.items()}
    print("median CV of a cell's rounds: " + ", ".join(f"{name} {cv:.1%}" for name, cv in report["median_cv"].items()
                                                       if cv is not None), file=sys.stderr)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
