"""The noise's structure (pingpong/harness/analysis/noise.py, benchmarks/noise_structure.py) on synthetic data whose
variance split and slow mode are known: no process is started."""

import math
import os
import random
import statistics
import time

import pytest

from benchmarks.noise_structure import EventLines, analyse, interleaved
from pingpong.harness.analysis import noise
from pingpong.harness.analysis.stats import RATE_DISTURBED_SIDE, summarize

RATE = 5000.0


def synthetic_blocks(generator: random.Random, blocks: int, fresh: int, long_lived: int, windows: int,
                     block_sd: float, process_sd: float, window_sd: float) -> list[noise.Block]:
    """Log-normal rates: each block, process and window adds its own normal deviation to the log rate."""
    made = []
    for _ in range(blocks):
        block = generator.gauss(0, block_sd)
        fresh_rates = tuple(RATE * math.exp(block + generator.gauss(0, process_sd) + generator.gauss(0, window_sd))
                            for _ in range(fresh))
        processes = []
        for _ in range(long_lived):
            process = block + generator.gauss(0, process_sd)
            processes.append(tuple(RATE * math.exp(process + generator.gauss(0, window_sd)) for _ in range(windows)))
        made.append(noise.Block(fresh_rates, tuple(processes)))
    return made


def bimodal_blocks(generator: random.Random, by_process: bool, blocks: int = 4, fresh: int = 8,
                   long_lived: int = 3, windows: int = 30) -> list[noise.Block]:
    """70% of values at 1.00 +- 2%, 30% at 0.75 +- 3%: the mode drawn once per process, or once per window."""
    def mode() -> float:
        return 0.75 if generator.random() < 0.3 else 1.0

    def value(centre: float) -> float:
        return RATE * centre * math.exp(generator.gauss(0, 0.03 if centre < 1 else 0.02))

    made = []
    for _ in range(blocks):
        fresh_rates = tuple(value(mode()) for _ in range(fresh))
        processes = []
        for _ in range(long_lived):
            fixed = mode()
            processes.append(tuple(value(fixed if by_process else mode()) for _ in range(windows)))
        made.append(noise.Block(fresh_rates, tuple(processes)))
    return made


def test_pooled_variance_weighs_groups_by_their_degrees_of_freedom():
    """Squared deviations from each group's own mean, over the sum of n - 1; a group of one value adds nothing."""
    variance, freedom = noise.pooled_variance([[1.0, 3.0], [10.0, 12.0, 14.0], [99.0]])
    assert freedom == 3
    assert variance == pytest.approx((2 + 8) / 3)
    assert noise.pooled_variance([[1.0], []]) == (None, 0)


def test_a_known_split_comes_out_within_tolerance():
    """Blocks at 3%, processes at 5%, windows at 2% (sd of log rate): each component is recovered within 20%."""
    blocks = synthetic_blocks(random.Random(27), blocks=80, fresh=30, long_lived=6, windows=40,
                              block_sd=0.03, process_sd=0.05, window_sd=0.02)
    parts = noise.components(blocks)
    assert parts.window == pytest.approx(0.02 ** 2, rel=0.1)
    assert parts.fresh == pytest.approx(0.05 ** 2 + 0.02 ** 2, rel=0.1)
    assert parts.process == pytest.approx(0.05 ** 2, rel=0.2)
    assert parts.process_from_long_lived == pytest.approx(0.05 ** 2, rel=0.2)
    assert parts.block == pytest.approx(0.03 ** 2, rel=0.2)
    assert parts.round == pytest.approx(0.03 ** 2 + 0.05 ** 2 + 0.02 ** 2, rel=0.1)
    assert parts.window_lag_one_correlation == pytest.approx(0, abs=0.05)
    assert (parts.fresh_values, parts.long_lived_processes, parts.long_lived_windows, parts.blocks) == (
        80 * 30, 80 * 6, 80 * 6 * 40, 80)


def test_without_a_process_level_the_process_component_is_near_zero():
    """Windows alone vary: fresh single windows spread as much as windows within a process, so window/fresh is
    near 1 and the process component near 0 (floored, never negative)."""
    parts = noise.components(synthetic_blocks(random.Random(3), blocks=20, fresh=20, long_lived=4, windows=30,
                                              block_sd=0.0, process_sd=0.0, window_sd=0.04))
    assert parts.window_over_fresh == pytest.approx(1, abs=0.15)
    assert 0 <= parts.process < 0.15 * 0.04 ** 2
    assert parts.block < 0.15 * 0.04 ** 2


