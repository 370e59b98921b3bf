"""Do long-lived servers measure what fresh ones do? Both modes interleaved on a few cells, paired per round.

Every round measures each cell twice, in a shuffled order: once on a server process started for that attempt alone
(--fresh-server) and once on the round's long-lived server process, which serves every cell of that server in the
round, each client in a room of its own. Per cell it prints the paired ratio long-lived / fresh (the median of the
per-round ratios, with its order-statistic interval) and whether the two modes agree within the noise.

Prints one JSON object on stdout; a table on stderr.
Usage: python -m benchmarks.server_modes [--rounds 8] [--cells sanic:websockets,node-ws:node-ws,...]
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path

from benchmarks.rounds_setup import (AGREE_WITHIN, ROOT, count_agreeing, implementations_by_role, matrix_settings,
                                     paired_agreement, parse_arguments)
from pingpong.harness.measure.local import run_attempt, run_attempt_on
from pingpong.harness.measure.server import start_server
from pingpong.harness.settings.cell import cpus_for
from pingpong.harness.system import processes
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

DEFAULT_CELLS = "sanic:websockets,aiohttp:node-ws,node-ws:node-ws,websockets:picows,bun:bun,raw-tcp-c:raw-tcp-c"


def main() -> int:
    args = parse_arguments(__doc__.splitlines()[0], DEFAULT_CELLS)
    implementations = implementations_by_role()
    cells = args.cell_pairs
    settings = matrix_settings()
    server_cpus, _ = cpus_for(settings)
    rates: dict[str, dict[tuple[str, str], dict[int, float]]] = {"fresh": {}, "long-lived": {}}
    generator = random.Random(args.seed)
    with stop_signals_raise_interrupt():
        for round_number in range(1, args.rounds + 1):
            servers = sorted({server for server, _ in cells})
            generator.shuffle(servers)
            for server_name in servers:
                server = implementations[("server", server_name)]
                jobs = [(client, mode) for s, client in cells if s == server_name for mode in rates]
                generator.shuffle(jobs)
                with tempfile.TemporaryDirectory(prefix="pingpong-modes-") as work:
                    started = start_server(server, settings, ROOT, Path(work), server_cpus)
                    try:
                        for client, mode in jobs:
                            implementation = implementations[("client", client)]
                            attempt = (run_attempt(server, implementation, settings, round_number, ROOT)
                                       if mode == "fresh" else
                                       run_attempt_on(started, implementation, settings, round_number, ROOT))
                            if attempt.ok:
                                rates[mode].setdefault((server_name, client), {})[round_number] = \
                                    attempt.roundtrips_per_s
                            else:
                                print(f"{server_name} × {client} {mode} round {round_number}: {attempt.status}: "
                                      f"{attempt.reason}", file=sys.stderr)
                    finally:
                        with processes.interrupts_deferred():
                            processes.stop(started.process)
            print(f"round {round_number}/{args.rounds} done", file=sys.stderr, flush=True)
    report = {"rounds": args.rounds, "seed": args.seed, "agree_within": AGREE_WITHIN, "cells": []}
    for server, client in cells:
        long_lived = rates["long-lived"].get((server, client), {})
        fresh = rates["fresh"].get((server, client), {})
        report["cells"].append({"server": server, "client": client, "long_lived": long_lived, "fresh": fresh,
                                **paired_agreement(server, client, long_lived, fresh, "long-lived / fresh")})
    report["agreeing_cells"] = count_agreeing(report["cells"])
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
