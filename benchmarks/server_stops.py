"""How cleanly does each server stop? Start it, relay a short real client run, stop it with SIGTERM; repeat.

Each stop is counted clean when the server exits 0 or by the stop signal, as the contract asks. Unclean stops
keep the last lines of the server's stderr (one example per distinct last line). Prints one JSON object on stdout
(with each stop's seconds); a line per server on stderr.
Usage: python -m benchmarks.server_stops [--servers sanic] [--stops 40] [--client websockets] [--workers 1]
       [--right-away] [--busy-loops 0]

--right-away stops the server as soon as it is ready (every worker has said it serves), with no client run: the
moment a stop is likeliest to meet a server still starting. --busy-loops K runs K processes spinning meanwhile, the
load of tests three at a time on 2 CPUs. A stop that takes over processes.STOP_GRACE_S is ended by SIGKILL and
counted unclean. Example: `--servers sanic-workers --workers 2 --right-away --busy-loops 3 --stops 60`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.measure import probe
from pingpong.harness.measure.server import launch_server, start_server, stop_server, wait_for_workers
from pingpong.harness.settings.cell import CellSettings, cpus_for
from pingpong.harness.settings.manifest import load_manifest
from pingpong.harness.system import host_sentinel, processes
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = CellSettings(duration_s=0.3, warmup_s=0.1, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=True)


def timed_stop(started) -> tuple[int | None, float]:
    """(exit code, seconds): SIGTERM, then SIGKILL after processes.STOP_GRACE_S, as a run stops its servers."""
    began = time.monotonic()
    with processes.interrupts_deferred():
        code = stop_server(started)
    return code, time.monotonic() - began


def stop_once(server, client, work_dir: Path, settings: CellSettings = SETTINGS,
              right_away: bool = False) -> tuple[int | None, float, str, str | None]:
    """(exit code, seconds the stop took, stderr tail, problem): one start, one verified client run (or none, right
    away: as soon as every worker has said it serves), one SIGTERM."""
    server_cpus, _ = cpus_for(settings)
    problem = None
    started = (launch_server if right_away else start_server)(server, settings, ROOT, work_dir, server_cpus)
    try:
        if right_away:
            probe.wait_until_ready(started.base_url, started.process, settings.ready_timeout_s)
            if started.worker_stats_dir is not None:
                problem = wait_for_workers(started, settings.ready_timeout_s)
        else:
            attempt = run_attempt_on(started, client, settings, 1, ROOT)
            if not attempt.ok:
                problem = f"{attempt.status}: {attempt.reason}"
    except probe.NotReady as exc:
        problem = f"not ready: {exc}"
    finally:
        code, took = timed_stop(started)
    return code, took, started.process.stderr_tail(6), problem


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="sanic", help="comma-separated server names (default sanic)")
    parser.add_argument("--client", default="websockets")
    parser.add_argument("--stops", type=int, default=40, help="starts and stops per server (default 40)")
    parser.add_argument("--workers", type=int, default=1, help="--workers of the servers (default 1)")
    parser.add_argument("--right-away", action="store_true", help="stop each as soon as it is ready, no client run")
    parser.add_argument("--busy-loops", type=int, default=0, help="processes spinning meanwhile (default 0)")
    args = parser.parse_args()
    if args.stops < 1 or args.workers < 1 or args.busy_loops < 0:
        parser.error("--stops and --workers must be at least 1, --busy-loops at least 0")
    settings = replace(SETTINGS, workers=args.workers)
    implementations = {(i.role, i.name): i for i in load_manifest(ROOT / "manifest.toml")}
    unknown = [f"server {name}" for name in args.servers.split(",") if ("server", name) not in implementations]
    unknown += [f"client {args.client}"] if ("client", args.client) not in implementations else []
    if unknown:
        parser.error(f"not in manifest.toml: {', '.join(unknown)}")
    single = [name for name in args.servers.split(",") if "workers" not in implementations[("server", name)].features]
    if args.workers > 1 and single:
        parser.error(f"--workers {args.workers}: {', '.join(single)} serve(s) in one process (no workers feature)")
    client = implementations[("client", args.client)]
    report = {"stops_per_server": args.stops, "client": None if args.right_away else args.client,
              "workers": args.workers, "right_away": args.right_away, "busy_loops": args.busy_loops,
              "stop_grace_s": processes.STOP_GRACE_S, "servers": {}}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy_loops)]
    try:
        with stop_signals_raise_interrupt():
            measure_stops(args, settings, implementations, client, report)
    finally:
        host_sentinel.close_all()  # the sentinels of the client runs' paced windows
        for loop in busy:
            loop.kill()
            loop.wait()
    print(json.dumps(report, indent=1))
    return 0


def measure_stops(args, settings: CellSettings, implementations, client, report: dict) -> None:
    """Start and stop each server of --servers args.stops times; its figures into report["servers"]."""
    for name in args.servers.split(","):
        server = implementations[("server", name)]
        exit_codes: dict[str, int] = {}
        examples: dict[str, str] = {}
        problems, seconds = [], []
        for index in range(args.stops):
            with tempfile.TemporaryDirectory(prefix="pingpong-stops-") as work:
                code, took, stderr_tail, problem = stop_once(server, client, Path(work), settings,
                                                             args.right_away)
            seconds.append(round(took, 3))
            exit_codes[str(code)] = exit_codes.get(str(code), 0) + 1
            if problem:
                problems.append(problem)
            if code not in processes.CLEAN_EXIT_CODES:
                last_line = (stderr_tail.splitlines() or [""])[-1]
                examples.setdefault(last_line, stderr_tail)
        unclean = sum(count for code, count in exit_codes.items()
                      if code == "None" or int(code) not in processes.CLEAN_EXIT_CODES)
        report["servers"][name] = {"stops": args.stops, "unclean": unclean, "exit_codes": exit_codes,
                                   "stop_s": {"median": statistics.median(seconds), "max": max(seconds),
                                              "each": seconds},
                                   "unclean_examples": list(examples.values()), "failed_runs": problems}
        print(f"{name}: {unclean} unclean stops of {args.stops} (exit codes {exit_codes}; stops took "
              f"{statistics.median(seconds):.2f} s at the median, {max(seconds):.2f} s at most)", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
