"""How long a process that starts beside running ping-pong pairs waits for the CPU, in its own session or not.

    python -m benchmarks.newcomer_wait [--pairs 0,2] [--newcomers 16]

For each count of pairs, it starts that many node-ws servers, each with a well-behaved pair playing ping-pong in a
process of its own (the load of `run_bench.py abuse`, or of two tests run side by side), then starts newcomers one
by one: `python -c "import websockets.sync.client"`, about 0.1 s of CPU. They alternate between this script's
session and a session of their own, as `pingpong.harness.system.processes.start` started every server, client and
rogue until 2026-11-26 (start_new_session: with the kernel's autogroup on, a session is a scheduling group of its own;
now a process group in the orchestrator's session, docs/methodology.md, "Sessions"). It prints
JSON: each newcomer's wall time per placement, their median and max, and how many took over 1 s.

Why: with the tests on two pytest-xdist workers, two abuse tests side by side had rogues that did not finish in
15 s, and a rogue sampled 4 s after its start had run 0.04 s of CPU, preempted 197 times and never asleep (kernel
6.18, 2 vCPUs). Here, in results/reference/2026-11-26-newcomer-wait-2.json.xz, a newcomer took 0.11 s
alone, 0.42-0.47 s (median of 16) beside 2 pairs and 0.80-0.82 s beside 3, 4.8 s at most, its own session or not:
slower by the load, but not the 15 s and more of those rogues, which this benchmark has not reproduced yet.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pingpong.harness.measure import probe
from pingpong.harness.settings.configuration import _integer_list
from pingpong.harness.settings.manifest import load_manifest, resolve_command
from pingpong.harness.system import processes

ROOT = Path(__file__).resolve().parent.parent
NEWCOMER = [sys.executable, "-c", "import websockets.sync.client"]
PAIR_PROCESS = ("import sys, time\nfrom pingpong.harness.commands.abuse import WellBehavedPair\n"
                "with WellBehavedPair(sys.argv[1]) as pair:\n    time.sleep(3600)\n")


def newcomer_wall_s(own_session: bool) -> float:
    started = time.monotonic()
    subprocess.run(NEWCOMER, cwd=ROOT, check=True, start_new_session=own_session, timeout=300)
    return time.monotonic() - started


def summary(walls: list[float]) -> dict:
    return {"wall_s": [round(w, 4) for w in walls], "median_s": round(statistics.median(walls), 4),
            "max_s": round(max(walls), 4), "over_1_s": sum(w > 1 for w in walls)}


def measure(pairs: int, newcomers: int, work: Path) -> dict:
    server = next(i for i in load_manifest(ROOT / "manifest.toml") if i.role == "server" and i.name == "node-ws")
    started: list[processes.ManagedProcess] = []
    try:
        for index in range(pairs):
            port = processes.free_port()
            process = processes.start(f"server-{index}", resolve_command(server, ROOT) + ["--port", str(port)],
                                      ROOT, work)
            started.append(process)
            probe.wait_until_ready(f"ws://127.0.0.1:{port}", process, 20)
            started.append(processes.start(f"pair-{index}", [sys.executable, "-c", PAIR_PROCESS,
                                                             f"ws://127.0.0.1:{port}"], ROOT, work))
        time.sleep(1 if pairs else 0)  # the pairs at their pace
        walls: dict[bool, list[float]] = {False: [], True: []}
        for index in range(newcomers):
            own_session = index % 2 == 1
            walls[own_session].append(newcomer_wall_s(own_session))
            print(f"pairs {pairs}, newcomer {index + 1}/{newcomers} ({'own' if own_session else 'same'} session): "
                  f"{walls[own_session][-1]:.3f} s", file=sys.stderr, flush=True)
        alive = all(p.popen.poll() is None for p in started)
    finally:
        for process in started:
            processes.stop(process)
    return {"pairs": pairs, "load_alive_throughout": alive, "same_session": summary(walls[False]),
            "own_session": summary(walls[True])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", default="0,2", help="comma-separated counts of ping-pong pairs (default 0,2)")
    parser.add_argument("--newcomers", type=int, default=16, help="newcomers per count of pairs, half in their own "
                                                                  "session (default 16)")
    args = parser.parse_args()
    problems: list[str] = []
    counts = _integer_list("--pairs", args.pairs, 0, problems)
    if problems:
        print(f"newcomer_wait: {problems[0]}", file=sys.stderr)
        return 2
    if args.newcomers < 2:
        print(f"newcomer_wait: --newcomers must be at least 2, got {args.newcomers}", file=sys.stderr)
        return 2
    autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled")
    with tempfile.TemporaryDirectory(prefix="pingpong-newcomer-") as work:
        points = [measure(pairs, args.newcomers, Path(work)) for pairs in counts]
    print(json.dumps({"kernel": Path("/proc/sys/kernel/osrelease").read_text().strip(),
                      "autogroup": autogroup.read_text().strip() if autogroup.exists() else None,
                      "newcomer": NEWCOMER[1:], "points": points}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
