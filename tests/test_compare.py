"""compare A.json B.json on fixed result files: ratios, their marks, cells in one run only, exit codes."""

import json
import subprocess
import sys

import pytest

from pingpong.harness.compare import compare_runs, render_comparison
from pingpong.harness.results import Attempt, Cell, RunResult
from tests.conftest import ROOT

CONFIG = {"repeat": 3, "duration_s": 5, "warmup_s": 1, "loop": "auto", "compression": "default",
          "payload_size": 4, "payload_kind": "text-ascii", "pinned": True}


def ok(repeat, rate):
    return Attempt(repeat=repeat, status="ok", reason=None, started_at="t", roundtrips=int(rate), elapsed_s=1.0,
                   roundtrips_per_s=rate)


def run_with(cells, **config):
    return RunResult(started_at="2026-11-21T00:00:00+00:00", command_line=[], configuration={**CONFIG, **config},
                     environment={}, implementations={}, cells=cells)


def cell(server, client, *rates):
    return Cell(server, client, attempts=[ok(i + 1, rate) for i, rate in enumerate(rates)])


RUN_A = run_with([cell("s", "steady", 1000, 1010, 990), cell("s", "faster", 1000, 1010, 990),
                  cell("s", "slower", 1000, 1010, 990), cell("s", "single", 1000), cell("s", "gone", 500, 510),
                  Cell("s", "broken", attempts=[Attempt(repeat=1, status="not-ready", reason="x", started_at="t")])])
RUN_B = run_with([cell("s", "steady", 1020, 980, 1000), cell("s", "faster", 2000, 2020, 1990),
                  cell("s", "slower", 500, 505, 495), cell("s", "single", 1100), cell("s", "new", 700, 710),
                  cell("s", "broken", 100, 110)], compression="off")


def test_ratios_and_marks():
    comparison = compare_runs(RUN_A, RUN_B)
    by_client = {c.client: c for c in comparison.cells}
    assert by_client["faster"].ratio.value == pytest.approx(2.0, rel=0.01) and by_client["faster"].verdict == "faster"
    assert by_client["slower"].ratio.value == pytest.approx(0.5, rel=0.01) and by_client["slower"].verdict == "slower"
    assert by_client["steady"].verdict == "same" and by_client["steady"].ratio.low < 1 < by_client["steady"].ratio.high
    assert by_client["single"].verdict == "unknown" and by_client["single"].ratio.value == pytest.approx(1.1)
    assert comparison.only_in_a == [("s", "gone")] and comparison.only_in_b == [("s", "new")]
    assert comparison.not_comparable == [("s", "broken", "no successful repeat in run A")]
    assert comparison.setting_differences == {"compression": ("default", "off")}


def test_markdown_marks_only_the_cells_beyond_the_noise():
    markdown = render_comparison(compare_runs(RUN_A, RUN_B), RUN_A, RUN_B, "a.json", "b.json")
    row = next(line for line in markdown.splitlines() if line.startswith("| s |"))
    assert row.count("▲") == 1 and row.count("▼") == 1 and row.count("?") == 1
    assert "2 of 4 compared cells differ beyond the noise." in markdown
    assert "Only in A: s × gone." in markdown and "Only in B: s × new." in markdown
    assert "compression 'default' → 'off'" in markdown


def test_compare_command_reads_two_files_and_rejects_a_bad_one(tmp_path):
    paths = []
    for name, run in (("a.json", RUN_A), ("b.json", RUN_B)):
        (tmp_path / name).write_text(json.dumps(run.to_dict()))
        paths.append(str(tmp_path / name))
    completed = subprocess.run([sys.executable, "run_bench.py", "compare", *paths, "--format", "json"], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    printed = json.loads(completed.stdout)
    assert {c["client"]: c["verdict"] for c in printed["cells"]} == {
        "steady": "same", "faster": "faster", "slower": "slower", "single": "unknown"}
    (tmp_path / "bad.json").write_text("{}")
    bad = subprocess.run([sys.executable, "run_bench.py", "compare", paths[0], str(tmp_path / "bad.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not a results file of this suite" in bad.stderr
    assert bad.stderr.count("\n") == 1
