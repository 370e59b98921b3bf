"""Statistics over repeats: pure functions, deterministic, with intervals that say how often they really cover.

The interval of a median is distribution-free: two order statistics of the sample, the k-th smallest and the k-th
largest, cover the true median with a probability that depends only on n and k (a binomial sum). With few values
even the whole range covers it less often than asked (75% for 3 values, 93.75% for 5); the interval is then the
range, called so, with the coverage it has. Every interval carries its coverage and its kind, and interval_label()
names it that way wherever it is shown.

A figure that the host's disturbances push one way only (a slow stretch lowers a rate; it never raises one) may say
so: its interval then sets aside one more value on that side whenever the coverage still reaches the confidence
(at 8 values [x(2), x(8)], 96.1%, where the symmetric interval is still the range). The side is fixed before the
values are seen, so the coverage holds as stated; the ranks are recorded with the interval.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache

NOISY_CV = 0.10  # a cell whose coefficient of variation reaches 10% is marked noisy (pyperf's threshold)
CONFIDENCE = 0.95  # the coverage an interval is chosen for; it is the range, labelled with less, when n is too small

ORDER_STATISTIC = "order-statistic"  # [k-th smallest, k-th largest] covering at least CONFIDENCE
RANGE = "range"  # [min, max] when even that covers less than CONFIDENCE: its coverage is stated
QUOTIENT = "quotient"  # an unpaired ratio: one median's interval over the other's; coverage at least the product
# The side a figure's disturbed values fall on: the host's slow stretches lower rates and raise times.
LOW, HIGH = "low", "high"
RATE_DISTURBED_SIDE = LOW  # roundtrips per second: a disturbed round is a slow one


@lru_cache(maxsize=None)
def order_statistic_rank(n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """(k, coverage) of the median's interval [x(k), x(n-k+1)] among n sorted values.

    k is the largest rank whose coverage 1 - 2·P(Binomial(n, 1/2) <= k-1) reaches confidence; when even k = 1
    (the range) falls short, k is 1 and the coverage is the range's own, 1 - 2·0.5ⁿ. Exact for continuous
    distributions; with ties the closed interval covers at least as often.
    """
    if n < 1:
        raise ValueError("an interval needs at least one value")
    best = 1
    for k in range(1, n // 2 + 1):
        if _coverage(n, k) >= confidence:
            best = k
        else:
            break
    return best, _coverage(n, best)


def _coverage(n: int, k: int) -> float:
    return _ranks_coverage(n, k, k)


def _ranks_coverage(n: int, low_rank: int, high_rank: int) -> float:
    """How often [x(low_rank), x(n-high_rank+1)] covers the median: 1 − P(B ≤ low_rank−1) − P(B ≤ high_rank−1)."""
    def below(rank: int) -> int:  # P(Binomial(n, 1/2) <= rank-1) times 2ⁿ
        return sum(math.comb(n, i) for i in range(rank))
    return 1 - (below(low_rank) + below(high_rank)) / 2**n


@lru_cache(maxsize=None)
def order_statistic_ranks(n: int, confidence: float = CONFIDENCE,
                          disturbed_side: str | None = None) -> tuple[int, int, float]:
    """(low_rank, high_rank, coverage): the median's interval is [x(low_rank), x(n-high_rank+1)].

    Without a disturbed side, both ranks are order_statistic_rank's k. With one (LOW or HIGH), that side's rank is
    k+1 when the coverage still reaches confidence: the interval sets aside one more value there first.
    """
    k, coverage = order_statistic_rank(n, confidence)
    if disturbed_side is None or coverage < confidence:
        return k, k, coverage
    if disturbed_side not in (LOW, HIGH):
        raise ValueError(f"disturbed_side is {LOW!r}, {HIGH!r} or None, not {disturbed_side!r}")
    trimmed = _ranks_coverage(n, k + 1, k)  # symmetric in the two ranks
    if 2 * k + 1 > n or trimmed < confidence:
        return k, k, coverage
    return (k + 1, k, trimmed) if disturbed_side == LOW else (k, k + 1, trimmed)


@dataclass(frozen=True)
class MedianInterval:
    """An interval of a median with the probability that it covers the true median, and how it was chosen."""

    low: float
    high: float
    coverage: float  # e.g. 0.96875 for [min, max] of 6 values; 0.75 for the range of 3
    kind: str  # ORDER_STATISTIC (covers at least the confidence asked for) or RANGE (covers less: too few values)
    n: int
    ranks: tuple[int, int] = (1, 1)  # low is the ranks[0]-th smallest value, high the ranks[1]-th largest


def median_interval(values: list[float], confidence: float = CONFIDENCE,
                    disturbed_side: str | None = None) -> MedianInterval | None:
    """The order-statistic interval of the median of values; None for fewer than 2 values (no spread to show).
    disturbed_side: see order_statistic_ranks."""
    n = len(values)
    if n < 2:
        return None
    low_rank, high_rank, coverage = order_statistic_ranks(n, confidence, disturbed_side)
    ordered = sorted(values)
    kind = ORDER_STATISTIC if coverage >= confidence else RANGE
    return MedianInterval(low=ordered[low_rank - 1], high=ordered[n - high_rank], coverage=coverage, kind=kind, n=n,
                          ranks=(low_rank, high_rank))


def percent(coverage: float) -> str:
    """A coverage as a short percentage: 0.75 → '75%', 0.9375 → '93.8%', 0.96875 → '96.9%'."""
    return f"{coverage * 100:.1f}".removesuffix(".0") + "%"


def interval_label(kind: str | None, coverage: float | None, n: int, confidence: float = CONFIDENCE,
                   ranks: tuple[int, int] | None = None) -> str:
    """How an interval is named wherever it is shown, with the coverage it really has (and its ranks when it sets
    aside more values on one side than on the other)."""
    if kind == ORDER_STATISTIC and ranks and ranks[0] != ranks[1]:
        return (f"{confidence:.0%} CI (order stats: value {ranks[0]} to {n - ranks[1] + 1} of {n} in order, "
                f"{percent(coverage)})")
    if kind == ORDER_STATISTIC:
        return f"{confidence:.0%} CI (order stats, {percent(coverage)})"
    if kind == RANGE:
        return f"range of {n} (covers the median {percent(coverage)})"
    if kind == QUOTIENT:
        return f"quotient of the two medians' intervals (covers at least {percent(coverage)})"
    return f"no interval ({n} value{'s' if n != 1 else ''})"


@dataclass(frozen=True)
class Summary:
    """Repeats of one figure. stdev, cv and the interval are None when there are too few values for them."""

    n: int
    median: float
    minimum: float
    maximum: float
    mean: float
    stdev: float | None  # sample standard deviation; None for n < 2 rather than a fake zero
    cv: float | None  # stdev / mean
    interval_low: float | None  # the median's order-statistic interval (median_interval); None for n < 2
    interval_high: float | None
    interval_coverage: float | None  # how often such an interval covers the true median: 0.75 for 3 values
    interval_kind: str | None  # ORDER_STATISTIC (covers >= CONFIDENCE) or RANGE (min–max, covering less)
    precision: float | None  # the interval's larger half-width over the median: 0.028 for ±2.8%
    interval_ranks: tuple[int, int] | None = None  # low: the ranks[0]-th smallest; high: the ranks[1]-th largest

    @property
    def noisy(self) -> bool:
        return self.cv is not None and self.cv >= NOISY_CV

    def interval_label(self) -> str:
        return interval_label(self.interval_kind, self.interval_coverage, self.n, ranks=self.interval_ranks)


def summarize(values: list[float], disturbed_side: str | None = None) -> Summary:
    """Repeats of one figure; disturbed_side (LOW for rates) as in order_statistic_ranks."""
    if not values:
        raise ValueError("summarize needs at least one value")
    n = len(values)
    mean = statistics.fmean(values)
    median = statistics.median(values)
    stdev = statistics.stdev(values) if n >= 2 else None
    cv = stdev / mean if stdev is not None and mean > 0 else None
    interval = median_interval(values, disturbed_side=disturbed_side)
    precision = None
    if interval is not None and median > 0:
        precision = max(median - interval.low, interval.high - median) / median
    return Summary(n=n, median=median, minimum=min(values), maximum=max(values), mean=mean, stdev=stdev, cv=cv,
                   interval_low=interval and interval.low, interval_high=interval and interval.high,
                   interval_coverage=interval and interval.coverage, interval_kind=interval and interval.kind,
                   precision=precision, interval_ranks=interval and interval.ranks)


@dataclass(frozen=True)
class Ratio:
    """A ratio with its interval: how it was made (kind), how often such an interval covers the truth, from n values.

    low, high, coverage and kind are None when there are too few values for an interval.
    """

    value: float
    low: float | None
    high: float | None
    coverage: float | None  # for QUOTIENT a lower bound: the interval covers at least this often
    kind: str | None  # ORDER_STATISTIC, RANGE (both over per-round ratios) or QUOTIENT (unpaired)
    n: int  # paired: the rounds both sides have; unpaired: the smaller side's count

    def excludes_one(self) -> bool:
        """True when the interval lies wholly above or below 1: a difference larger than the noise."""
        return self.low is not None and self.high is not None and (self.low > 1 or self.high < 1)

    def label(self) -> str:
        return interval_label(self.kind, self.coverage, self.n)

    def coverage_text(self) -> str:
        """The coverage alone: '75%', or 'at least 56%' for an unpaired ratio; '' without an interval."""
        if self.coverage is None:
            return ""
        return ("≥" if self.kind == QUOTIENT else "") + percent(self.coverage)


def median_with_interval(values: list[float], confidence: float = CONFIDENCE) -> Ratio:
    """The median of values (ratios) with its order-statistic interval, as a Ratio."""
    if not values:
        raise ValueError("median_with_interval needs at least one value")
    interval = median_interval(values, confidence)
    if interval is None:
        return Ratio(statistics.median(values), None, None, None, None, len(values))
    return Ratio(statistics.median(values), interval.low, interval.high, interval.coverage, interval.kind,
                 len(values))


def paired_ratio(numerator: dict[int, float], denominator: dict[int, float],
                 confidence: float = CONFIDENCE) -> Ratio:
    """The median of per-round ratios numerator[r] / denominator[r] over the rounds both have, with its interval.

    Two cells measured in the same rounds of one run share each round's state of the machine; the ratio within a
    round cancels it. The interval is the order-statistic interval of the per-round ratios' median (or their range
    with its real coverage when there are too few rounds).
    """
    rounds = sorted(numerator.keys() & denominator.keys())
    if not rounds:
        raise ValueError("paired_ratio needs at least one round that both sides have")
    return median_with_interval([numerator[r] / denominator[r] for r in rounds], confidence)


def ratio_of_medians(numerator: list[float], denominator: list[float], confidence: float = CONFIDENCE) -> Ratio:
    """median(numerator) / median(denominator) for two independent samples (two runs: nothing to pair).

    The interval is the quotient of the two medians' intervals, [low_n / high_d, high_n / low_d]. Both cover their
    medians at once with probability coverage_n × coverage_d (independent samples), and then the quotient covers
    the ratio of the medians: its coverage is at least that product.
    """
    if not numerator or not denominator:
        raise ValueError("ratio_of_medians needs values on both sides")
    value = statistics.median(numerator) / statistics.median(denominator)
    top, bottom = median_interval(numerator, confidence), median_interval(denominator, confidence)
    n = min(len(numerator), len(denominator))
    if top is None or bottom is None:
        return Ratio(value, None, None, None, None, n)
    return Ratio(value, top.low / bottom.high, top.high / bottom.low, top.coverage * bottom.coverage, QUOTIENT, n)
