"""How often a run's intervals cover the true median: the engine's own rule, simulated.

The engine (measure/engine.py measure_rounds, with its planning code) runs as it does in a run, on a fake clock and
a fake measurer: every attempt takes 1 s and every server start 0.5 s of the fake clock, and an attempt's rate is
drawn from a known distribution, so each cell's true median is known. A unimodal one (1.00 ± 2%) and a bimodal one
(70% at 1.00 ± 2%, 30% at 0.75 ± 3%: a cell with a slow mode, as this host gives). The budget holds about 9 rounds of
every cell, what the default 290 s allows here. For every simulated cell: the interval the run reports, the coverage
its label states, and whether it holds the true median. Two sets: all cells, and the cells "declared" precise (the
interval within ±3% of the median, as a report counts them).

Self-contained on purpose (it imports only pingpong.*): run with PYTHONPATH set to an older checkout's root, it
simulates that checkout's engine, e.g. the rule before the current one:
    git worktree add /tmp/old-engine bbe0306 && PYTHONPATH=/tmp/old-engine python benchmarks/round_rule_coverage.py
Prints one JSON object on stdout (per distribution: cells, stated and observed coverage, for all and for the
declared cells, and how many rounds the cells got; then, without the engine, the coverage among the cells whose
interval came out within ±3%: normals of four spreads, the two-mode cell, and a cell declared on a pilot of 4
rounds whose interval comes from the other 6); a table on stderr.
Usage: python -m benchmarks.round_rule_coverage [--runs 300] [--seed 1]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import statistics
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pingpong.harness.analysis.stats import RATE_DISTURBED_SIDE, summarize
from pingpong.harness.measure import engine
from pingpong.harness.results.files import ResultPaths
from pingpong.harness.results.records import Attempt, Cell, RunResult
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.configuration import RunConfiguration
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.settings.round_policy import RoundPolicy

BASE_RATE = 1000.0
ATTEMPT_S, SERVER_START_S = 1.0, 0.5
SERVERS, CLIENTS = 4, 8  # 32 cells: a round costs 32 + 4 x 0.5 = 34 s of the fake clock
BUDGET_S = 310.0  # 9 rounds of every cell (306 s), as the default budget gives a default run here
PRECISION = 0.03


@dataclass(frozen=True)
class Distribution:
    """Relative rates: a mix of normal modes (weight, mean, sd); its true median is found on its CDF."""

    name: str
    modes: tuple[tuple[float, float, float], ...]

    def draw(self, generator: random.Random) -> float:
        pick, total = generator.random(), 0.0
        for weight, mean, sd in self.modes:
            total += weight
            if pick < total:
                return generator.gauss(mean, sd)
        return generator.gauss(*self.modes[-1][1:])

    def median(self) -> float:
        modes = [(weight, statistics.NormalDist(mean, sd)) for weight, mean, sd in self.modes]
        low, high = 0.0, 2.0
        for _ in range(100):
            middle = (low + high) / 2
            if sum(weight * normal.cdf(middle) for weight, normal in modes) < 0.5:
                low = middle
            else:
                high = middle
        return (low + high) / 2


UNIMODAL = Distribution("unimodal", ((1.0, 1.0, 0.02),))
BIMODAL = Distribution("bimodal", ((0.7, 1.0, 0.02), (0.3, 0.75, 0.0225)))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeServer:
    name: str
    pid: int
    problem: object = None
    runtime: str | None = "python"

    def alive(self) -> bool:
        return True

    def exit_code(self) -> None:
        return None

    def stderr_tail(self) -> str:
        return ""


@dataclass
class DrawingMeasurer:
    """A Measurer (measure/measurer.py) whose attempts draw their rates from a distribution, on a fake clock."""

    clock: FakeClock
    draw: Callable[[], float]
    starts: int = field(default=0)

    def start(self, server, settings, work_dir, upcoming=None):
        self.clock.now += SERVER_START_S
        self.starts += 1
        return FakeServer(server.name, 1000 + self.starts)

    def attempt_on(self, started, client, settings, round_number):
        self.clock.now += ATTEMPT_S
        rate = BASE_RATE * self.draw()
        return Attempt(repeat=round_number, status="ok", reason=None, started_at="t", roundtrips=int(rate),
                       elapsed_s=1.0, roundtrips_per_s=rate, server_pid=started.pid)

    def stop(self, started):
        return 0

    def fresh_attempt(self, server, client, settings, round_number):
        return self.attempt_on(self.start(server, settings, None), client, settings, round_number)


class QuietProgress:
    def __init__(self, total, estimate_s):
        self.total = total

    def extend(self, attempts):
        self.total += attempts

    def before(self, cell, round_number):
        pass

    def after(self, cell, attempt):
        pass

    def finish(self):
        pass


SETTINGS = CellSettings(duration_s=1, warmup_s=0, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=1, stall_timeout_s=1, pin=False)
POINT = {"loop": "auto", "compression": "default", "tls": False, "payload_size": 4, "payload_kind": "text-ascii",
         "pairs": 1}


def implementation(role: str, name: str) -> Implementation:
    return Implementation(name=name, role=role, runtime="python", protocol="websocket", command=("{python}",),
                          requires=(), loops=("auto",), compression=("default",))


def simulated_run(distribution: Distribution, seed: int, work: Path, budget_s: float = BUDGET_S,
                  min_rounds: int = 6, max_rounds: int = 20) -> RunResult:
    """One run of the engine over SERVERS x CLIENTS cells whose rates come from the distribution."""
    servers = [implementation("server", f"s{index}") for index in range(SERVERS)]
    clients = [implementation("client", f"c{index}") for index in range(CLIENTS)]
    policy = RoundPolicy(min_rounds=min_rounds, max_rounds=max_rounds, precision=PRECISION, budget_s=budget_s,
                         seed=seed)
    configuration = RunConfiguration(
        settings=SETTINGS, points=(POINT,), rounds=policy, servers=tuple(servers), clients=tuple(clients),
        implementations=(), manifests=(), python_packages=None, node_packages=None, package_environments={},
        results_dir=work, output_format="md", resume=None, command_line=())
    run = RunResult(started_at="2026-01-01T00:00:00+00:00", command_line=[], environment={},
                    configuration=configuration.recorded(SETTINGS), implementations={},
                    cells=[Cell(s.name, c.name) for s in servers for c in clients])
    clock = FakeClock()
    generator = random.Random(seed)
    measurer = DrawingMeasurer(clock, lambda: distribution.draw(generator))
    engine.measure_rounds(configuration, [run], [ResultPaths.for_run(work, run.started_at)], measurer,
                          QuietProgress, clock)
    return run


@dataclass
class Coverage:
    cells: int = 0
    stated: float = 0.0  # sum of the stated coverages
    covered: int = 0

    def add(self, stated: float, covered: bool) -> None:
        self.cells += 1
        self.stated += stated
        self.covered += covered

    def recorded(self) -> dict:
        return {"cells": self.cells,
                "stated": round(self.stated / self.cells, 4) if self.cells else None,
                "observed": round(self.covered / self.cells, 4) if self.cells else None}


def simulate(distribution: Distribution, runs: int, seed: int = 1, **run_options) -> dict:
    """Coverage of every cell's interval, stated and observed, over `runs` simulated runs; and of the declared."""
    true_median = BASE_RATE * distribution.median()
    every, declared, rounds = Coverage(), Coverage(), Counter()
    saved = engine.save, engine.save_record
    engine.save = engine.save_record = lambda *arguments, **keywords: None  # the files are not what is simulated
    try:
        with tempfile.TemporaryDirectory(prefix="pingpong-coverage-") as work, \
                contextlib.redirect_stderr(io.StringIO()):
            for number in range(runs):
                run = simulated_run(distribution, seed * 100_003 + number, Path(work), **run_options)
                for cell in run.cells:
                    summary = summarize(cell.rates(), RATE_DISTURBED_SIDE)
                    covered = summary.interval_low <= true_median <= summary.interval_high
                    rounds[summary.n] += 1
                    every.add(summary.interval_coverage, covered)
                    if summary.precision <= PRECISION:
                        declared.add(summary.interval_coverage, covered)
    finally:
        engine.save, engine.save_record = saved
    return {"distribution": distribution.name, "modes": distribution.modes, "true_median": true_median,
            "runs": runs, "all": every.recorded(), "declared": declared.recorded(),
            "rounds": dict(sorted(rounds.items()))}


