"""The noise's structure, from one window per fresh client process and many windows per long-lived one: how a cell's
variance splits between levels, whether its slow mode belongs to a process or to a moment, and how many rounds its
median needs for a precision. Pure functions of rates in roundtrips/s (variances on their logs, so a variance of
0.0009 is a spread of about 3%); benchmarks/noise_structure.py measures the rates.

The levels, from the outside in (Kalibera and Jones, "Rigorous benchmarking in reasonable time", 2013):
- **run**: the whole measurement, hours apart (the host's state that day); only other runs can show it;
- **block**: one server process and the minutes it serves (in a matrix run: a round);
- **process**: one client process (whatever it settles into when it starts: its allocator, its JIT, its layout);
- **window**: one 0.2 s window inside a process (the host's moments of seconds, and the reading itself).
A matrix round draws the block, process and window anew for every cell; a run's median averages those only.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

import numpy

from pingpong.harness.analysis.stats import CONFIDENCE, RATE_DISTURBED_SIDE, order_statistic_ranks

SLOW_BELOW = 0.85  # a window is slow when its rate is below this fraction of its cell's median
# fewer slow values than this share of the fresh processes' and of the long-lived windows: no slow mode to place
NO_SLOW_MODE_SHARE = 0.05
# The slow windows' intraclass correlation among long-lived processes (0: a window's mode owes nothing to its
# process; 1: a process's windows are all slow or all fast): at or above PROCESS_ICC the slow mode is a property of
# the process; at or below MOMENT_ICC, of the moment; between them, both.
PROCESS_ICC = 0.6
MOMENT_ICC = 0.25
# The slow windows of the last third of the long-lived processes' lives outnumber those of the first third by this
# share of the windows or more: the slow mode comes with a process's age (it settles into it), not with a moment.
AGE_GAP = 0.25
PROCESS, MOMENT, BOTH, AGE = "process", "moment", "both", "age of the process"
NONE, UNDECIDED = "no slow mode", "undecided"
LEVELS = ("run", "block", "process", "window")
# What to replicate when a level's variance is the largest (Kalibera and Jones: at the level with the largest one).
REMEDIES = {"run": "more runs: more rounds within a run cannot reduce it",
            "block": "more server processes (rounds), not more clients per server",
            "process": "more client processes (rounds), not longer windows",
            "window": "longer windows, or more windows per client process"}


@dataclass(frozen=True)
class Block:
    """One server process's share of a cell, in roundtrips/s: each fresh process's one window, and each long-lived
    process's windows in the order they ran."""

    fresh: tuple[float, ...]
    long_lived: tuple[tuple[float, ...], ...]


def _logs(values: Sequence[float]) -> list[float]:
    return [math.log(value) for value in values if value > 0]


def pooled_variance(groups: Sequence[Sequence[float]]) -> tuple[float | None, int]:
    """The variance within groups, pooled (squared deviations from each group's own mean over the sum of n - 1), and
    its degrees of freedom; None with no group of two values."""
    squares, freedom = 0.0, 0
    for group in groups:
        if len(group) >= 2:
            mean = statistics.fmean(group)
            squares += sum((value - mean) ** 2 for value in group)
            freedom += len(group) - 1
    return (squares / freedom if freedom else None), freedom


def lag_one_correlation(series: Sequence[Sequence[float]]) -> float | None:
    """The correlation of consecutive values within each series (deviations from the series' own mean), pooled
    over the series; None with too few values or no spread."""
    products, squares, couples = 0.0, 0.0, 0
    for values in series:
        if len(values) < 3:
            continue
        mean = statistics.fmean(values)
        deviations = [value - mean for value in values]
        products += sum(a * b for a, b in zip(deviations, deviations[1:]))
        squares += sum(d * d for d in deviations)
        couples += len(values) - 1
    return products / squares if couples >= 2 and squares > 0 else None


@dataclass(frozen=True)
class Components:
    """A cell's variance of log rate split by level; a figure is None when the design cannot tell it."""

    window: float | None  # within a long-lived process, window to window, pooled over the processes
    fresh: float | None  # fresh processes' single windows within a block, pooled over blocks: process + window
    process: float | None  # between client processes: fresh - window, floored at 0
    # the same from the long-lived processes: the variance of their means within a block, less window / windows
    # (it assumes independent windows; a positive lag-one correlation makes it too large)
    process_from_long_lived: float | None
    block: float | None  # between blocks: the variance of the blocks' fresh means, less fresh / fresh per block
    round: float | None  # one fresh attempt on a new server process, as a matrix round draws it: block + fresh
    window_over_fresh: float | None  # window / fresh: near 1, the spread is of moments; near 0, of processes
    window_lag_one_correlation: float | None  # consecutive windows of one process: how long a moment lasts
    # the long-lived processes' mean log rate in the last third of their windows less that in the first third,
    # averaged over them: about 0 when moments come and go; a process that speeds up (a JIT) or slows down with
    # its age shows here (and its trend counts in window)
    age_drift: float | None
    fresh_values: int
    long_lived_processes: int
    long_lived_windows: int
    blocks: int


