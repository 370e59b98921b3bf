"""Cost of latency recording: the same client against the same server, recording on and off, alternating.

Run-to-run spread on a shared 2-core machine (often +-20% between fresh client processes) would swamp a
few-percent effect, so each client process runs its windows on the same two connections, recording on and off
in ABBA order (the driver's --ab-windows), and the ratio is taken within each process. Prints one JSON object on
stdout (per client: the median ratio on/off and every window's rate); a summary goes to stderr.
Usage: python -m benchmarks.recording_overhead [--processes 3] [--pairs 40] [--duration 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pingpong.harness.analysis.stats import interval_label, median_interval
from pingpong.harness.measure import probe
from pingpong.harness.measure.judge import parse_client_report
from pingpong.harness.settings.cell import plan_cpus
from pingpong.harness.settings.manifest import load_manifest, resolve_command
from pingpong.harness.system import processes

ROOT = Path(__file__).resolve().parent.parent
TARGET_OVERHEAD = 0.03


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="node-ws", help="server to measure against (default: the fastest)")
    parser.add_argument("--clients", default="websockets,aiohttp,node-ws")
    parser.add_argument("--processes", type=int, default=3, help="client processes per client (fresh connections)")
    parser.add_argument("--pairs", type=int, default=40, help="on/off window pairs per process")
    parser.add_argument("--duration", type=float, default=0.2, help="seconds per window")
    parser.add_argument("--warmup", type=float, default=0.5)
    args = parser.parse_args()
    implementations = {(i.role, i.name): i for i in load_manifest(ROOT / "manifest.toml")}
    server_cpus, client_cpus = plan_cpus(True)
    report = {"server": args.server, "processes": args.processes, "pairs": args.pairs,
              "window_duration_s": args.duration, "clients": {}}
    with tempfile.TemporaryDirectory() as work:
        port = processes.free_port()
        server = processes.start("server", resolve_command(implementations[("server", args.server)], ROOT)
                                 + ["--port", str(port)], ROOT, Path(work), cpus=server_cpus)
        try:
            probe.wait_until_ready(f"ws://127.0.0.1:{port}", server, 20)
            for name in args.clients.split(","):
                command = resolve_command(implementations[("client", name)], ROOT) + [
                    "--url", f"ws://127.0.0.1:{port}/overhead", "--duration", str(args.duration),
                    "--warmup", str(args.warmup), "--ab-windows", str(args.pairs)]
                runs = [run_client(command, client_cpus) for _ in range(args.processes)]
                ratios = [ratio for windows in runs for ratio in pair_ratios(windows)]
                median_ratio = statistics.median(ratios)
                interval = median_interval(ratios)
                off_rate = statistics.median(w["roundtrips_per_s"] for ws in runs for w in ws if not w["recording"])
                direct_ns = direct_recording_cost_ns(implementations[("client", name)].runtime)
                direct_share = direct_ns * off_rate / 1e9
                report["clients"][name] = {
                    "ab_median_ratio_on_over_off": median_ratio,
                    "ab_ratio_interval": [interval.low, interval.high], "ab_ratio_interval_coverage": interval.coverage,
                    "ab_window_pairs": len(ratios), "direct_recording_cost_ns_per_roundtrip": direct_ns,
                    "roundtrip_ns_at_median_rate": 1e9 / off_rate, "direct_overhead_share": direct_share,
                    "windows_per_process": runs}
                print(f"{name:<11} client vs {args.server} server: A/B throughput ratio recording on/off "
                      f"{median_ratio:.3f} [{interval.low:.3f}-{interval.high:.3f}, "
                      f"{interval_label(interval.kind, interval.coverage, interval.n)}, {len(ratios)} window pairs]; "
                      f"direct cost {direct_ns:.0f} ns per roundtrip of {1e9 / off_rate / 1e3:.0f} µs "
                      f"= {100 * direct_share:.2f}% (target < {TARGET_OVERHEAD:.0%})", file=sys.stderr)
        finally:
            processes.stop(server)
    print(json.dumps(report, indent=1))
    return 0


def run_client(command: list[str], cpus: set[int] | None) -> list[dict]:
    """One client process: its A/B windows as the driver reported them."""
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=pin)
    report, problem = parse_client_report(completed.stdout)
    if problem or report.get("error"):
        raise SystemExit(f"recording_overhead: client failed: {problem or report['error']}")
    return report["ab_windows"]


def pair_ratios(windows: list[dict]) -> list[float]:
    """Each adjacent (on, off) pair of windows as one ratio: ABBA order makes every aligned pair mixed."""
    ratios = []
    for first, second in zip(windows[0::2], windows[1::2]):
        on, off = (first, second) if first["recording"] else (second, first)
        ratios.append(on["roundtrips_per_s"] / off["roundtrips_per_s"])
    return ratios


PYTHON_RECORDING = """
import time
from array import array
latencies = array("q"); append = latencies.append; clock = time.monotonic_ns
n = 2_000_000
start = clock(); previous = start
for _ in range(n):
    end = clock(); append(end - previous); previous = end
recording = clock() - start
start = clock(); count = 0
for _ in range(n):
    end = clock(); count += 1
plain = clock() - start
print((recording - plain) / n)
"""

NODE_RECORDING = """
const clock = process.hrtime.bigint; const n = 2000000;
let latencies = []; let start = clock(); let previous = start;
for (let i = 0; i < n; i++) { const end = clock(); latencies.push(Number(end - previous)); previous = end; }
const recording = Number(clock() - start);
start = clock(); let count = 0;
for (let i = 0; i < n; i++) { const end = clock(); count += 1; }
const plain = Number(clock() - start);
console.log((recording - plain) / n);
"""


def direct_recording_cost_ns(runtime: str) -> float:
    """What recording adds to one roundtrip in the driver's loop (clock difference + append), timed in isolation.

    The median of 5 runs of 2 million iterations: a CPU-bound figure, far less noisy than throughput.
    """
    argv = [sys.executable, "-c", PYTHON_RECORDING] if runtime == "python" else ["node", "-e", NODE_RECORDING]
    costs = [float(subprocess.run(argv, capture_output=True, text=True, check=True).stdout) for _ in range(5)]
    return max(0.0, statistics.median(costs))


if __name__ == "__main__":
    sys.exit(main())
