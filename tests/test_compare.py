"""compare A.json B.json on fixed result files: ratios, the drift between the runs, marks, the gate, exit codes."""

import json
import subprocess
import sys

import pytest

from pingpong.harness.commands.compare import compare_runs, gate, render_comparison
from pingpong.harness.results.records import Attempt, Cell, RunResult
from tests.conftest import ROOT

CONFIG = {"repeat": 3, "duration_s": 5, "warmup_s": 1, "loop": "auto", "compression": "default",
          "payload_size": 4, "payload_kind": "text-ascii", "pinned": True}
CLIENTS = [f"c{number}" for number in range(10)]


def ok(repeat, rate):
    return Attempt(repeat=repeat, status="ok", reason=None, started_at="t", roundtrips=int(rate), elapsed_s=1.0,
                   roundtrips_per_s=rate)


def run_with(cells, **config):
    return RunResult(started_at="2026-11-21T00:00:00+00:00", command_line=[], configuration={**CONFIG, **config},
                     environment={}, implementations={}, cells=cells)


def cell(server, client, *rates):
    return Cell(server, client, attempts=[ok(i + 1, rate) for i, rate in enumerate(rates)])


def matrix(factors=None, scale=1.0):
    """Ten cells at 1,000/s ±1% (each its own level); B's cells are A's times scale, times factors[client]."""
    factors = factors or {}
    return run_with([cell("s", client, *(scale * factors.get(client, 1.0) * (1000 + 40 * number) * jitter
                                         for jitter in (0.99, 1.0, 1.01)))
                     for number, client in enumerate(CLIENTS)])


RUN_A = run_with([cell("s", "steady", 1000, 1010, 990), cell("s", "faster", 1000, 1010, 990),
                  cell("s", "slower", 1000, 1010, 990), cell("s", "single", 1000), cell("s", "gone", 500, 510),
                  Cell("s", "broken", attempts=[Attempt(repeat=1, status="not-ready", reason="x", started_at="t")])])
RUN_B = run_with([cell("s", "steady", 1020, 980, 1000), cell("s", "faster", 2000, 2020, 1990),
                  cell("s", "slower", 500, 505, 495), cell("s", "single", 1100), cell("s", "new", 700, 710),
                  cell("s", "broken", 100, 110)], compression="off")


def test_cells_in_one_run_only_and_the_few_shared_ones():
    """With 4 compared cells the drift's interval is the range of their ratios: no cell can lie outside it, so
    none is marked, and the report says why; the lists and the settings that differ are kept."""
    comparison = compare_runs(RUN_A, RUN_B)
    by_client = {c.client: c for c in comparison.cells}
    assert by_client["faster"].ratio.value == pytest.approx(2.0, rel=0.01)
    assert by_client["slower"].ratio.value == pytest.approx(0.5, rel=0.01)
    assert by_client["steady"].ratio.low < 1 < by_client["steady"].ratio.high
    assert by_client["single"].verdict == "unknown" and by_client["single"].ratio.value == pytest.approx(1.1)
    assert {c.verdict for c in comparison.cells if c.client != "single"} == {"same"}
    assert (comparison.drift.low, comparison.drift.high) == (by_client["slower"].ratio.value,
                                                             by_client["faster"].ratio.value)
    assert comparison.only_in_a == [("s", "gone")] and comparison.only_in_b == [("s", "new")]
    assert comparison.not_comparable == [("s", "broken", "no successful repeat in run A")]
    assert comparison.setting_differences == {"compression": ("default", "off")}
    markdown = render_comparison(comparison, RUN_A, RUN_B, "a.json", "b.json")
    assert "across all 4 compared cells" in markdown and "compare marks a cell only when 9 or more" in markdown
    assert "Only in A: s × gone." in markdown and "Only in B: s × new." in markdown
    assert "compression 'default' → 'off'" in markdown


