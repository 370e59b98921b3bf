"""What a run says about its precision target: how many cells reached it, and about what the rest would take."""

import pytest

from pingpong.harness.analysis.precision import GOAL_SHARE, expected_precision, precision_reach, rounds_needed
from pingpong.harness.results.records import Attempt, Cell, RoundsOutcome, RunResult


def run_of(cells: dict[tuple[str, str], list[float]], precision=0.03, measuring_s=300.0) -> RunResult:
    run = RunResult(started_at="2026-01-01T00:00:00+00:00", command_line=[], environment={},
                    configuration={"rounds": {"rule": "alike-within-budget", "min_rounds": 6, "max_rounds": 20,
                                              "precision": precision, "budget_s": 290.0, "seed": 1}},
                    implementations={}, cells=[])
    for (server, client), rates in cells.items():
        attempts = [Attempt(repeat=index + 1, status="ok", reason=None, started_at="t", roundtrips_per_s=rate)
                    for index, rate in enumerate(rates)]
        run.cells.append(Cell(server, client, attempts=attempts))
    run.rounds_outcome = RoundsOutcome(stopped_by="budget", measuring_s=measuring_s, server_start_s=0.5)
    return run


STEADY = [1000, 1005, 995, 1002, 998, 1001]  # within ±0.5%
WIDE = [1000, 1100, 900, 1050, 950, 1000]  # ±10% at 6 rounds


def test_cells_within_the_target_are_counted_and_the_goal_is_90_percent():
    reach = precision_reach(run_of({("s", f"c{i}"): STEADY for i in range(9)} | {("s", "wide"): WIDE}))
    assert (reach.cells, reach.within, reach.rounds) == (10, 9, 6)
    assert reach.goal_met and GOAL_SHARE == 0.9
    assert reach.sentence().startswith("9 of 10 cells within ±3% (90%; the goal is 90%) after 6 rounds: goal met")


def test_a_run_short_of_the_goal_says_about_how_many_rounds_and_minutes_it_would_take():
    reach = precision_reach(run_of({("s", f"c{i}"): WIDE for i in range(5)} | {("s", "ok"): STEADY}))
    assert reach.within == 1 and not reach.goal_met
    assert reach.rounds_for_goal == rounds_needed(WIDE, 0.03) and reach.rounds_for_goal > 6
    assert reach.seconds_per_round == pytest.approx(50.0)
    text = reach.sentence()
    assert f"at about {reach.rounds_for_goal} rounds" in text and "s a round" in text


def test_more_rounds_narrow_the_expected_interval_and_a_steady_cell_needs_none():
    assert expected_precision(WIDE, 30) < expected_precision(WIDE, 9) <= expected_precision(WIDE, 6)
    assert expected_precision(WIDE, 6) == pytest.approx(0.10)  # the range of 6: what the values themselves show
    assert rounds_needed(STEADY, 0.03) == 7  # the next round already keeps it within
    assert rounds_needed([1000, 2000, 500], 0.03, most=50) == 51  # not even 50: "more than"


def test_a_run_without_a_target_or_without_intervals_says_nothing():
    assert precision_reach(run_of({("s", "c"): STEADY}, precision=None)) is None
    assert precision_reach(run_of({("s", "c"): [1000]})) is None