def test_one_block_tells_no_block_component():
    """With a single block the block and round components are absent (None), not zero."""
    parts = noise.components(synthetic_blocks(random.Random(5), blocks=1, fresh=5, long_lived=1, windows=5,
                                              block_sd=0.01, process_sd=0.01, window_sd=0.01))
    assert parts.block is None and parts.round is None and parts.process_from_long_lived is None
    assert parts.fresh is not None and parts.window is not None


def test_lag_one_correlation_of_a_slowly_moving_series():
    """An AR(1) series with coefficient 0.7 shows a lag-one correlation near 0.7; white noise near 0."""
    generator = random.Random(11)
    series = []
    for _ in range(50):
        value, values = 0.0, []
        for _ in range(100):
            value = 0.7 * value + generator.gauss(0, 1)
            values.append(value)
        series.append(values)
    assert noise.lag_one_correlation(series) == pytest.approx(0.7, abs=0.08)
    white = [[generator.gauss(0, 1) for _ in range(100)] for _ in range(50)]
    assert noise.lag_one_correlation(white) == pytest.approx(0, abs=0.05)
    assert noise.lag_one_correlation([[1.0, 2.0]]) is None


def test_the_run_component_from_run_means():
    """Runs whose means differ by a run-level sd of 4% beyond their own sampling: the component comes out near
    0.04 squared; runs that differ only by their sampling give about zero; one run gives none."""
    generator = random.Random(8)
    runs = []
    for _ in range(400):
        level = generator.gauss(0, 0.04)
        blocks = synthetic_blocks(generator, blocks=4, fresh=8, long_lived=0, windows=0, block_sd=0.02,
                                  process_sd=0.03, window_sd=0.0)
        mean, variance = noise.run_mean(blocks)
        runs.append((mean + level, variance))
    assert noise.run_component(runs) == pytest.approx(0.04 ** 2, rel=0.2)
    same = [noise.run_mean(synthetic_blocks(generator, 4, 8, 0, 0, 0.02, 0.03, 0.0)) for _ in range(400)]
    assert noise.run_component(same) < 0.2 * 0.04 ** 2
    assert noise.run_component(runs[:1]) is None


def test_a_single_block_run_mean_uses_its_fresh_values():
    """With one block, a run mean's variance is its fresh values' variance over their number."""
    mean, variance = noise.run_mean([noise.Block((RATE, RATE * math.e), ())])
    assert mean == pytest.approx(math.log(RATE) + 0.5)
    assert variance == pytest.approx(0.5 / 2)


def test_a_process_level_slow_mode_is_called_process():
    """Each long-lived process drawn slow or fast for its life: whole processes are slow, none mixed."""
    slow = noise.slow_mode(bimodal_blocks(random.Random(1), by_process=True))
    assert slow.verdict == noise.PROCESS
    assert slow.mixed == 0 and slow.wholly_slow >= 1 and slow.intraclass_correlation > 0.9
    assert all(p.switches == 0 for p in slow.long_lived)
    assert 0 < slow.fresh_slow < slow.fresh


def test_a_moment_level_slow_mode_is_called_moment():
    """Each window drawn slow or fast by itself: slow windows come and go within every process."""
    slow = noise.slow_mode(bimodal_blocks(random.Random(1), by_process=False))
    assert slow.verdict == noise.MOMENT
    assert slow.mixed == len(slow.long_lived) and abs(slow.intraclass_correlation) < 0.1
    assert statistics.fmean(p.switches for p in slow.long_lived) > 5


def test_a_slow_mode_that_comes_with_age_is_called_so():
    """Processes fast at first that slow to 0.8 at a random point of their second half and stay there (as the
    long-lived aiohttp clients did): the slow windows gather in the last third, and the drift says by how much."""
    generator = random.Random(6)
    blocks = []
    for _ in range(4):
        fresh = tuple(RATE * math.exp(generator.gauss(0, 0.02)) for _ in range(8))
        processes = []
        for _ in range(2):
            turn = generator.randrange(12, 24)
            processes.append(tuple(RATE * (0.8 if index >= turn else 1.0) * math.exp(generator.gauss(0, 0.02))
                                   for index in range(30)))
        blocks.append(noise.Block(fresh, tuple(processes)))
    slow = noise.slow_mode(blocks)
    assert slow.verdict == noise.AGE
    assert slow.early_slow_fraction == 0 and slow.late_slow_fraction > 0.8
    assert math.exp(noise.components(blocks).age_drift) == pytest.approx(0.8, abs=0.05)


