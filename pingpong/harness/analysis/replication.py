"""Several runs of the same settings combined, the run as the unit of replication: pure functions.

Within one run, a cell's interval comes from its rounds, which share the run's hour of the host: it does not hold
the variation from one run to the next. Across runs, each run gives one value per cell, the median of its rounds
(the run median); the cell's figure is the median of its run medians, and its interval is their order-statistic
interval (stats.median_interval): with few runs their range, whose real coverage is stated (2 runs: 50%, 3: 75%,
5: 93.75%). Two sets of runs compare by the two-sample interval of the factor between them (stats.ratio_of_runs).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from pingpong.harness.analysis.precision import cell_rates
from pingpong.harness.analysis.stats import MedianInterval, interval_label, median_interval
from pingpong.harness.results.records import RunResult, recorded_setting

# The settings that shape a cell's figures: runs combine only when these are equal (compare shows those that differ
# between its two sides). What does not shape them may differ: start times, the rounds' order seed and budget, the
# manifests' paths, the CPUs chosen.
SETTING_KEYS = ("workload", "duration_s", "warmup_s", "repeat", "loop", "compression", "payload_size",
                "payload_kind", "pairs", "client_processes", "tls", "pinned", "python_packages", "node_packages",
                "receivers", "idle_connections", "rate", "malloc", "jit_warmup_s", "warmup_helpers", "young_generation",
                "server_warmup_s", "client_compression", "force_nodelay", "placement", "room_placement",
                "load_per_worker", "python")
WITHIN_ONE_RUN = "within one run"


def across_runs(count: int) -> str:
    """How an interval over run medians is named: 'across 3 runs'."""
    return f"across {count} run{'s' if count != 1 else ''}"


@dataclass(frozen=True)
class ReplicatedCell:
    """One server × client pair over several runs: one median per run, their median and its interval."""

    server: str
    client: str
    run_medians: tuple[float | None, ...]  # per run, in the runs' order; None: not measured in that run (or failed)
    median: float  # the median of the run medians it has
    interval: MedianInterval | None  # order-statistic interval of the run medians; None with fewer than 2 of them

    @property
    def runs(self) -> int:
        """How many runs measured the cell."""
        return sum(value is not None for value in self.run_medians)

    def measured(self) -> list[float]:
        return [value for value in self.run_medians if value is not None]

    def interval_label(self) -> str:
        interval = self.interval
        if interval is None:
            return interval_label(None, None, self.runs)
        return interval_label(interval.kind, interval.coverage, interval.n, ranks=interval.ranks)


@dataclass(frozen=True)
class Replication:
    """Runs of the same settings combined cell by cell."""

    sources: tuple[str, ...]  # the runs' names (their files), in order
    started_at: tuple[str, ...]
    cells: tuple[ReplicatedCell, ...]  # every cell measured in at least one run, in the order the runs met them

    @property
    def scope(self) -> str:
        return across_runs(len(self.sources))

    def cell(self, server: str, client: str) -> ReplicatedCell | None:
        return next((c for c in self.cells if (c.server, c.client) == (server, client)), None)


def run_medians(run: RunResult) -> dict[tuple[str, str], float]:
    """Per cell with at least one good repeat: the median of its rates in this run."""
    return {(cell.server, cell.client): statistics.median(cell.rates()) for cell in run.cells if cell.rates()}


def settings_of(run: RunResult) -> dict[str, Any]:
    return {key: recorded_setting(run, key) for key in SETTING_KEYS}


def first_setting_difference(runs: list[RunResult], names: list[str]) -> str | None:
    """One line naming the first setting in which a run differs from the first one, or None when all agree."""
    reference = settings_of(runs[0])
    for run, name in zip(runs[1:], names[1:]):
        for key, value in settings_of(run).items():
            if value != reference[key]:
                return (f"{names[0]} and {name} differ in {key} ({reference[key]!r} vs {value!r}): combine runs of "
                        "the same settings")
    return None


def combine(runs: list[RunResult], names: list[str]) -> Replication:
    """The runs cell by cell: each cell's run medians, their median and its order-statistic interval."""
    per_run = [run_medians(run) for run in runs]
    keys: list[tuple[str, str]] = []
    for run in runs:
        keys += [(c.server, c.client) for c in run.cells if (c.server, c.client) not in keys]
    cells = []
    for key in keys:
        values = tuple(medians.get(key) for medians in per_run)
        measured = [value for value in values if value is not None]
        if not measured:
            continue
        cells.append(ReplicatedCell(server=key[0], client=key[1], run_medians=values,
                                    median=statistics.median(measured), interval=median_interval(measured)))
    return Replication(sources=tuple(names), started_at=tuple(run.started_at for run in runs), cells=tuple(cells))


