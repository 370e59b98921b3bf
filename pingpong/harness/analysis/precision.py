"""How many of a run's cells reached the precision it was measured against, and what the rest would take: pure.

A run gives every cell the same rounds (measure/rounds.py); --precision is the target it reports against: the
share of cells whose median's interval lies within ±target of the median (the goal: 90%), and, from the spread each
cell showed, about how many rounds would take 90% of them there. The interval at n rounds is the one stats.py takes
(its ranks at n); each end is expected near the quantile (k − 0.375) / (n + 0.25) of the cell's rates (Blom's
position of the k-th of n), read from the cell's own values by interpolating between them at the same positions,
so a slow mode counts as it showed; n is the fewest rounds whose larger half-width is within the target. It is
"about": a handful of values give a rough shape.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from pingpong.harness.analysis.stats import RATE_DISTURBED_SIDE, order_statistic_ranks, summarize
from pingpong.harness.results.records import RunResult

GOAL_SHARE = 0.90  # of the cells with an interval, the share that should be within the target
MOST_ROUNDS = 400  # beyond this the estimate says "more than"


@dataclass(frozen=True)
class PrecisionReach:
    """The run's cells against its precision target (JSON "precision_reach")."""

    target: float  # 0.03 for ±3%
    cells: int  # cells with an interval (2 or more good rounds)
    within: int  # of those, the ones whose interval's half-width is within the target
    rounds: int  # the rounds the run gave its cells (the most any cell had)
    rounds_for_goal: int | None  # about how many rounds would take GOAL_SHARE of the cells within the target
    seconds_per_round: float | None  # this run's pace, measuring time over rounds

    @property
    def share(self) -> float:
        return self.within / self.cells if self.cells else 0.0

    @property
    def goal_met(self) -> bool:
        return self.cells > 0 and self.share >= GOAL_SHARE

    def sentence(self) -> str:
        """One line for the report: the count, and what reaching the goal would take when it was not reached."""
        text = (f"{self.within} of {self.cells} cells within ±{self.target:.0%} ({self.share:.0%}; "
                f"the goal is {GOAL_SHARE:.0%}) after {self.rounds} rounds")
        if self.goal_met or self.rounds_for_goal is None:
            return text + ("" if not self.goal_met else ": goal met")
        rounds = (f"about {self.rounds_for_goal}" if self.rounds_for_goal <= MOST_ROUNDS
                  else f"more than {MOST_ROUNDS}")
        text += f"; at the spread they showed, {GOAL_SHARE:.0%} would be within at {rounds} rounds"
        if self.seconds_per_round:
            minutes = self.rounds_for_goal * self.seconds_per_round / 60
            text += (f" ({'over ' if self.rounds_for_goal > MOST_ROUNDS else ''}~{minutes:.0f} min of --budget at "
                     f"this run's {self.seconds_per_round:.0f} s a round)")
        return text


def blom_position(rank: int, count: int) -> float:
    """Where the rank-th of count sorted values is expected, as a quantile."""
    return (rank - 0.375) / (count + 0.25)


def quantile(ordered: list[float], probability: float) -> float:
    """The values' quantile, interpolated between them at their Blom positions; the end values beyond them."""
    positions = [blom_position(rank, len(ordered)) for rank in range(1, len(ordered) + 1)]
    if probability <= positions[0]:
        return ordered[0]
    for index in range(1, len(ordered)):
        if probability <= positions[index]:
            share = (probability - positions[index - 1]) / (positions[index] - positions[index - 1])
            return ordered[index - 1] + share * (ordered[index] - ordered[index - 1])
    return ordered[-1]


def expected_precision(values: list[float], n: int) -> float:
    """The larger half-width, over the median, that the median's interval of n rounds is expected to have if the
    rounds fall as these values did."""
    ordered = sorted(values)
    return _expected_precision(ordered, statistics.median(ordered), n)