def test_pairs_skipped_in_both_runs_are_not_failures_and_are_not_listed_one_by_one():
    """compare A A of a run with incompatible pairs: they are counted as skipped by design, never listed as 'no
    successful repeat'; a pair skipped in one run only is not comparable, with that run's reason."""
    skip = lambda client, why: Cell("s", client, skipped=why)  # noqa: E731
    a = run_with([cell("s", "c1", 1000, 1010, 990), skip("raw", "server speaks websocket, client speaks raw-tcp"),
                  skip("tls-less", "client tls-less does not support --tls")])
    b = run_with([cell("s", "c1", 1000, 1010, 990), skip("raw", "server speaks websocket, client speaks raw-tcp"),
                  cell("s", "tls-less", 900, 910, 905)])
    same = compare_runs(a, a)
    assert same.skipped == [("s", "raw"), ("s", "tls-less")] and same.not_comparable == []
    markdown = render_comparison(same, a, a, "a.json", "a.json")
    assert "no successful repeat" not in markdown and "s × raw" not in markdown
    assert "Compared: 1 cell measured in both runs; 2 pairs skipped in both" in markdown
    other = compare_runs(a, b)
    assert other.skipped == [("s", "raw")]
    assert other.not_comparable == [("s", "tls-less", "skipped in run A: client tls-less does not support --tls")]


def test_a_uniform_slowdown_is_drift_not_a_regression():
    """B is 10% slower in every cell: each cell's own interval excludes 1, but all lie within the drift's, so no
    cell is marked and a 5% gate passes; the report names the drift and says the gate does not judge it."""
    a, b = matrix(), matrix(scale=0.9)
    comparison = compare_runs(a, b)
    assert all(c.ratio.excludes_one() for c in comparison.cells)
    assert {c.verdict for c in comparison.cells} == {"same"}
    assert comparison.drift.value == pytest.approx(0.9) and comparison.drift.kind == "order-statistic"
    verdict = gate(comparison, 5)
    assert verdict.passed and verdict.failed == []
    markdown = render_comparison(comparison, a, b, "a.json", "b.json", verdict)
    assert "**Drift**: the runs differ by ×0.90 (0.90–0.90, the median of the cells' ratios and its 95% CI (order " \
           "stats, 97.9%)) across all 10 compared cells: a change smaller than that cannot be told from drift." \
           in markdown
    assert "0 of 10 compared cells differ beyond their noise and the drift." in markdown
    assert "**Passed**" in markdown and "The runs as a whole differ by ×0.90, more than 5%" in markdown


def test_one_cell_30_percent_slower_is_marked_and_fails_a_10_percent_gate():
    """Nine steady cells and one 30% slower: the drift stays at ×1.00, the slow cell is ▼, and the gate fails at
    10% (it lies about 29% beyond noise and drift) but passes at 40%."""
    a, b = matrix(), matrix({"c3": 0.7})
    comparison = compare_runs(a, b)
    slow = next(c for c in comparison.cells if c.client == "c3")
    assert slow.verdict == "slower" and slow.beyond == pytest.approx(1 - 0.7 * 1.01 / 0.99 / 1.0, abs=0.01)
    assert [c.client for c in comparison.cells if c.verdict != "same"] == ["c3"]
    assert comparison.drift.value == pytest.approx(1.0)
    failing = gate(comparison, 10)
    assert not failing.passed and [(s, c) for s, c, _ in failing.failed] == [("s", "c3")]
    assert gate(comparison, 40).passed
    markdown = render_comparison(comparison, a, b, "a.json", "b.json", failing)
    row = next(line for line in markdown.splitlines() if line.startswith("| s |"))
    assert row.count("▼") == 1 and "▲" not in row
    assert "1 of 10 compared cells differ beyond their noise and the drift." in markdown
    assert "**Failed**: 1 cell(s) slower than A by more than 10% beyond their noise and the drift:" in markdown
    assert "- s × c3: 28.6% beyond" in markdown  # 1 − 0.7 × 1.01 / 0.99: its bracket's top, drift at 1


