"""Statistics over repeats: pure functions, deterministic (the bootstrap uses a fixed seed)."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

NOISY_CV = 0.10  # a cell whose coefficient of variation reaches 10% is marked noisy (pyperf's threshold)
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95


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
    ci_low: float | None  # bootstrap 95% interval of the median; None for n < 2
    ci_high: float | None

    @property
    def noisy(self) -> bool:
        return self.cv is not None and self.cv >= NOISY_CV


def summarize(values: list[float]) -> Summary:
    if not values:
        raise ValueError("summarize needs at least one value")
    n = len(values)
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if n >= 2 else None
    cv = stdev / mean if stdev is not None and mean > 0 else None
    ci = bootstrap_interval(values, statistics.median) if n >= 2 else (None, None)
    return Summary(n=n, median=statistics.median(values), minimum=min(values), maximum=max(values), mean=mean,
                   stdev=stdev, cv=cv, ci_low=ci[0], ci_high=ci[1])


def bootstrap_interval(values: list[float], statistic, resamples: int = BOOTSTRAP_RESAMPLES,
                       confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of statistic(values)."""
    generator = random.Random(seed)
    n = len(values)
    estimates = sorted(statistic([values[generator.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    return _percentile_pair(estimates, confidence)


@dataclass(frozen=True)
class Ratio:
    """value = median(numerator) / median(denominator), with a bootstrap interval when both have >= 2 values."""

    value: float
    low: float | None
    high: float | None

    def excludes_one(self) -> bool:
        """True when the interval lies wholly above or below 1: a difference larger than the noise."""
        return self.low is not None and self.high is not None and (self.low > 1 or self.high < 1)


def ratio_of_medians(numerator: list[float], denominator: list[float], resamples: int = BOOTSTRAP_RESAMPLES,
                     confidence: float = CONFIDENCE, seed: int = 0) -> Ratio:
    if not numerator or not denominator:
        raise ValueError("ratio_of_medians needs values on both sides")
    value = statistics.median(numerator) / statistics.median(denominator)
    if len(numerator) < 2 or len(denominator) < 2:
        return Ratio(value, None, None)
    generator = random.Random(seed)

    def resample(values: list[float]) -> float:
        return statistics.median([values[generator.randrange(len(values))] for _ in values])

    estimates = sorted(resample(numerator) / resample(denominator) for _ in range(resamples))
    low, high = _percentile_pair(estimates, confidence)
    return Ratio(value, low, high)


def _percentile_pair(sorted_values: list[float], confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    last = len(sorted_values) - 1
    return (sorted_values[max(0, math.floor(tail * last))], sorted_values[min(last, math.ceil((1 - tail) * last))])
