"""Runs of the same settings combined (report A B C), the two-sample interval across runs, and the gate's power
benchmark's pure functions, on synthetic results files."""

import json
import subprocess
import sys

import pytest

from benchmarks.gate_power import caught_fraction, false_alarms, slowed, websocket_cells
from pingpong.harness.analysis.replication import combine, first_setting_difference
from pingpong.harness.analysis.stats import ratio_of_runs, shift_interval_rank
from pingpong.harness.commands.compare import compare_runs
from pingpong.harness.results.records import Attempt, Cell, RunResult
from tests.conftest import ROOT

CONFIG = {"repeat": 3, "duration_s": 0.2, "warmup_s": 0.1, "loop": "auto", "compression": "default",
          "payload_size": 4, "payload_kind": "text-ascii", "pinned": True, "rounds": {"seed": 1}}


def ok(repeat, rate):
    return Attempt(repeat=repeat, status="ok", reason=None, started_at="t", roundtrips=int(rate), elapsed_s=1.0,
                   roundtrips_per_s=rate)


def cell(server, client, *rates):
    return Cell(server, client, attempts=[ok(i + 1, rate) for i, rate in enumerate(rates)])


def run_with(cells, started="2026-11-26T00:00:00+00:00", **config):
    return RunResult(started_at=started, command_line=[], configuration={**CONFIG, **config}, environment={},
                     implementations={}, cells=cells)


def three_runs():
    """Three runs: cell s × c at medians 1,000, 1,100 and 900 (three rounds each); s × d only in the first two."""
    return [run_with([cell("s", "c", 990, 1000, 1010), cell("s", "d", 500, 505, 510)], rounds={"seed": 1}),
            run_with([cell("s", "c", 1100, 1080, 1120), cell("s", "d", 520, 525, 530)], rounds={"seed": 2}),
            run_with([cell("s", "c", 900, 950, 880), Cell("s", "d", skipped="not today")], rounds={"seed": 3})]


def test_three_runs_combine_into_the_median_of_run_medians_with_their_range():
    """Per cell, one median per run; the figure is their median and the interval their range, which covers the
    true median 75% with 3 runs and 50% with 2 (a cell missing in a run has fewer)."""
    replication = combine(three_runs(), ["a.json", "b.json", "c.json"])
    c, d = replication.cell("s", "c"), replication.cell("s", "d")
    assert c.run_medians == (1000, 1100, 900) and c.median == 1000 and c.runs == 3
    assert (c.interval.low, c.interval.high, c.interval.coverage) == (900, 1100, 0.75)
    assert c.interval_label() == "range of 3 (covers the median 75%)"
    assert d.run_medians == (505, 525, None) and d.runs == 2 and d.interval.coverage == 0.5
    assert replication.scope == "across 3 runs"


def test_runs_differ_only_in_what_does_not_shape_the_figures():
    """A different seed or start time is no difference; a different payload size is, named in one line."""
    runs = three_runs()
    assert first_setting_difference(runs, ["a", "b", "c"]) is None
    other = run_with(runs[0].cells, payload_size=1024)
    assert first_setting_difference([runs[0], other], ["a", "b"]) == (
        "a and b differ in payload_size (4 vs 1024): combine runs of the same settings")


