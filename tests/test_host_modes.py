"""The host sentinel and what its slices are read for: the pure functions on made series, the benchmark for real."""

import json
import os
import subprocess
import sys

import pytest

from pingpong.contract import RAW_WINDOWS_ENV
from pingpong.harness.analysis import host_modes
from tests.conftest import ROOT, TEST_TOKEN_ENV, processes_carrying

SENTINEL = ROOT / "build" / "host_sentinel"
FAST, SLOW = 5000.0, 8000.0


def made_series() -> list[float]:
    """100 fast slices, 20 slow, 100 fast, 5 slow, 100 fast."""
    return [FAST] * 100 + [SLOW] * 20 + [FAST] * 100 + [SLOW] * 5 + [FAST] * 100


def test_the_slow_mode_and_its_stretches_are_found():
    series = made_series()
    level = host_modes.fast_level(series)
    assert level == FAST
    flags = host_modes.slow_flags(series, level)
    assert sum(flags) == 25
    assert host_modes.episodes(flags) == [20, 5]
    assert host_modes.episodes([True, True, False, True]) == [2, 1]


def test_autocorrelation_is_high_for_stretches_and_none_without_variation():
    assert host_modes.autocorrelation(made_series(), 1) > 0.9
    assert host_modes.autocorrelation([FAST] * 50, 1) is None
    alternating = [FAST, SLOW] * 50
    assert host_modes.autocorrelation(alternating, 1) < -0.9


def test_window_rates_are_the_inverse_of_the_mean_ns_a_roundtrip():
    rates = host_modes.window_rates([1000.0, 3000.0, 2000.0, 2000.0, 9.0], 2)
    assert rates == pytest.approx([500_000.0, 500_000.0])  # the fifth slice makes no whole window


def test_a_probe_keeps_only_attempts_whose_probes_both_ran_fast():
    # each attempt: probe, 2 warmup slices, 3 window slices, probe = 7 slices
    first = [FAST] * 7
    second = [SLOW] + [FAST] * 6  # its probe before ran slow: set aside, though its window was fast
    third = [FAST] * 3 + [SLOW] * 3 + [FAST]  # a slow window between fast probes: kept (a probe misses it)
    gated = host_modes.gated_attempts(first + second + third, warmup_slices=2, window_slices=3, level=FAST)
    assert len(gated.every) == 3
    assert gated.kept == pytest.approx([1e9 / FAST, 1e9 / SLOW])


def test_chance_within_follows_the_suites_criterion():
    assert host_modes.chance_within([100.0] * 20, 7, 0.03) == 1.0
    assert host_modes.chance_within([50.0 + i for i in range(20)], 7, 0.03) == 0.0  # never 7 within ±1.8
    assert host_modes.chance_within([100.0] * 5, 7, 0.03) is None


def test_describe_reports_levels_stretches_and_windows():
    summary = host_modes.describe(made_series(), 1000, window_s=0.05, warmup_s=0.02, rounds=3, precision=0.03)
    assert summary["slices"] == 325 and summary["fast_level_ns"] == FAST
    assert summary["slow_share"] == pytest.approx(25 / 325, abs=1e-4)
    assert summary["slow_mode_median_ns"] == SLOW and summary["fast_mode_median_ns"] == FAST
    assert summary["slow_stretches"]["count"] == 2
    assert summary["slow_stretches"]["longest_s"] == pytest.approx(20 * 0.005)
    assert summary["windows"]["slices_per_window"] == 10 and summary["probed_attempts"]["warmup_slices"] == 4
    assert summary["probed_attempts"]["kept"] < summary["probed_attempts"]["attempts"]
    assert host_modes.interpretation(summary)
    with pytest.raises(ValueError):
        host_modes.describe([FAST] * 9, 1000, 0.2, 0.2, 7, 0.03)


def sentinel_processes() -> list[int]:
    """The host sentinels this test started (they carry its token): another test's, running beside it, are not."""
    found = []
    for process in processes_carrying(os.environ[TEST_TOKEN_ENV]):
        try:
            if os.readlink(f"/proc/{process.pid}/exe") == str(SENTINEL.resolve()):
                found.append(process.pid)
        except OSError:
            pass
    return found


