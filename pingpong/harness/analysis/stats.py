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
REMAINDER = "remainder"  # a difference less others (stats.remainder); coverage at least 1 − their misses
# a ratio of two sets of runs: the Mann–Whitney interval of the factor between them, from the pairwise ratios; its
# coverage holds when one side's values are the other's times one factor (the location-shift model, on logs)
TWO_SAMPLE = "two-sample"
CORRECTED = "drift-corrected"  # a ratio divided by a drift's interval; coverage at least 1 − both misses (Bonferroni)
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
    below = 0  # P(Binomial(n, 1/2) <= k-1) times 2ⁿ, summed as k grows: _coverage(n, k) without its sum anew
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1)
        if 1 - (below + below) / 2**n >= confidence:
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
    if kind == REMAINDER:
        return f"one interval less the others (covers at least {percent(coverage)})"
    if kind == TWO_SAMPLE:
        return (f"two-sample interval of the run medians, {n}+ runs a side (covers {percent(coverage)} when the "
                "runs differ by one factor)")
    if kind == CORRECTED:
        return f"divided by the drift's interval (covers at least {percent(coverage)})"
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
    kind: str | None  # ORDER_STATISTIC, RANGE (both over per-round ratios), QUOTIENT (unpaired), TWO_SAMPLE (runs)
    # or CORRECTED (divided by a drift)
    n: int  # paired: the rounds both sides have; unpaired and two-sample: the smaller side's count

    def excludes_one(self) -> bool:
        """True when the interval lies wholly above or below 1: a difference larger than the noise."""
        return self.low is not None and self.high is not None and (self.low > 1 or self.high < 1)

    def label(self) -> str:
        return interval_label(self.kind, self.coverage, self.n)

    def coverage_text(self) -> str:
        """The coverage alone: '75%', or 'at least 56%' for an unpaired ratio; '' without an interval."""
        if self.coverage is None:
            return ""
        return ("≥" if self.kind in (QUOTIENT, CORRECTED) else "") + percent(self.coverage)


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


@dataclass(frozen=True)
class Difference:
    """A difference a − b in the figures' own unit (µs), with its interval: how it was made (kind), how often such an
    interval covers the truth, from n values. Below 0 when b is the larger; low, high, coverage and kind are None
    when there are too few values for an interval."""

    value: float
    low: float | None
    high: float | None
    coverage: float | None  # for REMAINDER a lower bound: the interval covers at least this often
    kind: str | None  # ORDER_STATISTIC or RANGE (over per-round differences), or REMAINDER (one less others)
    n: int  # the rounds both sides have; for REMAINDER the fewest of its terms'

    def excludes_zero(self) -> bool:
        """True when the interval lies wholly above or below 0: a difference larger than the noise."""
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)

    def label(self) -> str:
        return interval_label(self.kind, self.coverage, self.n)

    def coverage_text(self) -> str:
        """The coverage alone: '75%', or '≥90.6%' for a remainder; '' without an interval."""
        if self.coverage is None:
            return ""
        return ("≥" if self.kind == REMAINDER else "") + percent(self.coverage)


def paired_difference(minuend: dict[int, float], subtrahend: dict[int, float],
                      confidence: float = CONFIDENCE) -> Difference:
    """The median of per-round differences minuend[r] − subtrahend[r] over the rounds both have, with the
    order-statistic interval of that median (or the differences' range with its real coverage: too few rounds)."""
    rounds = sorted(minuend.keys() & subtrahend.keys())
    if not rounds:
        raise ValueError("paired_difference needs at least one round that both sides have")
    median = median_with_interval([minuend[r] - subtrahend[r] for r in rounds], confidence)
    return Difference(median.value, median.low, median.high, median.coverage, median.kind, median.n)