def _expected_precision(ordered: list[float], median: float, n: int) -> float:
    """expected_precision of values already sorted, with their median."""
    low_rank, high_rank, _ = order_statistic_ranks(n, disturbed_side=RATE_DISTURBED_SIDE)
    low = quantile(ordered, blom_position(low_rank, n))
    high = quantile(ordered, blom_position(n - high_rank + 1, n))
    return max(median - low, high - median) / median


def rounds_needed(values: list[float], target: float, most: int = MOST_ROUNDS) -> int | None:
    """About how many rounds, more than these values, the median's interval needs to be within ±target: None with
    fewer than 3 values, `most` + 1 when not even `most` would do."""
    if len(values) < 3 or statistics.median(values) <= 0:
        return None
    ordered = sorted(values)
    median = statistics.median(ordered)
    for n in range(len(values) + 1, most + 1):
        if _expected_precision(ordered, median, n) <= target:
            return n
    return most + 1


def precision_reach(run: RunResult, raw: bool = False) -> PrecisionReach | None:
    """The run's cells against its --precision; None for a run without one (--repeat) or without rounds. raw: of
    the raw rates (Attempt.raw_rate) instead of the rates at the reference pace."""
    rounds_record = run.configuration.get("rounds") or {}
    target = rounds_record.get("precision")
    if target is None:
        return None
    measured = [rates for cell in run.cells if not cell.skipped and len(rates := cell_rates(cell, raw)) >= 2]
    if not measured:
        return None
    reached = [summarize(rates, RATE_DISTURBED_SIDE).precision <= target for rates in measured]
    rounds = max(len({attempt.repeat for attempt in cell.attempts}) for cell in run.cells if cell.attempts)
    needed = sorted(len(rates) if within else rounds_needed(rates, target) or len(rates) + 1
                    for rates, within in zip(measured, reached))
    at_goal = needed[min(len(needed) - 1, math.ceil(GOAL_SHARE * len(needed)) - 1)]
    outcome = run.rounds_outcome
    pace = outcome.measuring_s / rounds if outcome and outcome.measuring_s and rounds else None
    return PrecisionReach(target=target, cells=len(measured), within=sum(reached), rounds=rounds,
                          rounds_for_goal=at_goal, seconds_per_round=pace)


def cell_rates(cell, raw: bool = False) -> list[float]:
    """A cell's rates over its good attempts: at the reference pace where measured (the headline), or raw."""
    return [attempt.raw_rate for attempt in cell.attempts if attempt.ok] if raw else cell.rates()


def median_cv(run: RunResult, raw: bool = False) -> float | None:
    """The median over the cells (2 or more good rounds) of the CV of their rounds' rates."""
    spreads = [statistics.stdev(rates) / statistics.fmean(rates) for cell in run.cells
               if not cell.skipped and len(rates := cell_rates(cell, raw)) >= 2]
    return statistics.median(spreads) if spreads else None


@dataclass(frozen=True)
class PacedPrecision:
    """The same run's precision at the reference pace and raw, side by side (the host's pace in the window)."""

    paced: PrecisionReach
    raw: PrecisionReach
    paced_median_cv: float | None
    raw_median_cv: float | None

    def sentence(self) -> str:
        def cv(value: float | None) -> str:
            return "" if value is None else f", median CV of a cell's rounds {100 * value:.1f}%"
        return (f"at the reference pace {self.paced.within} of {self.paced.cells} cells within "
                f"±{self.paced.target:.0%}{cv(self.paced_median_cv)}; raw {self.raw.within} of {self.raw.cells}"
                f"{cv(self.raw_median_cv)}")


def paced_precision(run: RunResult) -> PacedPrecision | None:
    """Both precisions of a run whose windows had the host's pace in them; None otherwise."""
    if not any(attempt.paced for cell in run.cells for attempt in cell.attempts):
        return None
    paced, raw = precision_reach(run), precision_reach(run, raw=True)
    if paced is None or raw is None:
        return None
    return PacedPrecision(paced, raw, median_cv(run), median_cv(run, raw=True))
