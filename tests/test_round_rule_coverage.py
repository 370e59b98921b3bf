"""The engine's round rule keeps the coverage its intervals state: simulated on the engine itself.

benchmarks/round_rule_coverage.py runs measure_rounds (its own planning code) on a fake clock and a fake measurer
whose rates come from a known distribution, a unimodal one and one with a slow mode, so each cell's true median is
known. Over every cell, the share of intervals that hold the true median must be the coverage their labels state,
within 1 point; and no cell may get more rounds than another because of its values.
"""

import pytest

from benchmarks.round_rule_coverage import BIMODAL, UNIMODAL, Distribution, narrow_coverage, simulate

RUNS = 150  # 4,800 cells per distribution: the observed share's standard error is about 0.3 points


@pytest.mark.parametrize("distribution", [UNIMODAL, BIMODAL], ids=lambda distribution: distribution.name)
def test_the_intervals_of_all_cells_cover_the_true_median_as_often_as_they_say(distribution):
    result = simulate(distribution, RUNS, seed=3)
    every = result["all"]
    assert every["cells"] == RUNS * 32
    assert abs(every["observed"] - every["stated"]) <= 0.01, result
    assert list(result["rounds"]) == [9]  # every cell the same rounds: as many as the budget holds


def test_a_cell_with_a_slow_mode_gets_no_fewer_rounds_for_a_lucky_start():
    """The rule before the current one stopped a cell the first time its interval was within ±3%, so a cell whose
    first rounds all fell in its fast mode stopped early, and its interval covered less (docs/methodology.md)."""
    result = simulate(BIMODAL, 20, seed=4, budget_s=1000.0, max_rounds=12)
    assert list(result["rounds"]) == [12]
    assert result["all"]["stated"] == pytest.approx(0.9614, abs=1e-4)  # 12 rounds: [x(3), x(10)] covers 96.1%


def test_the_cells_declared_within_3_percent_cover_as_stated_when_the_rule_is_what_selects_them():
    """With a 1% spread nearly every cell's interval is within ±3%, so the declared cells are (almost) all cells: the
    rule adds no selection of its own, and they cover as stated within 1 point. With two modes or a spread near the
    target, the narrow intervals cover less under any rule (docs/methodology.md quotes how much): that is a property
    of selecting on an interval's own width, which the engine no longer does."""
    steady = Distribution("normal ± 1%", ((1.0, 1.0, 0.01),))
    result = simulate(steady, 60, seed=5)
    assert result["declared"]["cells"] >= 0.99 * result["all"]["cells"]
    assert abs(result["declared"]["observed"] - result["declared"]["stated"]) <= 0.01, result
    wide = narrow_coverage(Distribution("normal ± 3%", ((1.0, 1.0, 0.03),)), 9, 20_000, seed=5)
    assert abs(wide["all"]["observed"] - wide["all"]["stated"]) <= 0.01
    assert wide["declared"]["observed"] < wide["declared"]["stated"] - 0.03  # the selection, not the rule
