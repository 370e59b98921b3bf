"""Is a client process fast or slow for its whole life, and what sets its mode: glibc malloc's state, hash seed, layout?

The default matrix's widest cells were bimodal: their rounds fell in a fast or a slow mode, and it was one side's
CPU per roundtrip that moved (by 1.6-1.8x for the aiohttp client) while the other side's stayed. This runs many
fresh client processes of one Python client against one long-lived server (a JavaScript one by default, so that
only the client is Python), interleaved in shuffled order, under the conditions asked for:
- "as-is": PINGPONG_MALLOC=as-is, glibc malloc left as the process finds it (what the matrix did before --malloc);
- "settled": PINGPONG_MALLOC=settled, its mmap threshold raised before measuring (the matrix's default now);
- "seeds": as-is with PYTHONHASHSEED=1..--seeds, each seed --repeats times: if the mode follows the seed, repeats of
  a seed agree;
- "no-aslr": as-is, the client started under `setarch -R` (address randomization off).
Per process it records the rate, the client's and the server's CPU and minor page faults per roundtrip; per
condition it prints them, and how many processes took a page fault or more per roundtrip (the slow mode). For the
seeds, how much of the spread lies between seeds (between-seed variance over the total).

Prints one JSON object on stdout; a summary on stderr.
Usage: python -m benchmarks.process_modes [--server node-ws] [--client aiohttp] [--conditions as-is,settled]
                                          [--processes 12] [--seeds 6] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from benchmarks.rounds_setup import ROOT, implementations_by_role, matrix_settings
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.measure.server import start_server
from pingpong.harness.settings.cell import cpus_for
from pingpong.harness.system import processes
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt


def between_share(groups: dict[str, list[float]]) -> float | None:
    """Between-group variance over total variance (pure): 1 when groups differ and repeats agree, ~0 when not."""
    values = [value for group in groups.values() for value in group]
    if len(values) < 3 or len(groups) < 2:
        return None
    mean = statistics.fmean(values)
    total = sum((value - mean) ** 2 for value in values)
    between = sum(len(group) * (statistics.fmean(group) - mean) ** 2 for group in groups.values())
    return between / total if total else None


def per_roundtrip(attempt) -> dict[str, float]:
    roundtrips = attempt.roundtrips_per_s * attempt.window_wall_s  # the roundtrips of the sampled window
    return {"rate": attempt.roundtrips_per_s,
            "client_us_per_roundtrip": attempt.client_cpu_s / roundtrips * 1e6,
            "server_us_per_roundtrip": attempt.server_cpu_s / roundtrips * 1e6,
            "client_faults_per_roundtrip": attempt.client_minor_faults / roundtrips,
            "server_faults_per_roundtrip": attempt.server_minor_faults / roundtrips}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="node-ws")
    parser.add_argument("--client", default="aiohttp")
    parser.add_argument("--conditions", default="as-is,settled", help="comma-separated: as-is, settled, seeds, no-aslr")
    parser.add_argument("--processes", type=int, default=12, help="fresh client processes per condition")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--order-seed", type=int, default=1)
    args = parser.parse_args()
    conditions = [name.strip() for name in args.conditions.split(",")]
    unknown = set(conditions) - {"as-is", "settled", "seeds", "no-aslr"}
    if unknown:
        parser.error(f"unknown condition(s): {', '.join(sorted(unknown))}")
    implementations = implementations_by_role()
    server = implementations[("server", args.server)]
    client = implementations[("client", args.client)]
    no_aslr = replace(client, command=("setarch", platform.machine(), "-R", *client.command))
    settings = matrix_settings()
    server_cpus, _ = cpus_for(settings)
    jobs = []  # (condition, hash seed or None, implementation, malloc mode)
    for condition in conditions:
        if condition == "seeds":
            jobs += [(f"seed {seed}", str(seed), client, "as-is") for seed in range(1, args.seeds + 1)
                     for _ in range(args.repeats)]
        else:
            jobs += [(condition, None, no_aslr if condition == "no-aslr" else client,
                      "settled" if condition == "settled" else "as-is")] * args.processes
    random.Random(args.order_seed).shuffle(jobs)
    results: dict[str, list[dict[str, float]]] = {}
    with stop_signals_raise_interrupt(), tempfile.TemporaryDirectory(prefix="pingpong-process-modes-") as work:
        started = start_server(server, settings, ROOT, Path(work), server_cpus)
        try:
            for number, (condition, hash_seed, implementation, malloc) in enumerate(jobs, 1):
                if hash_seed is None:
                    os.environ.pop("PYTHONHASHSEED", None)
                else:
                    os.environ["PYTHONHASHSEED"] = hash_seed
                attempt = run_attempt_on(started, implementation, replace(settings, malloc=malloc), number, ROOT)
                if not attempt.ok:
                    print(f"{condition}: {attempt.status}: {attempt.reason}", file=sys.stderr)
                    continue
                results.setdefault(condition, []).append(per_roundtrip(attempt))
        finally:
            os.environ.pop("PYTHONHASHSEED", None)
            with processes.interrupts_deferred():
                processes.stop(started.process)
    seeds = {name: [r["client_us_per_roundtrip"] for r in runs] for name, runs in results.items()
             if name.startswith("seed")}
    report = {"server": args.server, "client": args.client,
              "settings": {"duration_s": settings.duration_s, "warmup_s": settings.warmup_s},
              "conditions": results, "slow_processes": {name: sum(r["client_faults_per_roundtrip"] >= 1 for r in runs)
                                                        for name, runs in results.items()},
              "between_seed_share_of_client_cpu_variance": between_share(seeds)}
    for name, runs in sorted(results.items()):
        cpu = sorted(round(r["client_us_per_roundtrip"], 1) for r in runs)
        rates = sorted(round(r["rate"]) for r in runs)
        print(f"{name}: {report['slow_processes'][name]} of {len(runs)} processes with >= 1 page fault per "
              f"roundtrip; client µs/roundtrip {cpu}; rates {rates}", file=sys.stderr)
    if seeds:
        print(f"between-seed share of the client CPU's variance: "
              f"{report['between_seed_share_of_client_cpu_variance']}", file=sys.stderr)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