def components(blocks: Sequence[Block]) -> Components:
    """The variance components of one cell's blocks (see Components)."""
    fresh_by_block = [_logs(block.fresh) for block in blocks]
    long_lived = [_logs(process) for block in blocks for process in block.long_lived]
    window, _ = pooled_variance(long_lived)
    fresh, _ = pooled_variance(fresh_by_block)
    process = max(0.0, fresh - window) if fresh is not None and window is not None else None
    means_by_block = [[statistics.fmean(values) for values in map(_logs, block.long_lived) if values]
                      for block in blocks]
    between_means, _ = pooled_variance(means_by_block)
    lengths = [len(values) for values in long_lived if values]
    process_from_long_lived = (max(0.0, between_means - window * statistics.fmean(1 / n for n in lengths))
                               if between_means is not None and window is not None else None)
    block_means = [statistics.fmean(values) for values in fresh_by_block if values]
    block = None
    if len(block_means) >= 2 and fresh is not None:
        per_block = statistics.harmonic_mean([len(values) for values in fresh_by_block if values])
        block = max(0.0, statistics.variance(block_means) - fresh / per_block)
    round_variance = fresh + (block or 0.0) if fresh is not None else None
    return Components(
        window=window, fresh=fresh, process=process, process_from_long_lived=process_from_long_lived, block=block,
        round=round_variance if block is not None else None,
        window_over_fresh=window / fresh if window is not None and fresh else None,
        window_lag_one_correlation=lag_one_correlation(long_lived),
        age_drift=age_drift(long_lived),
        fresh_values=sum(map(len, fresh_by_block)), long_lived_processes=len(lengths),
        long_lived_windows=sum(lengths), blocks=len(blocks))


def thirds(values: Sequence) -> tuple[Sequence, Sequence]:
    """The first and the last third of a process's windows (none for fewer than 3)."""
    third = len(values) // 3
    return (values[:third], values[-third:]) if third else ((), ())


def age_drift(series: Sequence[Sequence[float]]) -> float | None:
    """The mean, over the series, of the last third's mean less the first third's; None without a series of 3."""
    drifts = [statistics.fmean(late) - statistics.fmean(early)
              for early, late in map(thirds, series) if early]
    return statistics.fmean(drifts) if drifts else None


def run_mean(blocks: Sequence[Block]) -> tuple[float, float] | None:
    """A run's mean log rate (the mean of its blocks' fresh means) and that mean's variance as the run itself
    estimates it (its blocks' spread over their number; with one block, its fresh values' over theirs)."""
    means = [statistics.fmean(values) for values in (_logs(block.fresh) for block in blocks) if values]
    if not means:
        return None
    if len(means) >= 2:
        return statistics.fmean(means), statistics.variance(means) / len(means)
    values = next(values for values in (_logs(block.fresh) for block in blocks) if values)
    return (means[0], statistics.variance(values) / len(values)) if len(values) >= 2 else None


def run_component(runs: Sequence[tuple[float, float]]) -> float | None:
    """Between runs: the variance of the runs' mean log rates less what their own sampling explains (the mean of
    their estimated variances), floored at 0; None for fewer than two runs."""
    if len(runs) < 2:
        return None
    return max(0.0, statistics.variance([mean for mean, _ in runs]) - statistics.fmean(v for _, v in runs))


# -- the slow mode
@dataclass(frozen=True)
class ProcessSlowness:
    """One long-lived process's windows against the cell's slow threshold."""

    windows: int
    slow: int
    switches: int  # slow to fast or fast to slow, between consecutive windows

    @property
    def slow_fraction(self) -> float:
        return self.slow / self.windows if self.windows else 0.0


def process_slowness(rates: Sequence[float], threshold: float) -> ProcessSlowness:
    slow = [rate < threshold for rate in rates]
    return ProcessSlowness(len(slow), sum(slow), sum(a != b for a, b in zip(slow, slow[1:])))


