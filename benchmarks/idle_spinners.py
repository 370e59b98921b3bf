"""Do the bimodal cells come from CPUs that halt between messages? The same cells with and without idle spinners.

On this KVM guest the idle CPU halts (no cpuidle driver: HLT, a VM exit), and waking it for the next message goes
through the hypervisor. A spinner is a busy loop at SCHED_IDLE priority pinned to a CPU: it runs only when nothing
else wants that CPU, so the CPU never halts, and it yields at once to the server or client pinned there. Each round
measures every cell once without and once with spinners on both CPUs (in shuffled order, a fresh server each
attempt); per cell it prints the spread of each mode (max/min over rounds, CV) and the paired ratio
with/without. If halting made the modes, spinners narrow the spread.

Prints one JSON object on stdout; a table on stderr.
Usage: python -m benchmarks.idle_spinners [--rounds 8] [--cells blacksheep:aiohttp,node-ws:aiohttp,...]
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from benchmarks.rounds_setup import ROOT, implementations_by_role, matrix_settings, parse_arguments
from pingpong.harness.analysis.stats import paired_ratio
from pingpong.harness.measure.local import run_attempt
from pingpong.harness.system import processes
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

DEFAULT_CELLS = "blacksheep:aiohttp,node-ws:aiohttp,aiohttp:websockets,node-ws:node-ws,bun:bun"
MODES = ("plain", "spinners")
SPIN = "while True: pass"


def start_spinners(work: Path) -> list[processes.ManagedProcess]:
    """One SCHED_IDLE busy loop pinned to each CPU of ours."""
    spinners = []
    for cpu in sorted(os.sched_getaffinity(0)):
        spinners.append(processes.start(f"spinner{cpu}", ["chrt", "--idle", "0", sys.executable, "-c", SPIN], ROOT,
                                        work, cpus={cpu}))
    return spinners


def spread(values: list[float]) -> dict[str, float | None]:
    if len(values) < 2:
        return {"max_over_min": None, "cv": None}
    return {"max_over_min": max(values) / min(values), "cv": statistics.stdev(values) / statistics.fmean(values)}


def main() -> int:
    args = parse_arguments(__doc__.splitlines()[0], DEFAULT_CELLS)
    implementations = implementations_by_role()
    settings = matrix_settings()
    rates: dict[str, dict[tuple[str, str], dict[int, float]]] = {mode: {} for mode in MODES}
    generator = random.Random(args.seed)
    with stop_signals_raise_interrupt(), tempfile.TemporaryDirectory(prefix="pingpong-spinners-") as work:
        for round_number in range(1, args.rounds + 1):
            modes = list(MODES)
            generator.shuffle(modes)
            for mode in modes:
                spinners = start_spinners(Path(work)) if mode == "spinners" else []
                try:
                    cells = list(args.cell_pairs)
                    generator.shuffle(cells)
                    for server, client in cells:
                        attempt = run_attempt(implementations[("server", server)],
                                              implementations[("client", client)], settings, round_number, ROOT)
                        if attempt.ok:
                            rates[mode].setdefault((server, client), {})[round_number] = attempt.roundtrips_per_s
                        else:
                            print(f"{server} × {client} {mode}: {attempt.status}: {attempt.reason}", file=sys.stderr)
                finally:
                    with processes.interrupts_deferred():
                        for spinner in spinners:
                            processes.stop(spinner, grace_s=1)
            print(f"round {round_number}/{args.rounds} done", file=sys.stderr, flush=True)
    report = {"rounds": args.rounds, "seed": args.seed, "cells": []}
    for server, client in args.cell_pairs:
        plain = rates["plain"].get((server, client), {})
        spun = rates["spinners"].get((server, client), {})
        ratio = paired_ratio(spun, plain)
        cell = {"server": server, "client": client, "plain": plain, "spinners": spun,
                "plain_spread": spread(list(plain.values())), "spinners_spread": spread(list(spun.values())),
                "spinners_over_plain": asdict(ratio)}
        report["cells"].append(cell)
        print(f"{server} × {client}: plain max/min {cell['plain_spread']['max_over_min']:.2f} "
              f"cv {cell['plain_spread']['cv']:.1%}; spinners max/min {cell['spinners_spread']['max_over_min']:.2f} "
              f"cv {cell['spinners_spread']['cv']:.1%}; spinners/plain {ratio.value:.2f} "
              f"[{ratio.low:.2f}–{ratio.high:.2f}]", file=sys.stderr)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