def to_json_dict(replication: Replication) -> dict[str, Any]:
    """The combined view as JSON: the runs, and per cell its run medians, median and interval with its label."""
    return {"format_version": REPLICATION_FORMAT_VERSION, "interval_scope": replication.scope,
            "runs": [{"source": source, "started_at": started}
                     for source, started in zip(replication.sources, replication.started_at)],
            "cells": [{"server": c.server, "client": c.client, "run_medians": list(c.run_medians),
                       "runs": c.runs, "median": c.median,
                       "interval": None if c.interval is None else {
                           "low": c.interval.low, "high": c.interval.high, "coverage": c.interval.coverage,
                           "kind": c.interval.kind, "label": c.interval_label()}}
                      for c in replication.cells]}


REPLICATION_FORMAT_VERSION = 1  # of report's JSON for several runs


def raw_run_medians(run: RunResult) -> dict[tuple[str, str], float]:
    """Each measured cell's median of its raw rates (Attempt.raw_rate: a paced window's pauses left out)."""
    return {(cell.server, cell.client): statistics.median(rates) for cell in run.cells
            if (rates := cell_rates(cell, raw=True))}


@dataclass(frozen=True)
class Agreement:
    """How far apart runs made at different hours put the same cells: per cell, each run's median against the
    median of the run medians (JSON "agreement")."""

    runs: int
    cells: int  # measured in every run
    within: int  # cells whose every run median is within ±tolerance of their median
    tolerance: float
    median_spread: float  # over the cells, the standard deviation of the run medians over their mean
    per_cell: dict[str, list[float]]  # "server × client": each run's median over the median of the run medians

    def sentence(self, what: str) -> str:
        return (f"{what}: {self.within} of {self.cells} cells ({self.within / self.cells:.0%}) have every one of "
                f"{self.runs} runs within ±{self.tolerance:.0%} of their median; a cell's run medians "
                f"{100 * self.median_spread:.1f}% apart (median SD)") if self.cells else f"{what}: no cell in every run"


def agreement(medians_per_run: list[dict[tuple[str, str], float]], tolerance: float = 0.05,
              cells: set[tuple[str, str]] | None = None) -> Agreement:
    """The runs' agreement over the cells every run measured (or those of `cells` among them)."""
    common = set.intersection(*(set(medians) for medians in medians_per_run)) if medians_per_run else set()
    if cells is not None:
        common &= cells
    per_cell, spreads, within = {}, [], 0
    for key in sorted(common):
        values = [medians[key] for medians in medians_per_run]
        middle = statistics.median(values)
        per_cell[f"{key[0]} × {key[1]}"] = [round(value / middle, 4) for value in values]
        within += all(abs(value / middle - 1) <= tolerance for value in values)
        if len(values) > 1:
            spreads.append(statistics.stdev(values) / statistics.fmean(values))
    return Agreement(runs=len(medians_per_run), cells=len(common), within=within, tolerance=tolerance,
                     median_spread=statistics.median(spreads) if spreads else 0.0, per_cell=per_cell)
