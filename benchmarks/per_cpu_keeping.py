"""Whether each server keeps its rate per server CPU at N = 2 within 10% of N = 1 (issue 40), over several runs.

    python -m benchmarks.per_cpu_keeping [--runs 3] [--repeat 5] [--servers workers,cpp-websocketpp]
                                         [--clients node-ws,go-gorilla] [--results-dir results]
    python -m benchmarks.per_cpu_keeping --from A-sweep.json B-sweep.json ...

Runs, --runs times one after another, the weak-scaling sweep by room of docs/workloads.md ("Every core"): --workers
1,2 --room-placement room --placement same-cpu --load-per-worker --pairs 4 --client-processes 1 --duration 1, each
run's rounds measuring both points (its log and tables on stderr, its files under --results-dir), each run after the
host sentinel has timed both CPUs for half a second (recorded: the host's pace moves by the hour); with --from, reads
sweeps already made. Prints JSON on stdout: per cell, each run's median of the per-round ratios of the rate per
server CPU at N = 2 over N = 1 (paired within the round) with its interval, and every run's rounds pooled, with the
interval of the pooled median and whether it keeps 0.9 (pingpong/harness/analysis/per_cpu.py); the table on stderr.

Why several runs: one run of 5 rounds says how the ratio stood in that run's conditions, and this host's state moves
from one run to the next (docs/methodology.md, "The host's two speeds")."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

from pingpong.harness.analysis.per_cpu import KEPT_AT_LEAST, keeping, render_keeping
from pingpong.harness.commands.cli import main as run_bench
from pingpong.harness.commands.scaling import sweep_runs
from pingpong.harness.settings.environment import suite_commit
from pingpong.harness.settings.usage import UsageError
from pingpong.harness.system.host_sentinel import SENTINEL, SLICE_ROUNDTRIPS, WARMING_ROUNDTRIPS, Sentinel

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ["--workers", "1,2", "--room-placement", "room", "--placement", "same-cpu", "--load-per-worker",
         "--pairs", "4", "--client-processes", "1", "--duration", "1", "--no-figures"]
FORMAT_VERSION = 1


HOST_SLICES = 40  # of SLICE_ROUNDTRIPS each: about half a second a CPU


def host_level() -> dict[str, dict[str, float]] | str:
    """The host's pace on each CPU just before a run: the host sentinel's ns per roundtrip (median and 10th
    percentile of HOST_SLICES slices), nothing else of ours running; or why it could not be read."""
    if not SENTINEL.exists():
        return f"{SENTINEL.name} is not built (sh native/build.sh)"
    found = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        sentinel = Sentinel(cpu)
        try:
            sentinel.slice_ns(WARMING_ROUNDTRIPS)
            slices = sorted(sentinel.slice_ns(SLICE_ROUNDTRIPS) for _ in range(HOST_SLICES))
        except OSError as problem:
            return f"the host sentinel failed on CPU {cpu}: {problem}"
        finally:
            sentinel.close()
        found[f"cpu{cpu}"] = {"median_ns": round(statistics.median(slices), 1),
                              "q10_ns": round(slices[len(slices) // 10], 1)}
    return found


def measure(args: argparse.Namespace, hosts: list) -> list[Path] | int:
    """Runs the sweep args.runs times, each after reading the host's pace (appended to hosts); the sweeps' indexes,
    or the exit code that stopped them (2 bad input, 130 interrupted: nothing is analysed then; a failed cell, exit
    1, is data like any other)."""
    made = []
    for number in range(1, args.runs + 1):
        hosts.append(host_level())
        before = set(args.results_dir.glob("*-sweep.json"))
        argv = ["run", "--servers", args.servers, "--clients", args.clients, "--repeat", str(args.repeat),
                "--results-dir", str(args.results_dir), *SWEEP]
        print(f"per_cpu_keeping: run {number} of {args.runs}: run_bench.py {' '.join(argv)}", file=sys.stderr,
              flush=True)
        with contextlib.redirect_stdout(sys.stderr):  # the run's tables go to the log: stdout is this JSON's
            code = run_bench(argv)
        if code not in (0, 1):
            return code
        new = sorted(set(args.results_dir.glob("*-sweep.json")) - before)
        if len(new) != 1:
            print(f"per_cpu_keeping: run {number} wrote {len(new)} sweep indexes in {args.results_dir}, not one",
                  file=sys.stderr)
            return 1
        made.append(new[0])
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of the sweep, one after another (default 3)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of each run (default 5)")
    parser.add_argument("--servers", default="workers,cpp-websocketpp", help="as run_bench.py's (default "
                        "workers,cpp-websocketpp: every server that can be placed by room)")
    parser.add_argument("--clients", default="node-ws,go-gorilla", help="as run_bench.py's (default "
                        "node-ws,go-gorilla)")
    parser.add_argument("--results-dir", type=Path, default=ROOT / "results", help="where the runs' files go")
    parser.add_argument("--from", dest="sweeps", type=Path, nargs="+", metavar="SWEEP.json",
                        help="analyse these sweeps' indexes instead of measuring")
    args = parser.parse_args()
    if args.runs < 1 or args.repeat < 1:
        print("per_cpu_keeping: --runs and --repeat must be at least 1", file=sys.stderr)
        return 2
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    hosts: list = []
    sweeps = args.sweeps or measure(args, hosts)
    if isinstance(sweeps, int):
        return sweeps
    try:
        points = [sweep_runs([path])[0] for path in sweeps]
        found = keeping(points)
    except (UsageError, ValueError) as problem:
        print(f"per_cpu_keeping: {problem}", file=sys.stderr)
        return 2
    sources = [str(path) for path in sweeps]
    print(render_keeping(found, sources), file=sys.stderr)
    commit, modified = suite_commit(ROOT)
    print(json.dumps({"format_version": FORMAT_VERSION, "kind": "per-cpu-keeping", "started_at": started_at,
                      "suite_commit": commit, "suite_modified": modified, "measured": not args.sweeps,
                      "sweeps": sources, "host_before_each_run": hosts, "kept_at_least": KEPT_AT_LEAST,
                      "cells": [entry.to_json() for entry in found]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