def write_runs(tmp_path, a, b):
    paths = []
    for name, run in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(run.to_dict()))
        paths.append(str(tmp_path / name))
    return paths


def compare_command(*args):
    return subprocess.run([sys.executable, "run_bench.py", "compare", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_the_gate_sets_the_exit_code_and_its_verdict_is_in_the_json(tmp_path):
    """--fail-above 10: exit 1 with one slow cell, 0 with a uniform slowdown; the JSON has the drift and the gate."""
    slow = compare_command(*write_runs(tmp_path, matrix(), matrix({"c3": 0.7})), "--fail-above", "10",
                           "--format", "json")
    assert slow.returncode == 1, slow.stderr
    printed = json.loads(slow.stdout)
    assert printed["gate"]["passed"] is False and [c[:2] for c in printed["gate"]["failed"]] == [["s", "c3"]]
    assert printed["drift"]["value"] == pytest.approx(1.0) and printed["drift"]["n"] == 10
    assert {c["client"]: c["verdict"] for c in printed["cells"]}["c3"] == "slower"
    uniform = compare_command(*write_runs(tmp_path, matrix(), matrix(scale=0.9)), "--fail-above", "5")
    assert uniform.returncode == 0, uniform.stderr
    assert "**Passed**" in uniform.stdout and "the runs differ by ×0.90" in uniform.stdout
    without = compare_command(*write_runs(tmp_path, matrix(), matrix({"c3": 0.7})), "--format", "json")
    assert without.returncode == 0 and json.loads(without.stdout)["gate"] is None


@pytest.mark.parametrize("value, words", [("-5", "--fail-above takes a percentage of 0 or more, not -5"),
                                          ("ten", "argument --fail-above: invalid float value: 'ten'"),
                                          ("nan", "--fail-above takes a percentage of 0 or more, not nan")])
def test_a_bad_threshold_is_one_line_and_exit_2(tmp_path, value, words):
    completed = compare_command(*write_runs(tmp_path, matrix(), matrix()), f"--fail-above={value}")
    assert completed.returncode == 2 and words in completed.stderr, completed.stderr
    assert completed.stderr.count("\n") == 1


def test_compare_command_reads_two_files_and_rejects_a_bad_one(tmp_path):
    paths = write_runs(tmp_path, RUN_A, RUN_B)
    completed = compare_command(*paths, "--format", "json")
    assert completed.returncode == 0, completed.stderr
    printed = json.loads(completed.stdout)
    assert {c["client"]: c["verdict"] for c in printed["cells"]} == {
        "steady": "same", "faster": "same", "slower": "same", "single": "unknown"}
    (tmp_path / "bad.json").write_text("{}")
    bad = compare_command(paths[0], str(tmp_path / "bad.json"))
    assert bad.returncode == 2 and "is not a results file of this suite" in bad.stderr
    assert bad.stderr.count("\n") == 1


def test_runs_of_two_workloads_are_not_compared(tmp_path):
    """Deliveries/s against roundtrips/s would be a ratio of two different things: one line, exit 2."""
    completed = compare_command("results/reference/2026-11-22-default-matrix.json",
                                "results/reference/2026-11-22-broadcast-receivers10.json")
    assert completed.returncode == 2 and completed.stderr.count("\n") == 1
    assert "deliveries/s (broadcast)" in completed.stderr and "compare runs of the same workload" in completed.stderr


def test_two_broadcast_runs_compare_in_deliveries(tmp_path):
    completed = compare_command("results/reference/2026-11-22-broadcast-receivers10.json",
                                "results/reference/2026-11-22-broadcast-receivers100.json")
    assert completed.returncode == 0, completed.stderr
    assert "median deliveries/s of B over A's" in completed.stdout and "receivers 10 → 100" in completed.stdout
