"""Cost of the time budget's readings: the same cell with the scheduling readings on and off, paired by round.

The readings (pingpong/harness/system/scheduling.py: each thread's schedstat and status, each process's stat, at
both edges of the window) run in the orchestrator, not in the processes measured; the start edge's falls inside
the window, where the orchestrator's sampling thread competes for the machine's CPUs. Each round runs one attempt
with the readings on and one with them off (PINGPONG_SCHEDULING_READINGS=off) on the same server, in ABBA order
across rounds. The figures: the per-round rate ratio on/off with its interval; the wall time of the readings
themselves, both sides at both edges of each window (scheduling.sample timed where the window's watcher calls
it); the orchestrator's CPU spent sampling at the window's start (signal_sampling_s), on and off; and one reading
of the server's process tree timed directly, per thread. Prints one JSON object on stdout; a summary goes to
stderr.
Usage: python -m benchmarks.budget_overhead [--server websockets] [--client websockets] [--rounds 6]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from benchmarks.rounds_setup import ROOT, implementations_by_role, matrix_settings
from pingpong.harness.analysis.stats import interval_label, median_interval
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.measure.server import start_server
from pingpong.harness.settings.cell import cpus_for
from pingpong.harness.system import listeners, processes, scheduling

DIRECT_READINGS = 200  # readings of the server's tree timed directly, between the rounds


class TimedReadings:
    """scheduling.sample, timed wherever it is called (the window's watcher calls it through the module): the wall
    time of each reading since the last take()."""

    def __init__(self) -> None:
        self.untimed = scheduling.sample
        self.durations_us: list[float] = []

    def sample(self, pids: list[int]) -> scheduling.SchedulingSample:
        began = time.perf_counter()
        try:
            return self.untimed(pids)
        finally:
            self.durations_us.append((time.perf_counter() - began) * 1e6)

    def take(self) -> list[float]:
        taken, self.durations_us = self.durations_us, []
        return taken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="websockets")
    parser.add_argument("--client", default="websockets")
    parser.add_argument("--rounds", type=int, default=6, help="rounds, each one attempt on and one off")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per attempt's window")
    parser.add_argument("--warmup", type=float, default=0.5)
    args = parser.parse_args()
    implementations = implementations_by_role()
    settings = replace(matrix_settings(), duration_s=args.duration, warmup_s=args.warmup)
    server_cpus, _ = cpus_for(settings)
    rates: dict[str, dict[int, float]] = {"on": {}, "off": {}}
    sampling_ms: dict[str, list[float]] = {"on": [], "off": []}
    direct_us: list[float] = []
    edges_us: list[float] = []  # per attempt with the readings on: both sides at both edges
    threads = 0
    timed = TimedReadings()
    scheduling.sample = timed.sample
    previous = os.environ.get(scheduling.READINGS_ENV)
    with tempfile.TemporaryDirectory(prefix="budget-overhead-") as work:
        started = start_server(implementations[("server", args.server)], settings, ROOT, Path(work), server_cpus)
        try:
            if started.problem:
                raise SystemExit(f"budget_overhead: the server did not start: {started.problem.reason}")
            for round_number in range(1, args.rounds + 1):
                for mode in (("on", "off") if round_number % 2 else ("off", "on")):
                    os.environ[scheduling.READINGS_ENV] = mode
                    attempt = run_attempt_on(started, implementations[("client", args.client)], settings,
                                             round_number, ROOT)
                    if not attempt.ok:
                        raise SystemExit(f"budget_overhead: round {round_number} ({mode}) failed: {attempt.reason}")
                    readings = timed.take()
                    if mode == "on" and len(readings) == 4:  # server and client, at the start and at the end
                        edges_us.append(sum(readings))
                    rates[mode][round_number] = attempt.roundtrips_per_s
                    if attempt.signal_sampling_s is not None:
                        sampling_ms[mode].append(attempt.signal_sampling_s * 1e3)
                tree = listeners.process_tree(started.process.pid)
                reading_us, threads = time_one_reading(timed.untimed, tree)
                direct_us.append(reading_us)
        finally:
            scheduling.sample = timed.untimed
            if previous is None:
                os.environ.pop(scheduling.READINGS_ENV, None)
            else:
                os.environ[scheduling.READINGS_ENV] = previous
            with processes.interrupts_deferred():
                started.discard_waiting()
                processes.stop(started.process)
    ratios = [rates["on"][r] / rates["off"][r] for r in sorted(rates["on"])]
    interval = median_interval(ratios)
    report = {
        "server": args.server, "client": args.client, "rounds": args.rounds, "window_s": args.duration,
        "rate_ratio_on_over_off": statistics.median(ratios),
        "rate_ratio_interval": [interval.low, interval.high] if interval else None,
        "rate_ratio_interval_coverage": interval.coverage if interval else None,
        "rates_by_round": {mode: by_round for mode, by_round in rates.items()},
        # the orchestrator's CPU sampling at the window's start (everything it reads there), on and off
        "start_edge_sampling_ms": {mode: statistics.median(values) for mode, values in sampling_ms.items()},
        # wall time of the readings, both sides at both edges of a window: median over the attempts, and each
        "pair_of_edges_readings_us": statistics.median(edges_us) if edges_us else None,
        "pair_of_edges_readings_us_by_attempt": edges_us,
        "server_tree_reading_us": statistics.median(direct_us), "server_threads": threads,
        "server_tree_reading_us_per_thread": statistics.median(direct_us) / max(threads, 1),
        "roundtrip_us_at_median_rate_off": 1e6 / statistics.median(rates["off"].values()),
    }
    label = interval_label(interval.kind, interval.coverage, interval.n) if interval else "no interval"
    interval_text = f"{interval.low:.3f}-{interval.high:.3f}, {label}" if interval else label
    edges_text = f"{statistics.median(edges_us):.0f} µs" if edges_us else "(not timed)"
    print(f"{args.server} × {args.client}: rate on/off {report['rate_ratio_on_over_off']:.3f} [{interval_text}, "
          f"{len(ratios)} rounds]; a pair of edge readings (both sides) {edges_text} of the orchestrator's wall "
          f"time; one reading of the server's tree "
          f"{report['server_tree_reading_us']:.0f} µs ({threads} thread(s)); a roundtrip "
          f"{report['roundtrip_us_at_median_rate_off']:.0f} µs", file=sys.stderr)
    print(json.dumps(report, indent=1))
    return 0


def time_one_reading(read: Callable[[list[int]], scheduling.SchedulingSample],
                     tree: list[int]) -> tuple[float, int]:
    """The median wall time of one scheduling reading of the tree, µs, over DIRECT_READINGS, and its threads."""
    durations = []
    reading = read(tree)
    for _ in range(DIRECT_READINGS):
        began = time.perf_counter()
        reading = read(tree)
        durations.append((time.perf_counter() - began) * 1e6)
    return statistics.median(durations), len(reading.threads)


if __name__ == "__main__":
    sys.exit(main())
