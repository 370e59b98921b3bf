"""What a server keeps of each CPU as its workers grow: the rate per server CPU (roundtrips per second of the server's
own CPU time; a broker's not counted) at N over N = 1, paired by round within each run of a --workers sweep, and
pooled over several runs of the same sweep. Pure functions (benchmarks/per_cpu_keeping.py runs the sweeps).

Issue 40's criterion: with placement by room, each server that can use N CPUs keeps its rate per server CPU at N = 2
within 10% of N = 1 (KEPT_AT_LEAST). One run of 5 rounds gives a median whose range covers it 93.75% of the time in
that run's conditions; the host's state moves between runs (docs/methodology.md, "The host's two speeds"), so a
verdict rests on the pooled per-round ratios of several runs, whose order-statistic interval is that of the median of
the ratio over the conditions those runs met, not of any one run's."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pingpong.harness.analysis.stats import Ratio, median_with_interval
from pingpong.harness.analysis.summary import cpu_us_per_roundtrip
from pingpong.harness.results.records import Cell, RunResult

KEPT_AT_LEAST = 0.9  # within 10% of N = 1


@dataclass(frozen=True)
class Keeping:
    """One cell at one N: each run's paired median (with its interval; None for a run without the cell) and every
    run's rounds pooled."""

    server: str
    client: str
    workers: int
    per_run: tuple[Ratio | None, ...]
    pooled: Ratio

    def kept(self) -> bool:
        """The pooled median keeps at least KEPT_AT_LEAST of N = 1's rate per server CPU."""
        return self.pooled.value >= KEPT_AT_LEAST

    def runs_kept(self) -> int:
        return sum(ratio.value >= KEPT_AT_LEAST for ratio in self.measured_runs())

    def measured_runs(self) -> list[Ratio]:
        return [ratio for ratio in self.per_run if ratio is not None]

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, "client": self.client, "workers": self.workers,
                "per_run": [asdict(ratio) if ratio else None for ratio in self.per_run], "pooled": asdict(self.pooled),
                "kept": self.kept(), "runs_kept": self.runs_kept()}


def server_cpu_rates_by_round(cell: Cell) -> dict[int, float]:
    """{repeat: the rate per server CPU} over a cell's good attempts with a CPU reading: roundtrips per second of the
    server's own CPU time, 10⁶ ÷ its CPU µs per roundtrip as every report counts it (the roundtrips of the sampled
    window; a broker's CPU not counted)."""
    rates = {}
    for attempt in cell.attempts:
        us = cpu_us_per_roundtrip(attempt, "server") if attempt.ok else None
        if us:
            rates[attempt.repeat] = 1e6 / us
    return rates


def workers_of(run: RunResult) -> int:
    return int(run.configuration.get("workers") or 1)


def keeping(sweeps: list[list[RunResult]]) -> list[Keeping]:
    """Per cell and N above 1, in the first sweep's order: the rate per server CPU at N over N = 1, paired by round
    within each sweep (its points measured in the same rounds), each sweep's median and all sweeps' rounds pooled.
    A ValueError when a sweep has no point at N = 1, or two points at one N; a cell missing from a sweep, or without
    a round that both of its points measured, adds nothing from that sweep."""
    ratios: dict[tuple[str, str, int], list[list[float] | None]] = {}
    for number, points in enumerate(sweeps):
        by_workers = {workers_of(run): run for run in points}
        if len(by_workers) < len(points):
            raise ValueError("a sweep whose points share a --workers value (another setting swept beside it): "
                             "give a sweep over --workers alone")
        base = by_workers.get(1)
        if base is None:
            raise ValueError(f"a sweep over --workers {sorted(by_workers)} has no point at N = 1 to compare with")
        base_cells = {(cell.server, cell.client): cell for cell in base.cells}
        for workers, run in sorted(by_workers.items()):
            if workers == 1:
                continue
            for cell in run.cells:
                first = base_cells.get((cell.server, cell.client))
                if first is None:
                    continue
                at_n, at_one = server_cpu_rates_by_round(cell), server_cpu_rates_by_round(first)
                rounds = sorted(at_n.keys() & at_one.keys())
                if rounds:
                    ratios.setdefault((cell.server, cell.client, workers), [None] * len(sweeps))[number] = \
                        [at_n[round_] / at_one[round_] for round_ in rounds]
    return [Keeping(server, client, workers, tuple(median_with_interval(run) if run else None for run in runs),
                    median_with_interval([value for run in runs if run for value in run]))
            for (server, client, workers), runs in ratios.items()]


def render_keeping(found: list[Keeping], sources: list[str]) -> str:
    """A Markdown table: per cell, each run's median [its interval] and the pooled one [its interval], and whether
    the pooled median keeps KEPT_AT_LEAST."""
    runs = len(sources)
    lines = [f"Rate per server CPU at N over N = 1 (roundtrips per second of the server's own CPU time), paired by "
             f"round within each run; pooled: every run's rounds together. Kept: the pooled median at least "
             f"{KEPT_AT_LEAST:g}×. Sweeps: " + ", ".join(f"`{source}`" for source in sources), "",
             "| cell | N | " + " | ".join(f"run {number + 1}" for number in range(runs)) + " | pooled | kept |",
             "|---|--:|" + "--:|" * runs + "--:|---|"]
    for entry in found:
        cells = [ratio_text(ratio) if ratio else "—" for ratio in entry.per_run]
        lines.append(f"| {entry.server} × {entry.client} | {entry.workers} | " + " | ".join(cells) +
                     f" | {ratio_text(entry.pooled)}, {entry.pooled.label()} | "
                     f"{'yes' if entry.kept() else 'no'} ({entry.runs_kept()} of {len(entry.measured_runs())} runs) |")
    return "\n".join(lines) + "\n"


def ratio_text(ratio: Ratio) -> str:
    if ratio.low is None or ratio.high is None:
        return f"{ratio.value:.2f}×"
    return f"{ratio.value:.2f}× [{ratio.low:.2f}–{ratio.high:.2f}]"
