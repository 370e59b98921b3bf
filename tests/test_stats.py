"""Statistics on fixed inputs and by simulation: medians, spread, intervals and the coverage they state."""

import math
import random

import pytest

from pingpong.harness.analysis.stats import (HIGH, LOW, NOISY_CV, ORDER_STATISTIC, QUOTIENT, RANGE, interval_label,
                                             median_interval, order_statistic_rank, order_statistic_ranks, paired_ratio,
                                             ratio_of_medians, summarize)


def test_summary_of_fixed_values():
    """Median, extremes, sample stdev and CV of a known set; with 3 values the interval is the range, at 75%."""
    summary = summarize([90.0, 100.0, 110.0])
    assert (summary.n, summary.median, summary.minimum, summary.maximum, summary.mean) == (3, 100, 90, 110, 100)
    assert summary.stdev == pytest.approx(10.0)
    assert summary.cv == pytest.approx(0.10)
    assert (summary.interval_low, summary.interval_high, summary.interval_kind) == (90, 110, RANGE)
    assert summary.interval_coverage == 0.75 and summary.precision == pytest.approx(0.10)
    assert summary.interval_label() == "range of 3 (covers the median 75%)"


def test_single_value_has_no_spread_rather_than_zero():
    """With one repeat, stdev, CV and the interval are absent, not a fake zero, and the cell is not noisy."""
    summary = summarize([1234.0])
    assert summary.stdev is None and summary.cv is None and summary.interval_low is None
    assert summary.interval_coverage is None and summary.precision is None
    assert summary.noisy is False


def test_noisy_threshold():
    """A CV at or above 10% is noisy; just below is not."""
    assert NOISY_CV == 0.10
    assert summarize([80.0, 100.0, 120.0]).noisy
    assert not summarize([99.0, 100.0, 101.0]).noisy


@pytest.mark.parametrize("n, k, coverage", [
    (2, 1, 0.5), (3, 1, 0.75), (5, 1, 0.9375), (6, 1, 0.96875), (8, 1, 1 - 2 / 256), (9, 2, 1 - 20 / 512),
    (10, 2, 1 - 22 / 1024), (12, 3, 1 - 2 * 79 / 4096), (20, 6, 1 - 2 * 21700 / 2**20)])
def test_order_statistic_rank_is_the_largest_that_reaches_95_percent(n, k, coverage):
    """k and the coverage 1 − 2·P(Binomial(n, ½) ≤ k−1) match a hand-computed table; k+1 would fall short."""
    assert order_statistic_rank(n) == (k, pytest.approx(coverage))
    if coverage >= 0.95:
        below = sum(math.comb(n, i) for i in range(k + 1))
        assert 1 - 2 * below / 2**n < 0.95


