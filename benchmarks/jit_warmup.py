"""How long a cold pair takes to reach its steady rate, per interpreter: the evidence for a JIT's warm-up (PyPy).

For each interpreter (--python's names) a fresh server and a fresh client start in that interpreter's cached
environment; the client runs from its first roundtrip (no warm-up) through --windows windows back to back on the
same connections (the driver's --ab-windows, recording on and off in ABBA order). Each window's rate is set against
the time since the first window opened; the plateau is the median of the last third, and the warm-up is the time
after which the running median of 5 windows stays within --band of it. Prints one JSON object on stdout, a summary on
stderr. Usage: python -m benchmarks.jit_warmup [--python 3.11,pypy3] [--pairs websockets:websockets,aiohttp:websockets]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.recording_overhead import run_client
from pingpong.harness.measure import probe
from pingpong.harness.settings import interpreters, package_envs
from pingpong.harness.settings.cell import plan_cpus
from pingpong.harness.settings.manifest import load_manifest, resolve_command
from pingpong.harness.system import processes

ROOT = Path(__file__).resolve().parent.parent


SMOOTHING = 5  # windows in the running median a window's rate is read as: one 0.25 s window moves ±15% here


def settled_after(rates: list[float], duration_s: float, band: float) -> tuple[float, float | None]:
    """(plateau, seconds from the first window until the running median of SMOOTHING windows stays within band of the
    plateau, None when its last does not); pure."""
    plateau = statistics.median(rates[-max(1, len(rates) // 3):])
    smoothed = [statistics.median(rates[max(0, index - SMOOTHING + 1):index + 1]) for index in range(len(rates))]
    inside = [abs(rate / plateau - 1) <= band for rate in smoothed]
    if not inside[-1]:
        return plateau, None
    first_of_last_run = len(inside)
    while first_of_last_run > 0 and inside[first_of_last_run - 1]:
        first_of_last_run -= 1
    return plateau, first_of_last_run * duration_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="3.11,pypy3", help="interpreters, as --python takes them")
    parser.add_argument("--pairs", default="websockets:websockets,aiohttp:websockets",
                        help="SERVER:CLIENT cells, both Python implementations")
    parser.add_argument("--windows", type=int, default=60, help="windows per process (an even number)")
    parser.add_argument("--duration", type=float, default=0.25, help="seconds per window")
    parser.add_argument("--processes", type=int, default=2, help="cold server and client starts per cell")
    parser.add_argument("--band", type=float, default=0.10, help="how close to the plateau a settled window is")
    args = parser.parse_args()
    implementations = {(i.role, i.name): i for i in load_manifest(ROOT / "manifest.toml")}
    server_cpus, client_cpus = plan_cpus(True)
    report = {"window_s": args.duration, "windows": args.windows, "band": args.band, "interpreters": {}}
    for interpreter in interpreters.parse(args.python):
        environment = package_envs.python_environment([], ROOT, interpreter)
        python = environment.executable_or_modules
        cells = report["interpreters"].setdefault(interpreter.asked, {"label": interpreter.label, "cells": {}})
        for cell in args.pairs.split(","):
            server_name, client_name = cell.split(":")
            starts = []
            for _ in range(args.processes):
                with tempfile.TemporaryDirectory() as work:
                    port = processes.free_port()
                    server = processes.start("server", resolve_command(implementations[("server", server_name)],
                                                                       ROOT, python) + ["--port", str(port)],
                                             ROOT, Path(work), cpus=server_cpus)
                    try:
                        probe.wait_until_ready(f"ws://127.0.0.1:{port}", server, 60)
                        command = resolve_command(implementations[("client", client_name)], ROOT, python) + [
                            "--url", f"ws://127.0.0.1:{port}/warmup", "--duration", str(args.duration),
                            "--warmup", "0", "--ab-windows", str(args.windows // 2)]
                        windows = run_client(command, client_cpus)
                    finally:
                        processes.stop(server)
                rates = [window["roundtrips_per_s"] for window in windows]
                plateau, settled_s = settled_after(rates, args.duration, args.band)
                starts.append({"rates": rates, "plateau": plateau, "settled_after_s": settled_s,
                               "first_window_share": rates[0] / plateau})
                print(f"{interpreter.label:<30} {cell:<22} plateau {plateau:,.0f}/s, first window at "
                      f"{rates[0] / plateau:.2f}x of it, within {args.band:.0%} from "
                      f"{'never' if settled_s is None else f'{settled_s:.2f} s'}", file=sys.stderr, flush=True)
            cells["cells"][cell] = starts
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
