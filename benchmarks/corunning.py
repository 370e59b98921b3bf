"""What an independent ping-pong on the other CPU costs one: a copy alone against the same copy beside a second.

    python -m benchmarks.corunning [--server node-ws] [--client node-ws] [--pairs 4] [--duration 3] [--rounds 5]

A copy is a server from the manifest and a client with --pairs P, both pinned to one CPU: copy A on our last CPU,
copy B on the one before. Each round runs A alone and A beside B (the order alternates by round), each time with
fresh processes, and reads the server's CPU time (every thread of its process tree, /proc) over the client's run
(no warmup, so the run is the window) and the roundtrips the client reports. It prints JSON: per round A's server CPU µs per roundtrip and roundtrips/s,
alone and beside B, and the per-round ratio of A's rate per server CPU beside B over alone (paired by round),
its median with its order-statistic interval (the coverage it really has) and its range.

Why: with --placement same-cpu by worker, a --workers 2 server is two copies of the one-worker attempt side by side,
one per CPU, and node-ws-cluster's CPU per roundtrip rose 17.5 -> 19.0 µs from N = 1 to 2, its clients' alike,
with no broker traffic (docs/workloads.md, "Same CPU by worker"). If a copy beside another pays the same here with
no worker, no primary and no broker, that share is the host's (shared caches, memory bandwidth, the hypervisor).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import psutil

from pingpong.harness.analysis.stats import interval_label, median_interval
from pingpong.harness.measure import probe
from pingpong.harness.settings.environment import suite_commit
from benchmarks.rounds_setup import implementations_by_role
from pingpong.harness.settings.manifest import resolve_command
from pingpong.harness.system import processes
from pingpong.harness.system.listeners import process_tree

ROOT = Path(__file__).resolve().parent.parent


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of every process of pid's tree (every thread of each)."""
    total = 0.0
    for member in process_tree(pid):
        try:
            times = psutil.Process(member).cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def implementation(role: str, name: str):
    found = implementations_by_role().get((role, name))
    if found is None:
        raise SystemExit(f"corunning: unknown {role} {name!r} (see run_bench.py --list)")
    return found


def run_copies(cpus: list[int], server, client, pairs: int, duration_s: float, work: Path,
               server_env: dict[str, str] | None = None) -> list[dict]:
    """One copy per CPU of cpus (A on the first), their clients started one after the other, the last copy's first;
    each copy's server CPU µs per roundtrip and roundtrips/s. server_env: variables added to the servers'."""
    started: list[processes.ManagedProcess] = []
    try:
        servers = []
        for cpu in cpus:
            port = processes.free_port()
            process = processes.start(f"server-{cpu}", resolve_command(server, ROOT) + ["--port", str(port)], ROOT,
                                      work, env={**os.environ, **(server_env or {})}, cpus={cpu})
            started.append(process)
            probe.wait_until_ready(f"ws://127.0.0.1:{port}", process, 20)
            servers.append((process, port))
        before = [tree_cpu_s(process.pid) for process, _ in servers]
        clients = []  # B's client first: A's then never runs while B's loads (only its last ms may run alone)
        for (_, port), cpu in reversed(list(zip(servers, cpus))):
            argv = resolve_command(client, ROOT) + ["--url", f"ws://127.0.0.1:{port}/corunning-{cpu}", "--duration",
                                                    f"{duration_s:g}", "--warmup", "0", "--pairs", str(pairs)]
            clients.append(processes.start(f"client-{cpu}", argv, ROOT, work, cpus={cpu}))
            started.append(clients[-1])
        for process in clients:
            process.popen.wait(timeout=duration_s + 60)
        copies = []
        clients.reverse()  # in the order of cpus again
        for (server_process, _), cpu_before, process in zip(servers, before, clients):
            used_s = tree_cpu_s(server_process.pid) - cpu_before
            report = json.loads(process.stdout_text().strip().splitlines()[-1])
            roundtrips = report["roundtrips"]
            copies.append({"server_cpu_us_per_roundtrip": round(used_s * 1e6 / roundtrips, 2),
                           "roundtrips_per_s": round(roundtrips / report.get("elapsed_s", duration_s), 1)})
        return copies
    finally:
        for process in started:
            processes.stop(process)


def add_copy_options(parser: argparse.ArgumentParser, rounds: int, rounds_help: str) -> None:
    """--pairs, --duration and --rounds, as every benchmark built on run_copies takes them."""
    parser.add_argument("--pairs", type=int, default=4, help="pairs of each copy's client (default 4)")
    parser.add_argument("--duration", type=float, default=3.0,
                        help="seconds each client runs (default 3; no warmup: the server's CPU is read around "
                             "the whole client run, which is its window)")
    parser.add_argument("--rounds", type=int, default=rounds, help=f"rounds, {rounds_help} (default {rounds})")


def copy_options_refused(args: argparse.Namespace, program: str) -> bool:
    """True (said on stderr in one line) when --pairs, --rounds or --duration is out of range."""
    if args.pairs < 1 or args.rounds < 1 or not args.duration > 0:
        print(f"{program}: --pairs and --rounds must be at least 1, --duration > 0", file=sys.stderr)
        return True
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="node-ws", help="a server of the manifest (default node-ws)")
    parser.add_argument("--client", default="node-ws", help="a client of the manifest (default node-ws)")
    add_copy_options(parser, 5, "each A alone and A beside B")
    args = parser.parse_args()
    if copy_options_refused(args, "corunning"):
        return 2
    ours = sorted(os.sched_getaffinity(0))
    if len(ours) < 2:
        print("corunning: needs two CPUs of ours", file=sys.stderr)
        return 2
    server, client = implementation("server", args.server), implementation("client", args.client)
    rounds = []
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="pingpong-corunning-") as work:
        for number in range(1, args.rounds + 1):
            order = ("alone", "beside") if number % 2 else ("beside", "alone")
            measured = {}
            for kind in order:
                cpus = [ours[-1]] if kind == "alone" else [ours[-1], ours[-2]]
                measured[kind] = run_copies(cpus, server, client, args.pairs, args.duration, Path(work))
            ratio = (measured["alone"][0]["server_cpu_us_per_roundtrip"]
                     / measured["beside"][0]["server_cpu_us_per_roundtrip"])
            rounds.append({"round": number, "order": list(order), "alone": measured["alone"][0],
                           "beside": measured["beside"][0], "other_copy": measured["beside"][1],
                           "rate_per_cpu_beside_over_alone": round(ratio, 3)})
            print(f"round {number}: A alone {measured['alone'][0]}, beside B {measured['beside'][0]}",
                  file=sys.stderr, flush=True)
    ratios = sorted(r["rate_per_cpu_beside_over_alone"] for r in rounds)
    interval = median_interval(ratios)
    commit, modified = suite_commit(ROOT)
    print(json.dumps({"started_at": started_at, "suite_commit": commit, "suite_modified": modified,
                      "server": args.server, "client": args.client, "pairs": args.pairs, "duration_s": args.duration,
                      "cpus": {"copy_a": ours[-1], "copy_b": ours[-2]},
                      "kernel": Path("/proc/sys/kernel/osrelease").read_text().strip(), "rounds": rounds,
                      "rate_per_cpu_beside_over_alone": {
                          "median": statistics.median(ratios), "min": ratios[0], "max": ratios[-1],
                          "rounds": len(ratios),
                          "interval": ({"low": interval.low, "high": interval.high, "coverage": interval.coverage,
                                        "label": interval_label(interval.kind, interval.coverage, interval.n,
                                                                ranks=interval.ranks)} if interval else None)}},
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