def report_command(*args):
    return subprocess.run([sys.executable, "run_bench.py", "report", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def write(tmp_path, runs):
    paths = []
    for number, run in enumerate(runs, 1):
        path = tmp_path / f"run{number}.json"
        path.write_text(json.dumps(run.to_dict()))
        paths.append(str(path))
    return paths


def test_report_of_several_files_shows_the_combined_view(tmp_path):
    """report A B C: the matrix of medians of run medians with the interval across 3 runs and its coverage, the
    run medians listed; JSON has the same; a CSV of several runs is refused in one line."""
    paths = write(tmp_path, three_runs())
    markdown = report_command(*paths, "--format", "md")
    assert markdown.returncode == 0, markdown.stderr
    assert "# 3 runs combined (across 3 runs)" in markdown.stdout
    assert "the interval across 3 runs, the order-statistic interval of the run medians: range of 3 (covers the " \
           "median 75%)" in markdown.stdout
    assert "| s | 1,000 [900–1,100] | 515 [505–525, range of 2 (covers the median 50%)] (2 runs) |" in markdown.stdout
    assert "| s × c | 1,000 | 1,100 | 900 | 1,000 | 900–1,100 (range of 3 (covers the median 75%)) |" \
        in markdown.stdout
    printed = json.loads(report_command(*paths, "--format", "json").stdout)
    assert printed["interval_scope"] == "across 3 runs" and len(printed["runs"]) == 3
    assert printed["cells"][1]["run_medians"] == [505, 525, None] and printed["cells"][1]["runs"] == 2
    assert printed["cells"][0]["interval"]["coverage"] == 0.75
    csv = report_command(*paths, "--format", "csv")
    assert csv.returncode == 2 and csv.stderr.count("\n") == 1 and "not csv" in csv.stderr


def test_report_refuses_runs_of_other_settings_and_keeps_one_file_as_it_was(tmp_path):
    runs = three_runs()
    paths = write(tmp_path, [runs[0], run_with(runs[1].cells, loop="uvloop")])
    refused = report_command(*paths)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "differ in loop ('auto' vs 'uvloop')" in refused.stderr
    single = report_command(paths[0], "--format", "json")
    assert single.returncode == 0 and json.loads(single.stdout)["cells"][0]["summary"]["status"] == "ok"


def test_the_two_sample_interval_has_the_mann_whitney_ranks():
    """3 and 3 runs: every pairwise ratio's range, covering 90% under a shift; 5 and 5: the 3rd smallest to the
    3rd largest of 25 ratios, 96.8%; 1 run on a side: no interval."""
    assert shift_interval_rank(3, 3) == (1, pytest.approx(0.9))
    assert shift_interval_rank(2, 2) == (1, pytest.approx(2 / 3))
    assert shift_interval_rank(5, 5) == (3, pytest.approx(1 - 2 * 4 / 252))
    ratio = ratio_of_runs([2.0, 2.2, 1.8], [1.0, 1.1, 0.9])
    assert ratio.value == 2.0 and (ratio.low, ratio.high) == (pytest.approx(1.8 / 1.1), pytest.approx(2.2 / 0.9))
    top, bottom = [1.0, 1.01, 1.02, 1.03, 1.04], [1.0, 1.001, 1.002, 1.003, 1.004]
    pairwise = sorted(t / b for t in top for b in bottom)
    five = ratio_of_runs(top, bottom)
    assert (five.low, five.high) == (pairwise[2], pairwise[22]) and five.coverage == pytest.approx(0.968, abs=1e-3)
    assert ratio_of_runs([1.0], [1.0, 1.1]).low is None


def floors_and_websocket(scale=1.0, floor_scale=1.0):
    cells = [cell("raw-tcp-c", "raw-tcp-c", *(floor_scale * r for r in (1990, 2000, 2010)))]
    cells += [cell("s", f"c{n}", *(scale * r for r in (990, 1000, 1010))) for n in range(4)]
    return run_with(cells)


def test_gate_power_injects_a_slowdown_and_counts_what_the_gate_catches():
    """The benchmark's pure parts: a slowdown multiplies B's rates of the chosen cells only; the WebSocket cells
    leave the floors out; a pair of equal runs raises no alarm, a 20% slowdown of every WebSocket cell is caught
    at 5% and 10% (≥ 17.6% beyond ±1% noise) but not at 20%."""
    a, b = floors_and_websocket(), floors_and_websocket()
    assert websocket_cells(a) == [("s", f"c{n}") for n in range(4)]
    slower = slowed(b, [("s", "c1")], 0.1)
    assert slower.cell("s", "c1").rates() == pytest.approx([891, 900, 909]) and b.cell("s", "c1").rates()[0] == 990
    assert slower.cell("s", "c0").rates() == b.cell("s", "c0").rates()
    assert false_alarms([(a, b)], [3, 5]) == {3: {"pairs": 0.0, "cells": 0.0}, 5: {"pairs": 0.0, "cells": 0.0}}
    cells = websocket_cells(a)
    assert caught_fraction([(a, b)], cells, 0.2, 5) == 1.0 and caught_fraction([(a, b)], cells, 0.2, 20) == 0.0
    assert caught_fraction([(a, b)], [("s", "c2")], 0.2, 10) == 1.0
    comparison = compare_runs(a, slowed(b, cells, 0.2))
    assert comparison.drift_cells == 1 and comparison.drift.value == pytest.approx(1.0)


def test_agreement_counts_the_cells_whose_every_run_median_is_within_the_tolerance_of_their_median():
    """Three runs: one cell steady (1.00, 1.02, 0.99), one whose third run is 10% slow: 1 of 2 within ±5%."""
    from pingpong.harness.analysis.replication import agreement
    runs = [{("a", "b"): 100.0, ("c", "d"): 200.0}, {("a", "b"): 102.0, ("c", "d"): 200.0},
            {("a", "b"): 99.0, ("c", "d"): 180.0, ("e", "f"): 5.0}]
    found = agreement(runs, 0.05)
    assert (found.cells, found.within, found.runs) == (2, 1, 3)
    assert found.per_cell["c × d"] == [1.0, 1.0, 0.9]
    assert agreement(runs, 0.05, {("a", "b")}).within == 1
