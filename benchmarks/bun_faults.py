"""Where Bun's page faults come from: a Bun pair alone in one process, on one CPU, second by second.

The default run judged Bun's sides "not settled" on page faults in 11 to 15 cells of 58 (2026-11-28). This runs a
Bun client and server in one process (benchmarks/bun_faults.js), so nothing of the suite's drivers is in it, in
three modes: "tcp", a TCP echo (Bun.listen, Bun.connect); "tcp-view", the same with one view of each chunk the
client receives (chunk.subarray, as node/raw_tcp.js made of every chunk before 2026-11-29); "websocket", Bun.serve
and Bun's WebSocket client echoing a 4-byte text. Each mode also with a busy wait per message (--busy, µs), the cost
a slower host or a slower peer adds: a cost per message keeps its faults per roundtrip, one paid per second takes
more of each roundtrip as the rate falls. Beside them, the run's cost of a fault (system/page_faults.py), read
before each process. Prints one JSON object on stdout; a line per process on stderr.
Usage: python -m benchmarks.bun_faults [--seconds 5] [--busy 0,20,100] [--modes tcp,tcp-view,websocket] [--cpu 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from pingpong.harness.settings.manifest import runtime_executable
from pingpong.harness.system.page_faults import fault_cost

ROOT = Path(__file__).resolve().parent.parent
MODES = ("tcp", "tcp-view", "websocket")


def steady(seconds: list[dict]) -> dict:
    """The seconds after the first (the heap still grows in it): medians of rate, faults per second and per
    roundtrip; pure."""
    rest = seconds[1:] or seconds
    return {"roundtrips_per_s": statistics.median(s["roundtrips_per_s"] for s in rest),
            "faults_per_s": statistics.median(s["faults"] for s in rest),
            "faults_per_roundtrip": statistics.median(s["faults_per_roundtrip"] for s in rest)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--busy", default="0,20,100", help="busy µs per message, a comma list")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--cpu", type=int, default=1, help="the CPU the process runs on")
    args = parser.parse_args()
    modes = [mode for mode in args.modes.split(",") if mode]
    unknown = [mode for mode in modes if mode not in MODES]
    try:
        busy = [float(value) for value in args.busy.split(",") if value]
    except ValueError:
        busy = []
    problem = (f"unknown modes: {', '.join(unknown)} (modes: {', '.join(MODES)})" if unknown
               else "--seconds must be at least 2" if args.seconds < 2
               else f"--busy takes µs as numbers, got {args.busy!r}" if not busy or min(busy) < 0 else None)
    if problem:
        print(f"bun_faults: {problem}", file=sys.stderr)
        return 2
    bun = runtime_executable("bun", ROOT)
    processes = []
    for mode in modes:
        for busy_us in busy:
            fault = fault_cost()
            completed = subprocess.run(["taskset", "-c", str(args.cpu), bun, str(ROOT / "benchmarks" / "bun_faults.js"),
                                        mode, str(args.seconds), f"{busy_us:g}"],
                                       capture_output=True, text=True, timeout=args.seconds + 30)
            if completed.returncode != 0:
                print(f"bun_faults: {mode} busy {busy_us:g} µs failed: {completed.stderr.strip()[-300:]}",
                      file=sys.stderr)
                return 1
            seconds = [json.loads(line) for line in completed.stdout.splitlines() if line.strip()]
            summary = steady(seconds)
            share = summary["faults_per_s"] * fault["us_per_fault"] / 1e6 if fault["us_per_fault"] else None
            processes.append({"mode": mode, "busy_us": busy_us, "page_fault": fault, "seconds": seconds,
                              "steady": summary, "fault_time_share": share})
            print(f"{mode:9} busy {busy_us:5g} µs: {summary['roundtrips_per_s']:8,.0f} roundtrips/s, "
                  f"{summary['faults_per_s']:6,.0f} faults/s, {summary['faults_per_roundtrip']:.4f} per roundtrip, "
                  f"{share:.2%} of the time at {fault['us_per_fault']} µs a fault", file=sys.stderr)
    json.dump({"cpu": args.cpu, "seconds": args.seconds, "processes": processes}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
