"""Figures from fixed results: valid PNG files of the expected pixel size, written next to the results."""

import struct
from array import array

import pytest

from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.results.records import Attempt, Cell, RunResult
from pingpong.kit.driver import encode_histogram

plots = pytest.importorskip("pingpong.harness.report.plots")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path):
    """(width, height) from a PNG's IHDR chunk, after checking the signature."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def attempt(rate, latency_ns):
    return Attempt(repeat=1, status="ok", reason=None, started_at="t", roundtrips=int(rate), elapsed_s=1.0,
                   roundtrips_per_s=rate, latency_histogram=encode_histogram(array("q", latency_ns)))


def sample_run():
    cells = [Cell("s1", "c1", attempts=[attempt(1000, [900_000] * 50 + [2_000_000] * 5)]),
             Cell("s1", "c2", attempts=[attempt(4000, [200_000] * 80)]),
             Cell("s2", "c1", attempts=[attempt(3000, [300_000] * 60)]),
             Cell("s2", "c2", skipped="incompatible")]
    return RunResult(started_at="2026-11-21T00:00:00+00:00", command_line=[],
                     configuration={"payload_size": 4, "payload_kind": "text-ascii", "compression": "default"},
                     environment={}, implementations={}, cells=cells)


def test_heatmap_and_cdf_are_pngs_of_the_expected_size(tmp_path):
    run = sample_run()
    written = plots.write_figures(run, summarize_run(run), tmp_path / "2026-11-21T00-00-00Z")
    assert [path.name for path in written] == ["2026-11-21T00-00-00Z-heatmap.png",
                                               "2026-11-21T00-00-00Z-latency-cdf.png"]
    width, height = plots.HEATMAP_SIZE_IN
    assert png_size(written[0]) == (int(width * plots.DPI), int(height * plots.DPI))
    width, height = plots.CDF_SIZE_IN
    assert png_size(written[1]) == (int(width * plots.DPI), int(height * plots.DPI))
    assert not list(tmp_path.glob(".*"))  # no temporary file left


def test_cdf_points_are_cumulative_and_end_at_one():
    xs, ys = plots.cdf_points([encode_histogram(array("q", [100_000] * 3 + [1_000_000]))])
    assert ys == sorted(ys) and ys[-1] == 1.0
    assert xs[0] == pytest.approx(100, rel=0.01) and xs[-1] == pytest.approx(1000, rel=0.01)
    assert ys[0] == 0.75


def test_a_run_with_nothing_measured_draws_nothing(tmp_path):
    run = sample_run()
    run.cells = [Cell("s", "c", skipped="unavailable")]
    assert plots.write_figures(run, summarize_run(run), tmp_path / "x") == []