@pytest.mark.skipif(not SENTINEL.exists(), reason="build/host_sentinel is built by native/build.sh (npm ci)")
def test_the_sentinel_answers_each_count_with_ns_and_refuses_a_bad_line():
    completed = subprocess.run([str(SENTINEL)], input="200\n300\nnot a count\n", capture_output=True, text=True,
                               timeout=30)
    assert completed.returncode == 1
    values = [int(line) for line in completed.stdout.split()]
    assert len(values) == 2 and all(value > 0 for value in values)
    assert completed.stderr.count("\n") == 1 and "expected a count" in completed.stderr


@pytest.mark.skipif(not SENTINEL.exists(), reason="build/host_sentinel is built by native/build.sh (npm ci)")
def test_the_benchmark_writes_its_slices_and_summary_and_leaves_no_process():
    before = set(sentinel_processes())
    completed = subprocess.run([sys.executable, "-m", "benchmarks.host_modes", "--duration", "0.5",
                                "--slice-roundtrips", "200", "--rounds", "3"], cwd=ROOT, capture_output=True,
                               text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr[-800:]
    report = json.loads(completed.stdout)
    assert report["slice_roundtrips"] == 200 and report["cpu"] in os.sched_getaffinity(0)
    assert len(report["slices_ns"]) == report["summary"]["slices"] >= 10
    assert all(value > 0 for value in report["slices_ns"])
    assert report["summary"]["windows"]["rounds"] == 3
    assert "fast level" in completed.stderr
    assert set(sentinel_processes()) <= before


def test_the_benchmark_refuses_a_cpu_not_ours_in_one_line():
    completed = subprocess.run([sys.executable, "-m", "benchmarks.host_modes", "--cpu", "4096"], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1 and "not one of ours" in completed.stderr


def test_probe_figures_count_the_cells_both_ways_in_the_same_run():
    from types import SimpleNamespace

    from pingpong.harness.results.records import HOST_SLOW_STATUS, Attempt, Cell

    def attempt(repeat, rate, status="ok", slow=False):
        return Attempt(repeat=repeat, status=status, reason=None, started_at="t", roundtrips_per_s=rate,
                       host_probe={"slow": slow})

    steady = Cell("s", "c", attempts=[attempt(1, 100.0), attempt(2, 50.0, HOST_SLOW_STATUS, True), attempt(2, 100.0),
                                      attempt(3, 101.0, slow=True)])
    unprobed = Cell("s", "d", attempts=[Attempt(repeat=r, status="ok", reason=None, started_at="t",
                                                roundtrips_per_s=100.0) for r in (1, 2, 3)])
    run = SimpleNamespace(cells=[steady, unprobed], configuration={"rounds": {"precision": 0.03}})
    figures = host_modes.probe_figures(run)
    assert (figures.probed, figures.set_aside, figures.slow_kept) == (4, 1, 1)
    assert (figures.cells, figures.within, figures.within_first) == (2, 2, 1)
    assert "1 of 4 attempts" in figures.sentence() and "2 of 2 cells" in figures.sentence()
    assert host_modes.probe_figures(SimpleNamespace(cells=[unprobed], configuration=run.configuration)) is None
    repeated = host_modes.probe_figures(SimpleNamespace(cells=[steady], configuration={"rounds": {"precision": None}}))
    assert repeated.within is None and "cells within" not in repeated.sentence()


def test_resume_refuses_a_run_measured_with_other_measurement_switches(tmp_path):
    """Raw windows and paced ones would be mixed in one file: --resume says so and stops."""
    argv = [sys.executable, str(ROOT / "run_bench.py"), "--servers", "raw-tcp-c", "--clients", "raw-tcp-c",
            "--no-figures", "--results-dir", str(tmp_path / "results"), "--repeat", "1", "--duration", "0.1",
            "--warmup", "0.1", "--host-figure", "off"]
    plain = {key: value for key, value in os.environ.items() if key != RAW_WINDOWS_ENV}
    first = subprocess.run(argv, cwd=ROOT, env={**plain, RAW_WINDOWS_ENV: "1"}, capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr[-800:]
    saved = next((tmp_path / "results").glob("2*.json"))
    refused = subprocess.run([*argv, "--resume", str(saved)], cwd=ROOT, env=plain, capture_output=True, text=True,
                             timeout=300)
    assert refused.returncode == 2
    assert f"measurement switches {{'{RAW_WINDOWS_ENV}': '1'}} (this command: {{}})" in refused.stderr
