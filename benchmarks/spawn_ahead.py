"""Starting clients ahead of their turn: how much time it saves, and whether the rates stay what they were.

Every round, each server's group of cells runs twice, in a shuffled order of the two modes: once with every client
started at its turn (--no-spawn-ahead) and once with each client started ahead of it (the default: the first while
the server gets ready, each next one while the attempt before it ends; it loads, then waits unconnected for its go).
Both modes measure the group's cells in the same shuffled order, each on a server process of its own. It prints,
per mode, the wall time of the server groups (server start, every attempt, server stop), the paired ratio of the
two per round, and per cell the paired ratio of the rates (ahead / at turn) and whether they agree within the noise.

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

from pingpong.harness import processes
from pingpong.harness.runner import cpus_for, run_attempt_on, start_server
from pingpong.harness.stats import paired_ratio
from pingpong.harness.stop_signals import stop_signals_raise_interrupt
from benchmarks.rounds_setup import (AGREE_WITHIN, ROOT, count_agreeing, implementations_by_role, matrix_settings,
                                    paired_agreement, parse_arguments)

# Every client runtime of the default matrix, against a Python, a Node.js and the C server.
DEFAULT_CELLS = ",".join(
    [f"{server}:{client}" for server in ("aiohttp", "node-ws")
     for client in ("websockets", "aiohttp", "node-ws", "picows", "node-builtin", "bun")]
    + [f"raw-tcp-c:{client}" for client in ("raw-tcp-python", "raw-tcp-c", "raw-tcp-node", "raw-tcp-bun")])
MODES = ("at-turn", "ahead")


def measure_group(server, clients, settings, round_number, ahead: bool) -> tuple[float, dict[str, float]]:
    """One server process for these clients, in this order: (wall seconds from start to stop, rate per client)."""
    server_cpus, _ = cpus_for(settings)
    rates = {}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pingpong-ahead-") as work:
        upcoming = [(client, settings, round_number) for client in clients] if ahead else None
        started = start_server(server, settings, ROOT, Path(work), server_cpus, upcoming)
        try:
            for client in clients:
                attempt = run_attempt_on(started, client, settings, round_number, ROOT)
                if attempt.ok:
                    rates[client.name] = attempt.roundtrips_per_s
                else:
                    print(f"{server.name} × {client.name} {'ahead' if ahead else 'at turn'} round {round_number}: "
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
                                                         settings, round_number, ahead=mode == "ahead")
                    wall[mode][round_number] = wall[mode].get(round_number, 0.0) + seconds
                    attempts[mode] += len(clients)
                    for client, rate in group_rates.items():
                        rates[mode].setdefault((server_name, client), {})[round_number] = rate
            print(f"round {round_number}/{args.rounds}: at turn {wall['at-turn'][round_number]:.1f} s, ahead "
                  f"{wall['ahead'][round_number]:.1f} s", file=sys.stderr, flush=True)
    per_attempt = {mode: sum(wall[mode].values()) / attempts[mode] for mode in MODES}
    time_ratio = paired_ratio(wall["ahead"], wall["at-turn"])
    report = {"rounds": args.rounds, "seed": args.seed, "cells": [], "agree_within": AGREE_WITHIN,
              "wall_s_per_round": wall, "wall_s_per_attempt": per_attempt,
              "window_and_warmups_s": "included in both modes' wall time",
              "ahead_over_at_turn_wall": asdict(time_ratio)}
    for server, client in cells:
        ahead, at_turn = rates["ahead"].get((server, client), {}), rates["at-turn"].get((server, client), {})
        report["cells"].append({"server": server, "client": client, "ahead": ahead, "at_turn": at_turn,
                                **paired_agreement(server, client, ahead, at_turn, "ahead / at turn")})
    saved = sum(wall["at-turn"].values()) - sum(wall["ahead"].values())
    print(f"wall time of a round: at turn {statistics.median(wall['at-turn'].values()):.1f} s, ahead "
          f"{statistics.median(wall['ahead'].values()):.1f} s (medians); ahead / at turn = {time_ratio.value:.3f} "
          f"({time_ratio.low or 0:.3f}–{time_ratio.high or 0:.3f}, {time_ratio.label()}); per attempt "
          f"{per_attempt['at-turn']:.3f} s and {per_attempt['ahead']:.3f} s, {saved:.1f} s saved in all",
          file=sys.stderr)
    report["agreeing_cells"] = count_agreeing(report["cells"])
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