def remainder(whole: Difference, parts: list[Difference]) -> Difference:
    """whole − the sum of parts, so that the parts and the remainder add up to whole exactly.

    Its interval is whole's interval less the parts' intervals, [whole.low − Σ high, whole.high − Σ low]: when every
    one of them covers its true median, this one covers the true remainder, so it covers at least 1 − the sum of
    their misses (Bonferroni, whatever ties them). No interval when a term has none.
    """
    value = whole.value - sum(part.value for part in parts)
    terms = [whole, *parts]
    n = min(term.n for term in terms)
    if any(term.low is None for term in terms):
        return Difference(value, None, None, None, None, n)
    coverage = max(0.0, 1 - sum(1 - term.coverage for term in terms))
    return Difference(value, whole.low - sum(part.high for part in parts),
                      whole.high - sum(part.low for part in parts), coverage, REMAINDER, n)


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


@lru_cache(maxsize=None)
def rank_sum_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) orderings of two samples of m and n values give each Mann–Whitney U (0…m·n)."""
    # counts[i][j][u]: orderings of i values of one sample and j of the other with U = u; built one value at a time
    previous = [[1] + [0] * (m * n) for _ in range(n + 1)]  # i = 0: U is 0 whatever j
    for i in range(1, m + 1):
        current = [[0] * (m * n + 1) for _ in range(n + 1)]
        current[0][0] = 1
        for j in range(1, n + 1):
            for u in range(m * n + 1):
                # the largest value is from the first sample (it beats all j others) or from the second
                current[j][u] = (previous[j][u - j] if u >= j else 0) + current[j - 1][u]
        previous = current
    return tuple(previous[n])


def shift_interval_rank(m: int, n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """(k, coverage) of the Mann–Whitney interval [d(k), d(m·n−k+1)] of the m·n sorted pairwise differences.

    k is the largest rank whose coverage 1 − 2·P(U ≤ k−1) reaches confidence; when even k = 1 (every pairwise
    difference) falls short, k is 1 with its own coverage 1 − 2 / C(m+n, m): 90% for 3 runs a side, 66.7% for 2.
    """
    counts, total = rank_sum_counts(m, n), math.comb(m + n, m)
    best = 1
    for k in range(1, m * n // 2 + 1):
        if 1 - 2 * sum(counts[:k]) / total >= confidence:
            best = k
        else:
            break
    return best, 1 - 2 * sum(counts[:best]) / total


def ratio_of_runs(numerator: list[float], denominator: list[float], confidence: float = CONFIDENCE) -> Ratio:
    """median(numerator) / median(denominator) for two sets of independent runs (one value per run), with the
    distribution-free two-sample interval of the factor between them: the Mann–Whitney interval on logs, i.e.
    order statistics of the pairwise ratios numerator[j] / denominator[i].

    Its coverage holds when one side's runs are the other's times one factor (the same spread on a log scale), the
    usual location-shift model; with k = 1 the interval is every pairwise ratio's range, [min / max, max / min],
    which is also the quotient of the two sides' ranges. No interval with fewer than 2 runs on a side.
    """
    if not numerator or not denominator:
        raise ValueError("ratio_of_runs needs values on both sides")
    value = statistics.median(numerator) / statistics.median(denominator)
    m, n = len(numerator), len(denominator)
    if m < 2 or n < 2:
        return Ratio(value, None, None, None, None, min(m, n))
    k, coverage = shift_interval_rank(m, n, confidence)
    pairwise = sorted(top / bottom for top in numerator for bottom in denominator)
    return Ratio(value, pairwise[k - 1], pairwise[m * n - k], coverage, TWO_SAMPLE, min(m, n))


def divided_by_drift(ratio: Ratio, drift: Ratio) -> Ratio:
    """A cell's ratio divided by the drift between its runs: [low / drift's high, high / drift's low].

    Both intervals hold at once with probability at least 1 − (1 − c) − (1 − d) whatever ties them (Bonferroni), so
    that is the coverage stated; a drift without an interval divides by its value and keeps the cell's coverage.
    """
    if ratio.low is None:
        return Ratio(ratio.value / drift.value, None, None, None, None, ratio.n)
    if drift.low is None:
        return Ratio(ratio.value / drift.value, ratio.low / drift.value, ratio.high / drift.value, ratio.coverage,
                     ratio.kind, ratio.n)
    coverage = max(0.0, ratio.coverage + drift.coverage - 1)
    return Ratio(ratio.value / drift.value, ratio.low / drift.high, ratio.high / drift.low, coverage, CORRECTED,
                 ratio.n)
