"""Did the host's CPU pace move the rates? Pure functions of a run's attempts and their CPUs' pace (cpu_pace_ns).

Files from before the in-window pace (2026-11-27; analysis/host_pace.py) only: each attempt there recorded the pace
of its CPUs right after its window, ns of CPU per iteration of a fixed loop (a loop since retired). If a
cell's slow attempts are those whose CPUs ran slow, the spread between its rounds is the host's, not the library's.
Per cell with at least MIN_ATTEMPTS paced attempts: the correlation between its roundtrip time (1e6 / rate) and the
pace, and the rounds' CV of the roundtrip time before and after dividing it by the pace (the spread the pace
accounts for). The run's figure: the pace's own CV over all its attempts, and the medians over the cells.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from pingpong.harness.results.records import Attempt, RunResult

MIN_ATTEMPTS = 4


def attempt_pace(attempt: Attempt) -> float | None:
    """The mean pace of the attempt's CPUs, ns per iteration; None when not read (files from before it)."""
    values = list((attempt.cpu_pace_ns or {}).values())
    return statistics.fmean(values) if values else None


def _cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)


@dataclass(frozen=True)
class PaceFigures:
    """The run's: how much its CPUs' pace moved between attempts, and how much of the cells' spread moved with it."""

    attempts: int  # paced attempts
    pace_median_ns: float
    pace_cv: float  # over all the run's paced attempts
    cells: int  # cells with at least MIN_ATTEMPTS paced attempts
    median_correlation: float  # of a cell's roundtrip time with its attempts' pace, median over the cells
    median_cv: float  # of a cell's roundtrip time over its rounds, median over the cells
    median_cv_per_pace: float  # the same for roundtrip time / pace

    def sentence(self) -> str:
        return (f"the measured CPUs' pace (a fixed loop after each window) was {self.pace_median_ns:.0f} ns per "
                f"iteration with a CV of {100 * self.pace_cv:.1f}% over {self.attempts} attempts; a cell's roundtrip "
                f"time moved with it (median correlation {self.median_correlation:+.2f} over {self.cells} cells), "
                f"and divided by it the rounds' median CV is {100 * self.median_cv_per_pace:.1f}% instead of "
                f"{100 * self.median_cv:.1f}%")


def pace_figures(run: RunResult) -> PaceFigures | None:
    """The run's pace figures; None when fewer than two cells have enough paced attempts."""
    paces, correlations, spreads, spreads_per_pace = [], [], [], []
    for cell in run.cells:
        paced = [(1e6 / a.roundtrips_per_s, pace) for a in cell.attempts
                 if a.ok and a.roundtrips_per_s and (pace := attempt_pace(a)) is not None]
        paces += [pace for _, pace in paced]
        if len(paced) < MIN_ATTEMPTS:
            continue
        times, cell_paces = [t for t, _ in paced], [p for _, p in paced]
        if len(set(times)) < 2 or len(set(cell_paces)) < 2:
            continue
        correlations.append(statistics.correlation(times, cell_paces))
        spreads.append(_cv(times))
        spreads_per_pace.append(_cv([t / p for t, p in paced]))
    if len(correlations) < 2:
        return None
    return PaceFigures(attempts=len(paces), pace_median_ns=statistics.median(paces), pace_cv=_cv(paces),
                       cells=len(correlations), median_correlation=statistics.median(correlations),
                       median_cv=statistics.median(spreads), median_cv_per_pace=statistics.median(spreads_per_pace))
