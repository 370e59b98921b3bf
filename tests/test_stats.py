"""Statistics on fixed inputs: medians, spread, intervals, and the noisy threshold."""

import pytest

from pingpong.harness.stats import NOISY_CV, bootstrap_interval, ratio_of_medians, summarize


def test_summary_of_fixed_values():
    """Median, extremes, sample stdev and CV of a known set."""
    summary = summarize([90.0, 100.0, 110.0])
    assert (summary.n, summary.median, summary.minimum, summary.maximum, summary.mean) == (3, 100, 90, 110, 100)
    assert summary.stdev == pytest.approx(10.0)
    assert summary.cv == pytest.approx(0.10)
    assert summary.ci_low == 90 and summary.ci_high == 110


def test_single_value_has_no_spread_rather_than_zero():
    """With one repeat, stdev, CV and the interval are absent, not a fake zero, and the cell is not noisy."""
    summary = summarize([1234.0])
    assert summary.stdev is None and summary.cv is None and summary.ci_low is None
    assert summary.noisy is False


def test_noisy_threshold():
    """A CV at or above 10% is noisy; just below is not."""
    assert NOISY_CV == 0.10
    assert summarize([80.0, 100.0, 120.0]).noisy
    assert not summarize([99.0, 100.0, 101.0]).noisy


def test_bootstrap_is_deterministic_and_brackets_the_median():
    """The same input gives the same interval, and it contains the median."""
    values = [float(v) for v in (10, 12, 11, 13, 9, 10, 11)]
    first = bootstrap_interval(values, lambda xs: sorted(xs)[len(xs) // 2])
    assert first == bootstrap_interval(values, lambda xs: sorted(xs)[len(xs) // 2])
    assert first[0] <= 11 <= first[1]


def test_ratio_of_medians_with_interval():
    """Twice as fast gives 2.0 with an interval excluding 1; identical sets give an interval containing 1."""
    ratio = ratio_of_medians([200.0, 202.0, 198.0], [100.0, 101.0, 99.0])
    assert ratio.value == pytest.approx(2.0)
    assert ratio.low > 1.9 and ratio.high < 2.1 and ratio.excludes_one()
    same = ratio_of_medians([100.0, 105.0, 95.0], [100.0, 105.0, 95.0])
    assert same.value == 1.0 and not same.excludes_one()
    assert ratio_of_medians([5.0], [2.0]).low is None


def test_empty_input_is_an_error():
    with pytest.raises(ValueError):
        summarize([])
