"""The heat maps' colour scale: logarithmic, and a minimum span so that noise does not look like a difference."""

import math

from pingpong.harness.report.scales import MIN_SPAN, log_range, position, viridis_hex


def test_a_ten_percent_difference_takes_a_small_part_of_the_colour_range():
    """Two cells 10% apart sit near the middle of the scale, not at its two ends."""
    low, high = log_range([1000.0, 1100.0])
    assert math.isclose(high / low, MIN_SPAN)
    assert position(1100.0, low, high) - position(1000.0, low, high) < 0.1
    assert 0.4 < position(1000.0, low, high) < 0.5 < position(1100.0, low, high) < 0.6


def test_a_wide_range_is_kept_as_it_is_and_is_logarithmic():
    low, high = log_range([100.0, 1000.0, 10000.0])
    assert (low, high) == (100.0, 10000.0)
    assert math.isclose(position(1000.0, low, high), 0.5)


def test_colours_run_from_dark_purple_to_yellow():
    assert viridis_hex(0) == "#440154" and viridis_hex(1) == "#fde725" and viridis_hex(0.5) == "#21918c"


def test_the_png_heat_map_of_two_close_cells_uses_the_minimum_span():
    from pingpong.harness.analysis.summary import summarize_run
    from pingpong.harness.report.plots import figure_heatmap
    from pingpong.harness.results.records import Cell, RunResult
    from tests.test_render import CONFIG, ok

    run = RunResult(started_at="t", command_line=[], configuration=CONFIG, environment={}, implementations={},
                    cells=[Cell("a", "c", attempts=[ok(1, 1000)]), Cell("b", "c", attempts=[ok(1, 1100)])])
    figure = figure_heatmap(run, summarize_run(run))
    norm = figure.axes[0].images[0].norm
    assert math.isclose(norm.vmax / norm.vmin, MIN_SPAN)