def test_the_interval_takes_the_kth_values_from_each_end():
    """12 values: the 3rd smallest and the 3rd largest, labelled as a 95% CI with its real 96.1% coverage."""
    interval = median_interval([float(v) for v in (12, 1, 11, 2, 10, 3, 9, 4, 8, 5, 7, 6)])
    assert (interval.low, interval.high, interval.kind, interval.n) == (3, 10, ORDER_STATISTIC, 12)
    assert interval_label(interval.kind, interval.coverage, interval.n) == "95% CI (order stats, 96.1%)"
    five = median_interval([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (five.low, five.high, five.kind) == (1, 5, RANGE)
    assert interval_label(five.kind, five.coverage, 5) == "range of 5 (covers the median 93.8%)"
    assert median_interval([7.0]) is None


@pytest.mark.parametrize("n, ranks, coverage", [
    (6, (1, 1), 1 - 2 / 64), (7, (1, 1), 1 - 2 / 128), (8, (2, 1), 1 - 10 / 256), (9, (2, 2), 1 - 20 / 512),
    (10, (2, 2), 1 - 22 / 1024), (11, (3, 2), 1 - (67 + 12) / 2048), (12, (3, 3), 1 - 2 * 79 / 4096),
    (14, (4, 3), 1 - (470 + 106) / 16384)])
def test_a_disturbed_side_sets_aside_one_more_value_there_when_the_coverage_allows(n, ranks, coverage):
    """[x(a), x(n-b+1)] covers 1 − P(B ≤ a−1) − P(B ≤ b−1); LOW takes a = k+1 whenever that reaches 95%, HIGH the
    mirror image, and without a side both ranks stay k."""
    assert order_statistic_ranks(n, disturbed_side=LOW) == (*ranks, pytest.approx(coverage))
    assert order_statistic_ranks(n, disturbed_side=HIGH) == (ranks[1], ranks[0], pytest.approx(coverage))
    k = order_statistic_rank(n)[0]
    assert order_statistic_ranks(n)[:2] == (k, k)
    with pytest.raises(ValueError):
        order_statistic_ranks(n, disturbed_side="sideways")


def test_a_rate_at_8_rounds_sets_its_slowest_round_aside():
    """One slow round (60) of 8 sets neither end of a rate's interval; one fast round (140) still sets the top."""
    slow = summarize([100.0, 101.0, 99.0, 100.0, 60.0, 102.0, 100.0, 98.0], LOW)
    assert (slow.interval_low, slow.interval_high, slow.interval_ranks) == (98, 102, (2, 1))
    assert slow.precision == pytest.approx(0.02) and slow.interval_coverage == pytest.approx(1 - 10 / 256)
    assert slow.interval_label() == "95% CI (order stats: value 2 to 8 of 8 in order, 96.1%)"
    fast = summarize([100.0, 101.0, 99.0, 100.0, 140.0, 102.0, 100.0, 98.0], LOW)
    assert (fast.interval_low, fast.interval_high) == (99, 140)
    symmetric = summarize([100.0, 101.0, 99.0, 100.0, 60.0, 102.0, 100.0, 98.0])
    assert (symmetric.interval_low, symmetric.interval_ranks) == (60, (1, 1))
    assert symmetric.interval_label() == "95% CI (order stats, 99.2%)"


def test_paired_ratio_uses_the_rounds_both_sides_have():
    """Round 4 is only on one side; rounds 1–3 give ratios 2.0, 2.2, 1.8: median 2.0, range 1.8–2.2 at 75%."""
    ratio = paired_ratio({1: 200.0, 2: 220.0, 3: 180.0, 4: 999.0}, {1: 100.0, 2: 100.0, 3: 100.0})
    assert (ratio.value, ratio.low, ratio.high, ratio.n) == (pytest.approx(2.0), 1.8, 2.2, 3)
    assert ratio.kind == RANGE and ratio.coverage == 0.75 and ratio.excludes_one()
    same = paired_ratio({1: 100.0, 2: 105.0, 3: 95.0}, {1: 101.0, 2: 100.0, 3: 99.0})
    assert not same.excludes_one()
    alone = paired_ratio({1: 5.0}, {1: 2.0, 2: 3.0})
    assert alone.value == 2.5 and alone.low is None and alone.coverage is None and alone.n == 1
    with pytest.raises(ValueError):
        paired_ratio({1: 5.0}, {2: 2.0})


def test_paired_ratio_cancels_what_a_round_shares():
    """Both cells slow down together in round 2: per-round ratios stay 2.0, where unpaired medians would wander."""
    fast, slow = {1: 2000.0, 2: 1000.0, 3: 2100.0}, {1: 1000.0, 2: 500.0, 3: 1050.0}
    paired = paired_ratio(fast, slow)
    assert paired.low == paired.high == pytest.approx(2.0)
    unpaired = ratio_of_medians(list(fast.values()), list(slow.values()))
    assert unpaired.low < 1 < unpaired.high  # the round's shared slowdown counts as noise: 1000/1050 to 2100/500


def test_ratio_of_medians_for_independent_runs():
    """The quotient of the two ranges, covering at least 75% × 75%; one value on a side gives no interval."""
    ratio = ratio_of_medians([200.0, 202.0, 198.0], [100.0, 101.0, 99.0])
    assert ratio.value == pytest.approx(2.0)
    assert (ratio.low, ratio.high) == (pytest.approx(198 / 101), pytest.approx(202 / 99)) and ratio.excludes_one()
    assert ratio.kind == QUOTIENT and ratio.coverage == pytest.approx(0.5625) and ratio.coverage_text() == "≥56.2%"
    same = ratio_of_medians([100.0, 105.0, 95.0], [100.0, 105.0, 95.0])
    assert same.value == 1.0 and not same.excludes_one()
    assert ratio_of_medians([5.0], [2.0]).low is None


def test_empty_input_is_an_error():
    with pytest.raises(ValueError):
        summarize([])


# Skewed distributions with a known median, as (name, draw(generator), median).
SKEWED = [
    ("lognormal", lambda g: g.lognormvariate(0.0, 0.8), 1.0),
    ("exponential", lambda g: g.expovariate(1.0), math.log(2)),
    ("pareto", lambda g: g.paretovariate(2.5), 2 ** (1 / 2.5)),
]
SIZES = (3, 5, 6, 8, 10, 12)
TRIALS = 3000
TOLERANCE = 0.03  # 3000 trials: the standard error of an observed coverage is at most 0.009


def test_the_median_interval_covers_as_often_as_it_says():
    """For n in 3..12 values from skewed distributions, the interval holds the true median as often as stated."""
    generator = random.Random(12)
    for name, draw, median in SKEWED:
        for n in SIZES:
            stated, hits = None, 0
            for _ in range(TRIALS):
                interval = median_interval([draw(generator) for _ in range(n)])
                stated = interval.coverage
                hits += interval.low <= median <= interval.high
            assert hits / TRIALS == pytest.approx(stated, abs=TOLERANCE), (name, n, hits / TRIALS, stated)


def test_one_sided_intervals_cover_as_often_as_they_say():
    """With a disturbed side fixed in advance, the asymmetric interval (8, 11 and 14 values) holds the true median
    as often as stated, on either side, for skewed distributions."""
    generator = random.Random(21)
    for name, draw, median in SKEWED:
        for n in (8, 11, 14):
            for side in (LOW, HIGH):
                stated, hits = None, 0
                for _ in range(TRIALS):
                    interval = median_interval([draw(generator) for _ in range(n)], disturbed_side=side)
                    stated = interval.coverage
                    hits += interval.low <= median <= interval.high
                assert interval.ranks[0] != interval.ranks[1]
                assert hits / TRIALS == pytest.approx(stated, abs=TOLERANCE), (name, n, side, hits / TRIALS, stated)


def test_paired_ratios_cover_as_often_as_they_say():
    """Rounds share a skewed slowdown of the machine; each side adds its own skewed noise. The per-round ratios'
    median is the true ratio (the two sides' noise is alike), and its interval holds it as often as stated."""
    generator = random.Random(34)
    true_ratio = 1.3
    for name, draw, _ in SKEWED:
        for n in SIZES:
            stated, hits = None, 0
            for _ in range(TRIALS):
                machine = {r: generator.lognormvariate(0.0, 0.5) for r in range(1, n + 1)}
                numerator = {r: true_ratio * 1000 * machine[r] * draw(generator) for r in machine}
                denominator = {r: 1000 * machine[r] * draw(generator) for r in machine}
                ratio = paired_ratio(numerator, denominator)
                stated = ratio.coverage
                hits += ratio.low <= true_ratio <= ratio.high
            assert hits / TRIALS == pytest.approx(stated, abs=TOLERANCE), (name, n, hits / TRIALS, stated)


def test_unpaired_ratios_cover_at_least_what_they_say():
    """Two independent samples: the quotient of their medians' intervals holds the true ratio at least as often as
    the product of their coverages."""
    generator = random.Random(56)
    for name, draw, median in SKEWED:
        for n in SIZES:
            stated, hits = None, 0
            for _ in range(TRIALS // 3):
                ratio = ratio_of_medians([2 * draw(generator) for _ in range(n)], [draw(generator) for _ in range(n)])
                stated = ratio.coverage
                hits += ratio.low <= 2 <= ratio.high
            assert hits / (TRIALS // 3) >= stated - TOLERANCE, (name, n, hits / (TRIALS // 3), stated)