def narrow_coverage(distribution: Distribution, rounds: int, samples: int, seed: int, pilot: int = 0) -> dict:
    """Without the engine: of `samples` cells of `rounds` values, the share whose interval holds the true median,
    overall and among those within ±PRECISION. pilot > 0: a cell is declared on its first `pilot` values' interval
    and its interval reported from the others (values no decision looked at)."""
    generator = random.Random(seed)
    true_median = distribution.median()
    every, declared = Coverage(), Coverage()
    reported_narrow = 0
    for _ in range(samples):
        values = [distribution.draw(generator) for _ in range(rounds)]
        reported = summarize(values[pilot:], RATE_DISTURBED_SIDE)
        judged = summarize(values[:pilot], RATE_DISTURBED_SIDE) if pilot else reported
        covered = reported.interval_low <= true_median <= reported.interval_high
        every.add(reported.interval_coverage, covered)
        if judged.precision <= PRECISION:
            declared.add(reported.interval_coverage, covered)
            reported_narrow += reported.precision <= PRECISION
    return {"distribution": distribution.name, "modes": distribution.modes, "rounds": rounds, "pilot": pilot,
            "all": every.recorded(), "declared": declared.recorded(),
            "declared_and_reported_within": round(reported_narrow / declared.cells, 4) if declared.cells else None}