def test_moments_show_no_age_drift():
    """Windows that vary by the moment alone: the last third runs as fast as the first."""
    parts = noise.components(synthetic_blocks(random.Random(12), blocks=10, fresh=4, long_lived=4, windows=30,
                                              block_sd=0.02, process_sd=0.03, window_sd=0.05))
    assert parts.age_drift == pytest.approx(0, abs=0.02)
    assert noise.thirds([1, 2]) == ((), ()) and noise.thirds([1, 2, 3, 4, 5, 6, 7]) == ([1, 2], [6, 7])


def test_a_unimodal_cell_has_no_slow_mode():
    """2% of spread and nothing near 0.85 of the median: no slow mode, whatever its processes do."""
    blocks = synthetic_blocks(random.Random(2), blocks=4, fresh=8, long_lived=2, windows=30, block_sd=0.01,
                              process_sd=0.01, window_sd=0.02)
    assert noise.slow_mode(blocks).verdict == noise.NONE


def test_with_one_long_lived_process_a_mixed_one_is_a_moment():
    """Too few processes for an intraclass correlation: a process whose windows switch modes says moment; a wholly
    slow one cannot say which."""
    mixed = [noise.Block((RATE, RATE), ((RATE, RATE, 0.7 * RATE, 0.7 * RATE, RATE),))]
    assert noise.slow_mode(mixed).verdict == noise.MOMENT
    whole = [noise.Block((RATE, RATE, RATE, RATE, RATE, RATE, RATE), ((0.7 * RATE,) * 5,))]
    assert noise.slow_mode(whole).verdict == noise.UNDECIDED


def test_process_slowness_counts_switches():
    """Slow windows and their switches, slow to fast and back, in order."""
    found = noise.process_slowness([1.0, 0.5, 0.5, 1.0, 0.5], threshold=0.8)
    assert (found.windows, found.slow, found.switches) == (5, 3, 3)
    assert found.slow_fraction == pytest.approx(0.6)


def test_intraclass_correlation_at_its_ends():
    """1 when every process is wholly slow or wholly fast; about 0 (or below) when all share one slow fraction;
    None with a single process or with every window alike."""
    whole = [noise.ProcessSlowness(10, 10, 0), noise.ProcessSlowness(10, 0, 0), noise.ProcessSlowness(10, 0, 0)]
    assert noise.intraclass_correlation(whole) == pytest.approx(1)
    even = [noise.ProcessSlowness(10, 3, 4)] * 3
    assert noise.intraclass_correlation(even) <= 0
    assert noise.intraclass_correlation(whole[:1]) is None
    assert noise.intraclass_correlation([noise.ProcessSlowness(10, 0, 0)] * 3) is None


def test_the_simulated_precision_is_the_engines_interval():
    """The precision half of the runs reach (and 9 in 10) agrees with runs drawn here and judged by summarize(),
    the engine's own figure, within 5%."""
    generator = random.Random(4)
    for rounds, sd in ((6, 0.03), (8, 0.05), (11, 0.02)):
        found = sorted(summarize([math.exp(generator.gauss(0, sd)) for _ in range(rounds)],
                                 disturbed_side=RATE_DISTURBED_SIDE).precision for _ in range(4000))
        assert noise.precision_quantile(rounds, sd) == pytest.approx(statistics.median(found), rel=0.05)
        assert noise.precision_quantile(rounds, sd, 0.9) == pytest.approx(found[int(0.9 * len(found))], rel=0.05)


def test_rounds_for_precision_grows_with_the_spread():
    """No spread: the fewest rounds whose range is a 95% interval (6); more spread, more rounds; 5 rounds never;
    9 runs in 10 need more rounds than half of them."""
    assert noise.rounds_for_precision(0.0) == 6
    assert noise.precision_quantile(5, 0.01) is None
    needed = [noise.rounds_for_precision(sd) for sd in (0.01, 0.02, 0.04, 0.08)]
    assert needed == sorted(needed) and needed[0] == 6 and needed[-1] > 30
    assert noise.precision_quantile(needed[2], 0.04) <= 0.03 < noise.precision_quantile(needed[2] - 1, 0.04)
    assert all(noise.precision_quantile(rounds, 0.04) > 0.03 for rounds in range(6, needed[2]))
    assert noise.rounds_for_precision(0.04, share=noise.MOST) > needed[2]
    assert noise.rounds_for_precision(1.0, most=50) is None


