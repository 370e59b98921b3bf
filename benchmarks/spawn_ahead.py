"""Starting clients ahead of their turn: how much time it saves, and whether the rates stay what they were.

Every round, each server's group of cells runs three times, in a shuffled order of the modes:
- "at-turn": every client started at its turn (--no-spawn-ahead);
- "one-ahead": one client ahead at a time: the first while the server gets ready, each next one while the attempt
  before it ends;
- "ahead" (the default): the whole group's clients while the server gets ready, on the idle client CPU.
A client started ahead loads, then waits unconnected at its start gate for its go. All modes measure the group's
cells in the same shuffled order, each on a server process of its own. It prints, per mode, the wall time of the
server groups (server start, every attempt, server stop) and its paired ratio to the others' per round, and per
cell the paired ratio of the rates (each mode started ahead / at turn) and whether they agree within the noise.

Prints one JSON object on stdout; a table on stderr.
Usage: python -m benchmarks.spawn_ahead [--rounds 8] [--cells aiohttp:websockets,node-ws:picows,...]
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks.rounds_setup import (AGREE_WITHIN, ROOT, count_agreeing, implementations_by_role, matrix_settings,
                                     paired_agreement, parse_arguments)
from pingpong.harness.analysis.stats import paired_ratio
from pingpong.harness.measure.clients_ahead import CLIENTS_AHEAD_AT_SERVER_START
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.measure.server import start_server
from pingpong.harness.settings.cell import cpus_for
from pingpong.harness.system import processes
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

# Every client runtime of the default matrix, against a Python, a Node.js and the C server.
DEFAULT_CELLS = ",".join(
    [f"{server}:{client}" for server in ("aiohttp", "node-ws")
     for client in ("websockets", "aiohttp", "node-ws", "picows", "node-builtin", "bun")]
    + [f"raw-tcp-c:{client}" for client in ("raw-tcp-python", "raw-tcp-c", "raw-tcp-node", "raw-tcp-bun")])
# each mode: how many clients start with the server (None: every client at its turn)
MODES = {"at-turn": None, "one-ahead": 1, "ahead": CLIENTS_AHEAD_AT_SERVER_START}


def measure_group(server, clients, settings, round_number, mode: str) -> tuple[float, dict[str, float]]:
    """One server process for these clients, in this order: (wall seconds from start to stop, rate per client)."""
    server_cpus, _ = cpus_for(settings)
    rates = {}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pingpong-ahead-") as work:
        upcoming = [(client, settings, round_number) for client in clients] if MODES[mode] else None
        started = start_server(server, settings, ROOT, Path(work), server_cpus, upcoming, MODES[mode] or 1)
        try:
            for client in clients:
                attempt = run_attempt_on(started, client, settings, round_number, ROOT)
                if attempt.ok:
                    rates[client.name] = attempt.roundtrips_per_s
                else:
                    print(f"{server.name} × {client.name} {mode} round {round_number}: "
                          f"{attempt.status}: {attempt.reason}", file=sys.stderr)
        finally:
            with processes.interrupts_deferred():
                started.discard_waiting()
                processes.stop(started.process)
    return time.monotonic() - began, rates


def main() -> int:
    args = parse_arguments(__doc__.splitlines()[0], DEFAULT_CELLS)
    implementations = implementations_by_role()
    cells = args.cell_pairs
    settings = matrix_settings()
    generator = random.Random(args.seed)
    wall: dict[str, dict[int, float]] = {mode: {} for mode in MODES}
    rates: dict[str, dict[tuple[str, str], dict[int, float]]] = {mode: {} for mode in MODES}
    attempts = {mode: 0 for mode in MODES}
    with stop_signals_raise_interrupt():
        for round_number in range(1, args.rounds + 1):
            servers = sorted({server for server, _ in cells})
            generator.shuffle(servers)
            for server_name in servers:
                clients = [implementations[("client", c)] for s, c in cells if s == server_name]
                generator.shuffle(clients)
                modes = list(MODES)
                generator.shuffle(modes)
                for mode in modes:
                    seconds, group_rates = measure_group(implementations[("server", server_name)], clients,
                                                         settings, round_number, mode)
                    wall[mode][round_number] = wall[mode].get(round_number, 0.0) + seconds
                    attempts[mode] += len(clients)
                    for client, rate in group_rates.items():
                        rates[mode].setdefault((server_name, client), {})[round_number] = rate
            print(f"round {round_number}/{args.rounds}: "
                  + ", ".join(f"{mode} {wall[mode][round_number]:.1f} s" for mode in MODES),
                  file=sys.stderr, flush=True)
    per_attempt = {mode: sum(wall[mode].values()) / attempts[mode] for mode in MODES}
    time_ratios = {f"{a} / {b}": paired_ratio(wall[a], wall[b])
                   for a, b in (("ahead", "at-turn"), ("one-ahead", "at-turn"), ("ahead", "one-ahead"))}
    report = {"rounds": args.rounds, "seed": args.seed, "modes": MODES, "cells": [], "agree_within": AGREE_WITHIN,
              "wall_s_per_round": wall, "wall_s_per_attempt": per_attempt,
              "window_and_warmups_s": "included in every mode's wall time",
              "wall_ratios": {name: asdict(ratio) for name, ratio in time_ratios.items()}}
    for server, client in cells:
        at_turn = rates["at-turn"].get((server, client), {})
        cell = {"server": server, "client": client, **{mode.replace("-", "_"): rates[mode].get((server, client), {})
                                                        for mode in MODES}}
        for mode in ("one-ahead", "ahead"):
            cell[f"{mode.replace('-', '_')}_over_at_turn"] = paired_agreement(
                server, client, rates[mode].get((server, client), {}), at_turn, f"{mode} / at turn")
        report["cells"].append(cell)
    print("wall time of a round (medians): " + ", ".join(
        f"{mode} {statistics.median(wall[mode].values()):.1f} s" for mode in MODES), file=sys.stderr)
    for name, ratio in time_ratios.items():
        print(f"  wall {name} = {ratio.value:.3f} ({ratio.low or 0:.3f}–{ratio.high or 0:.3f}, {ratio.label()})",
              file=sys.stderr)
    print("per attempt: " + ", ".join(f"{mode} {per_attempt[mode]:.3f} s" for mode in MODES), file=sys.stderr)
    for mode in ("one-ahead", "ahead"):
        key = f"{mode.replace('-', '_')}_over_at_turn"
        print(f"{mode} / at turn:", file=sys.stderr, end=" ")
        report[f"{key}_agreeing_cells"] = count_agreeing([cell[key] for cell in report["cells"]])
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