def conditional_figures(samples: int, seed: int) -> list[dict]:
    """Coverage among the cells that come out within ±3%, by the spread of a normal, for a cell with two modes, and
    for a cell declared on a pilot of 4 rounds and reported on the other 6."""
    normals = [Distribution(f"normal ± {spread:.1%}", ((1.0, 1.0, spread),)) for spread in (0.01, 0.015, 0.02, 0.03)]
    figures = [narrow_coverage(distribution, 9, samples, seed) for distribution in normals + [BIMODAL]]
    figures.append(narrow_coverage(BIMODAL, 10, samples, seed, pilot=4))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="simulated runs per distribution (32 cells each)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--samples", type=int, default=100_000,
                        help="cells drawn for the figures without the engine (coverage among the narrow ones)")
    arguments = parser.parse_args()
    found = {"engine": str(Path(engine.__file__).resolve()), "cells_per_run": SERVERS * CLIENTS,
             "budget_s": BUDGET_S, "precision": PRECISION, "distributions": []}
    for distribution in (UNIMODAL, BIMODAL):
        result = simulate(distribution, arguments.runs, arguments.seed)
        found["distributions"].append(result)
        for subset in ("all", "declared"):
            figures = result[subset]
            print(f"{distribution.name:9} {subset:8} cells {figures['cells']:6}  stated {figures['stated']}  "
                  f"observed {figures['observed']}", file=sys.stderr)
        print(f"{distribution.name:9} rounds per cell: {result['rounds']}", file=sys.stderr)
    found["among_narrow"] = conditional_figures(arguments.samples, arguments.seed)
    for figures in found["among_narrow"]:
        print(f"{figures['distribution']:14} {figures['rounds']} rounds pilot {figures['pilot']}: all "
              f"{figures['all']['observed']} (says {figures['all']['stated']}); within ±3% {figures['declared']}",
              file=sys.stderr)
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