def test_sizing_names_the_largest_level_and_the_runs_needed():
    """The largest component is the level to replicate; a run component makes more runs, not rounds, the cure."""
    parts = noise.components(synthetic_blocks(random.Random(9), blocks=40, fresh=20, long_lived=4, windows=30,
                                              block_sd=0.01, process_sd=0.05, window_sd=0.01))
    size = noise.sizing(parts)
    assert size.largest_level == "process" and "client processes" in size.remedy
    assert size.round_sd == pytest.approx(math.sqrt(parts.round))
    assert size.rounds_needed == noise.rounds_for_precision(size.round_sd)
    assert size.rounds_needed_most > size.rounds_needed
    assert size.precision_at[20] < size.precision_at[6]
    assert size.runs_needed == {}
    with_runs = noise.sizing(parts, run=0.1 ** 2)
    assert with_runs.largest_level == "run" and "more runs" in with_runs.remedy
    assert with_runs.runs_needed[6] > with_runs.runs_needed[20] or with_runs.runs_needed[6] is None


def test_the_order_spreads_long_lived_processes_among_fresh_ones():
    """A block starts with a fresh process (the server's first client, as in a run) and keeps every count."""
    assert interleaved(2, 1) == ["fresh", "long", "fresh"]
    assert interleaved(8, 2) == ["fresh", "fresh", "long", "fresh", "fresh", "fresh", "fresh", "long", "fresh",
                                 "fresh"]
    assert interleaved(3, 0) == ["fresh"] * 3
    assert interleaved(0, 2) == ["long", "long"]


def test_the_analysis_reads_only_complete_processes():
    """analyse() keeps ok fresh attempts and long-lived processes with all their windows (and an outside count
    that agrees with the driver's), and counts the checks that agree."""
    ok = {"status": "ok", "roundtrips_per_s": RATE}
    cell = {"server": "s", "client": "c", "blocks": [
        {"fresh": [ok, ok | {"roundtrips_per_s": 1.1 * RATE}, {"status": "timeout", "roundtrips_per_s": None}],
         "long_lived": [{"status": "ok", "rates": [RATE, 0.9 * RATE, RATE], "count_agrees": True},
                        {"status": "failed", "rates": [RATE], "problem": "ended early"}]},
        {"fresh": [ok, ok], "long_lived": [{"status": "failed", "rates": [RATE, RATE, 1.05 * RATE],
                                            "count_agrees": False, "problem": "the outside count differs"}]}]}
    analysis = analyse(cell, previous=[])
    assert analysis["components"]["fresh_values"] == 4
    assert analysis["components"]["long_lived_processes"] == 1
    assert analysis["counts_agree"] == {"checked": 2, "agreeing": 1}
    assert analysis["slow_mode"]["verdict"] == noise.NONE
    again = analyse(cell, previous=[cell])
    assert len(again["runs"]) == 2 and again["run"] == pytest.approx(0)


def test_event_lines_wait_for_a_line_or_give_up():
    """A line that came is found past others; a closed pipe or a passed deadline is False, without blocking."""
    read_fd, write_fd = os.pipe()
    try:
        events = EventLines(read_fd)
        os.write(write_fd, b"ready\nwindow-start\n")
        assert events.wait_for("window-start", time.monotonic() + 1)
        assert not events.wait_for("window-end", time.monotonic() + 0.01)
        os.close(write_fd)
        write_fd = None
        assert not events.wait_for("window-end", time.monotonic() + 5) and events.closed
    finally:
        os.close(read_fd)
        if write_fd is not None:
            os.close(write_fd)


def test_placement_is_a_choice_of_the_runs_own_and_nothing_else(monkeypatch, capsys):
    from benchmarks.noise_structure import parse_arguments
    monkeypatch.setattr("sys.argv", ["noise_structure", "--placement", "split", "--cells", "sanic:node-ws"])
    chosen = parse_arguments()
    assert (chosen.placement, chosen.cell_pairs) == ("split", [("sanic", "node-ws")])
    monkeypatch.setattr("sys.argv", ["noise_structure"])
    assert parse_arguments().placement == "auto"
    monkeypatch.setattr("sys.argv", ["noise_structure", "--placement", "two-cpus"])
    with pytest.raises(SystemExit) as refused:
        parse_arguments()
    assert refused.value.code == 2
    assert "invalid choice: 'two-cpus'" in capsys.readouterr().err