def intraclass_correlation(processes: Sequence[ProcessSlowness]) -> float | None:
    """The slow indicator's intraclass correlation over the processes (one-way ANOVA estimator for unequal group
    sizes); None for fewer than two processes, or when every window is alike."""
    groups = [p for p in processes if p.windows]
    total = sum(p.windows for p in groups)
    if len(groups) < 2 or total <= len(groups):
        return None
    overall = sum(p.slow for p in groups) / total
    between = sum(p.windows * (p.slow_fraction - overall) ** 2 for p in groups) / (len(groups) - 1)
    within = sum(p.windows * p.slow_fraction * (1 - p.slow_fraction) for p in groups) / (total - len(groups))
    size = (total - sum(p.windows ** 2 for p in groups) / total) / (len(groups) - 1)
    denominator = between + (size - 1) * within
    return (between - within) / denominator if denominator > 0 else None


@dataclass(frozen=True)
class SlowMode:
    """Where a cell's slow windows (below SLOW_BELOW x its median) fall: within processes or in whole ones."""

    # roundtrips/s: of the fresh processes' values, as a run's rounds would give it (each process counts once;
    # of the long-lived windows only when no fresh process measured)
    median: float
    threshold: float
    fresh: int
    fresh_slow: int
    long_lived: tuple[ProcessSlowness, ...]
    wholly_slow: int  # long-lived processes with every window slow
    wholly_fast: int
    mixed: int
    early_slow_fraction: float | None  # of the long-lived processes' windows in the first third of their lives
    late_slow_fraction: float | None  # ... in the last third
    intraclass_correlation: float | None
    verdict: str  # PROCESS, MOMENT, BOTH, AGE, NONE or UNDECIDED
    reason: str

    @property
    def long_lived_windows(self) -> int:
        return sum(p.windows for p in self.long_lived)

    @property
    def long_lived_slow(self) -> int:
        return sum(p.slow for p in self.long_lived)


def slow_mode(blocks: Sequence[Block], slow_below: float = SLOW_BELOW) -> SlowMode | None:
    """The slow mode's place (see SlowMode); None for a cell with no value."""
    fresh = [rate for block in blocks for rate in block.fresh]
    series = [process for block in blocks for process in block.long_lived if process]
    if not fresh and not series:
        return None
    median = statistics.median(fresh or [rate for process in series for rate in process])
    threshold = slow_below * median
    processes = tuple(process_slowness(process, threshold) for process in series)
    fresh_slow = sum(rate < threshold for rate in fresh)
    wholly_slow = sum(p.slow == p.windows for p in processes)
    wholly_fast = sum(p.slow == 0 for p in processes)
    mixed = len(processes) - wholly_slow - wholly_fast
    icc = intraclass_correlation(processes)
    parts = [thirds(process) for process in series]
    early = [rate < threshold for first, _ in parts for rate in first]
    late = [rate < threshold for _, last in parts for rate in last]
    early_fraction = statistics.fmean(early) if early else None
    late_fraction = statistics.fmean(late) if late else None
    verdict, reason = _verdict(len(fresh), fresh_slow, processes, wholly_slow, mixed, icc, early_fraction,
                               late_fraction)
    return SlowMode(median, threshold, len(fresh), fresh_slow, processes, wholly_slow, wholly_fast, mixed,
                    early_fraction, late_fraction, icc, verdict, reason)


def _verdict(fresh: int, fresh_slow: int, processes: Sequence[ProcessSlowness], wholly_slow: int, mixed: int,
             icc: float | None, early: float | None, late: float | None) -> tuple[str, str]:
    long_slow, long_windows = sum(p.slow for p in processes), sum(p.windows for p in processes)
    if fresh_slow <= NO_SLOW_MODE_SHARE * fresh and long_slow <= NO_SLOW_MODE_SHARE * long_windows:
        return NONE, (f"{fresh_slow} of {fresh} fresh processes and {long_slow} of {long_windows} long-lived "
                      f"windows slow")
    if early is not None and late - early >= AGE_GAP:
        return AGE, (f"slow: {early:.0%} of the long-lived windows in the first third of their processes, "
                     f"{late:.0%} in the last third; {fresh_slow} of {fresh} fresh processes")
    if icc is not None:
        where = (f"slow windows' intraclass correlation {icc:.2f} over {len(processes)} long-lived processes "
                 f"({wholly_slow} wholly slow, {mixed} mixed)")
        if icc >= PROCESS_ICC:
            return PROCESS, where
        if icc <= MOMENT_ICC:
            return MOMENT, where
        return BOTH, where
    if long_slow == 0:
        return UNDECIDED, f"no long-lived window slow; {fresh_slow} of {fresh} fresh processes slow"
    if mixed:
        return MOMENT, f"slow windows come and go within {mixed} long-lived process(es)"
    return UNDECIDED, f"{wholly_slow} long-lived process(es) wholly slow, too few processes to compare"


