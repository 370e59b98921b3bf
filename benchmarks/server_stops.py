"""How cleanly does each server stop? Start it, relay a short real client run, stop it with SIGTERM; repeat.

Each stop is counted clean when the server exits 0 or by the stop signal, as the contract asks. Unclean stops
keep the last lines of the server's stderr (one example per distinct last line). Prints one JSON object on stdout;
a line per server on stderr.
Usage: python -m benchmarks.server_stops [--servers sanic] [--stops 40] [--client websockets]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.measure.server import start_server
from pingpong.harness.settings.cell import CellSettings, cpus_for
from pingpong.harness.settings.manifest import load_manifest
from pingpong.harness.system import processes
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = CellSettings(duration_s=0.3, warmup_s=0.1, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=True)


def stop_once(server, client, work_dir: Path) -> tuple[int | None, str, str | None]:
    """(exit code, stderr tail, problem): one start, one verified client run, one SIGTERM."""
    server_cpus, _ = cpus_for(SETTINGS)
    started = start_server(server, SETTINGS, ROOT, work_dir, server_cpus)
    problem = None
    try:
        attempt = run_attempt_on(started, client, SETTINGS, 1, ROOT)
        if not attempt.ok:
            problem = f"{attempt.status}: {attempt.reason}"
    finally:
        code = processes.stop(started.process)
    return code, started.process.stderr_tail(6), problem


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="sanic", help="comma-separated server names (default sanic)")
    parser.add_argument("--client", default="websockets")
    parser.add_argument("--stops", type=int, default=40, help="starts and stops per server (default 40)")
    args = parser.parse_args()
    implementations = {(i.role, i.name): i for i in load_manifest(ROOT / "manifest.toml")}
    client = implementations[("client", args.client)]
    report = {"stops_per_server": args.stops, "client": args.client, "servers": {}}
    with stop_signals_raise_interrupt():
        for name in args.servers.split(","):
            server = implementations[("server", name)]
            exit_codes: dict[str, int] = {}
            examples: dict[str, str] = {}
            problems = []
            for index in range(args.stops):
                with tempfile.TemporaryDirectory(prefix="pingpong-stops-") as work:
                    code, stderr_tail, problem = stop_once(server, client, Path(work))
                exit_codes[str(code)] = exit_codes.get(str(code), 0) + 1
                if problem:
                    problems.append(problem)
                if code not in processes.CLEAN_EXIT_CODES:
                    last_line = (stderr_tail.splitlines() or [""])[-1]
                    examples.setdefault(last_line, stderr_tail)
            unclean = sum(count for code, count in exit_codes.items()
                          if code == "None" or int(code) not in processes.CLEAN_EXIT_CODES)
            report["servers"][name] = {"stops": args.stops, "unclean": unclean, "exit_codes": exit_codes,
                                       "unclean_examples": list(examples.values()), "failed_runs": problems}
            print(f"{name}: {unclean} unclean stops of {args.stops} (exit codes {exit_codes})", file=sys.stderr)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