# -- the design's size
SIMULATED_RUNS = 4000  # runs simulated for each figure of the sizing
SIZING_SEED = 27  # seeded: the same components give the same figures every time
TYPICAL, MOST = 0.5, 0.9  # the sizing's shares of runs: half of them, and 9 in 10, reach the precision


def precision_quantile(rounds: int, sd: float, share: float = TYPICAL, confidence: float = CONFIDENCE,
                       runs: int = SIMULATED_RUNS) -> float | None:
    """The precision that this share of runs of this many rounds reaches, each round's log rate normal with this sd:
    the engine's interval of a rate's median (order_statistic_ranks, the slow side set aside first), its larger
    half-width over the median, simulated over seeded runs. None when even the range covers the median less often
    than confidence (fewer than 6 rounds)."""
    low_rank, high_rank, coverage = order_statistic_ranks(rounds, confidence, RATE_DISTURBED_SIDE)
    if coverage < confidence:
        return None
    generator = numpy.random.default_rng(SIZING_SEED)
    values = numpy.sort(numpy.exp(sd * generator.standard_normal((runs, rounds))), axis=1)
    middle = numpy.median(values, axis=1)
    widths = numpy.maximum(middle - values[:, low_rank - 1], values[:, rounds - high_rank] - middle) / middle
    return float(numpy.quantile(widths, share))


def rounds_for_precision(sd: float, precision: float = 0.03, share: float = TYPICAL,
                         confidence: float = CONFIDENCE, most: int = 1000) -> int | None:
    """The fewest rounds at which this share of runs reaches the precision (precision_quantile); None beyond most.
    The precision falls with the rounds in a saw-tooth (it rises a little where the interval's ranks change), so
    doubling finds a count that reaches it and one, half as large, that does not; the fewest is sought between."""
    def reaches(rounds: int) -> bool:
        value = precision_quantile(rounds, sd, share, confidence)
        return value is not None and value <= precision

    low, high = 5, 6  # low does not reach it (5 rounds cannot: even their range covers less than 95%)
    while not reaches(high):
        if high >= most:
            return None
        low, high = high, min(most, 2 * high)
    return next(rounds for rounds in range(low + 1, high + 1) if reaches(rounds))


@dataclass(frozen=True)
class Sizing:
    """How many rounds (and runs) a cell's median needs for a precision, from its variance components."""

    variances: dict[str, float]  # the levels told apart: run, block, process, window
    largest_level: str | None
    remedy: str | None
    round_sd: float | None  # sd of one round's log rate: sqrt(block + process + window)
    precision: float
    rounds_needed: int | None  # within one run: rounds at which half of the runs reach the precision
    rounds_needed_most: int | None  # ... at which 9 runs in 10 reach it
    precision_at: dict[int, float | None]  # rounds -> the precision half of the runs reach, within one run
    runs_needed: dict[int, int | None]  # rounds per run -> runs whose medians' interval reaches it, half the time


def sizing(parts: Components, run: float | None = None, precision: float = 0.03,
           rounds_per_run: Sequence[int] = (6, 9, 12, 20)) -> Sizing:
    """The level with the largest variance, and the rounds a cell's median needs for precision, each round's log
    rate normal with the sd of block + process + window (process + window without two blocks). Across runs, each
    run's median is taken as normal with the variance run + (pi/2) round / rounds (the median of n normal values
    varies pi/2 times as much as their mean), and the runs' medians get the same interval as rounds do."""
    variances = {level: value for level, value in (("run", run), ("block", parts.block), ("process", parts.process),
                                                   ("window", parts.window)) if value is not None}
    largest = max(variances, key=variances.get) if variances else None
    one_round = parts.round if parts.round is not None else parts.fresh
    if one_round is None:
        return Sizing(variances, largest, REMEDIES.get(largest), None, precision, None, None, {}, {})
    sd = math.sqrt(one_round)
    runs_needed = {}
    if run is not None:
        for rounds in rounds_per_run:
            runs_needed[rounds] = rounds_for_precision(math.sqrt(run + math.pi / 2 * one_round / rounds), precision)
    return Sizing(variances, largest, REMEDIES.get(largest), sd, precision, rounds_for_precision(sd, precision),
                  rounds_for_precision(sd, precision, MOST),
                  {rounds: precision_quantile(rounds, sd) for rounds in rounds_per_run}, runs_needed)
