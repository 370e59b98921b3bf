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


FLOORS = ("raw-tcp-python", "raw-tcp-c")


def matrix(factors=None, scale=1.0, floors=False, floor_scale=1.0):
    """Ten cells at 1,000/s ±1% (each its own level); B's cells are A's times scale, times factors[client]. With
    floors, four raw-TCP floor cells too (2 servers × 2 clients at 2,000/s ±1%), times floor_scale."""
    factors = factors or {}
    cells = [cell("s", client, *(scale * factors.get(client, 1.0) * (1000 + 40 * number) * jitter
                                 for jitter in (0.99, 1.0, 1.01)))
             for number, client in enumerate(CLIENTS)]
    if floors:
        cells += [cell(server, client, *(floor_scale * 2000 * jitter for jitter in (0.99, 1.0, 1.01)))
                  for server in FLOORS for client in FLOORS]
    return run_with(cells)


RUN_A = run_with([cell("s", "steady", 1000, 1010, 990), cell("s", "faster", 1000, 1010, 990),
                  cell("s", "slower", 1000, 1010, 990), cell("s", "single", 1000), cell("s", "gone", 500, 510),
                  Cell("s", "broken", attempts=[Attempt(repeat=1, status="not-ready", reason="x", started_at="t")])])
RUN_B = run_with([cell("s", "steady", 1020, 980, 1000), cell("s", "faster", 2000, 2020, 1990),
                  cell("s", "slower", 500, 505, 495), cell("s", "single", 1100), cell("s", "new", 700, 710),
                  cell("s", "broken", 100, 110)], compression="off")


def test_cells_in_one_run_only_and_a_run_without_floors():
    """Without raw-TCP floors nothing is corrected for drift, and the report says a shared shift cannot be told
    from drift; a cell is marked when its own bracket excludes 1; the lists and the settings that differ are kept."""
    comparison = compare_runs(RUN_A, RUN_B)
    by_client = {c.client: c for c in comparison.cells}
    assert by_client["faster"].ratio.value == pytest.approx(2.0, rel=0.01)
    assert by_client["slower"].ratio.value == pytest.approx(0.5, rel=0.01)
    assert by_client["steady"].ratio.low < 1 < by_client["steady"].ratio.high
    assert by_client["single"].verdict == "unknown" and by_client["single"].ratio.value == pytest.approx(1.1)
    assert {c.client: c.verdict for c in comparison.cells if c.client != "single"} == {
        "steady": "same", "faster": "faster", "slower": "slower"}
    assert by_client["slower"].change_at_least == pytest.approx(1 - 505 / 990)  # B's high over A's low
    assert comparison.drift is None and comparison.drift_cells == 0 and comparison.scope == "within one run"
    assert by_client["slower"].corrected == by_client["slower"].ratio
    assert comparison.only_in_a == [("s", "gone")] and comparison.only_in_b == [("s", "new")]
    assert comparison.not_comparable == [("s", "broken", "no successful repeat in run A")]
    assert comparison.setting_differences == {"compression": ("default", "off")}
    markdown = render_comparison(comparison, RUN_A, RUN_B, "a.json", "b.json")
    assert ("**Drift**: no raw-TCP floor was measured on both sides, so the ratios are not corrected for drift: a "
            "shift shared by all cells cannot be told from drift (across all 4 compared cells") in markdown
    assert "(within one run)" in markdown and "Intervals within one run" in markdown
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


def test_a_shift_the_floors_share_is_drift_not_a_regression():
    """Every cell, the raw-TCP floors too, 10% slower in B: the floors measure a drift of ×0.90, every WebSocket
    cell divided by it is unchanged, the floors are the drift's anchor (not judged), and a 5% gate passes."""
    a, b = matrix(floors=True), matrix(scale=0.9, floors=True, floor_scale=0.9)
    comparison = compare_runs(a, b)
    assert comparison.drift.value == pytest.approx(0.9) and comparison.drift_cells == 4
    assert all(c.ratio.excludes_one() for c in comparison.cells)
    assert {c.client: c.verdict for c in comparison.cells if c.server == "s"} == dict.fromkeys(CLIENTS, "same")
    assert {c.verdict for c in comparison.cells if c.floor} == {"anchor"}
    corrected = next(c for c in comparison.cells if c.client == "c0").corrected
    assert corrected.value == pytest.approx(1.0) and corrected.kind == "drift-corrected"
    assert corrected.low == pytest.approx(0.99 / 1.01) and corrected.high == pytest.approx(1.01 / 0.99)
    verdict = gate(comparison, 5)
    assert verdict.passed and verdict.drift_corrected
    markdown = render_comparison(comparison, a, b, "a.json", "b.json", verdict)
    assert ("**Drift**, measured on the 4 raw-TCP floor cells (no WebSocket stack change touches them): B/A ×0.90 "
            "(0.90–0.90, range of 4 (covers the median 87.5%)); every other cell's ratio is divided by it") in markdown
    assert "0 of 10 judged cells differ beyond their noise and the drift." in markdown and "**Passed**" in markdown


def test_a_regression_of_every_websocket_cell_fails_when_the_floors_did_not_move():
    """Every WebSocket cell 10% slower, the floors steady: not drift but a regression of the stack, so each cell
    is slower by at least 1 − 0.9 × 1.01 / 0.99 ≈ 8.2%: a 5% gate fails all ten, a 10% gate passes."""
    a, b = matrix(floors=True), matrix(scale=0.9, floors=True)
    comparison = compare_runs(a, b)
    assert comparison.drift.value == pytest.approx(1.0)
    assert [c.verdict for c in comparison.cells if not c.floor] == ["slower"] * 10
    failing = gate(comparison, 5)
    assert sorted(c for _, c, _ in failing.failed) == CLIENTS
    assert all(at_least == pytest.approx(100 * (1 - 0.9 * 1.01 / 0.99)) for _, _, at_least in failing.failed)
    assert gate(comparison, 10).passed


def test_without_floors_a_uniform_slowdown_fails_and_says_why():
    """No floors, every cell 10% slower: nothing is corrected, so the 5% gate fails every cell, and the gate's
    text says that a slower machine cannot be told apart from such a regression."""
    a, b = matrix(), matrix(scale=0.9)
    comparison = compare_runs(a, b)
    assert comparison.drift is None and comparison.shift.value == pytest.approx(0.9)
    verdict = gate(comparison, 5)
    assert len(verdict.failed) == 10 and not verdict.drift_corrected
    markdown = render_comparison(comparison, a, b, "a.json", "b.json", verdict)
    assert "**Failed**: 10 cell(s) slower than A by more than 5% beyond their noise" in markdown
    assert "Not corrected for drift: no raw-TCP floor was measured on both sides" in markdown


def test_one_cell_30_percent_slower_is_marked_and_the_gate_is_the_size_of_the_regression():
    """Nine steady cells and one 30% slower, floors steady: the slow cell is ▼, slower by at least
    1 − 0.7 × 1.01 / 0.99 ≈ 28.6% (its bracket's top, drift at 1): a gate fails it up to 28%, passes it from 29%."""
    a, b = matrix(floors=True), matrix({"c3": 0.7}, floors=True)
    comparison = compare_runs(a, b)
    slow = next(c for c in comparison.cells if c.client == "c3")
    assert slow.verdict == "slower" and slow.change_at_least == pytest.approx(1 - 0.7 * 1.01 / 0.99)
    assert [c.client for c in comparison.cells if c.verdict not in ("same", "anchor")] == ["c3"]
    failing = gate(comparison, 10)
    assert not failing.passed and [(s, c) for s, c, _ in failing.failed] == [("s", "c3")]
    assert not gate(comparison, 28).passed and gate(comparison, 29).passed
    markdown = render_comparison(comparison, a, b, "a.json", "b.json", failing)
    row = next(line for line in markdown.splitlines() if line.startswith("| s |"))
    assert row.count("▼") == 1 and "▲" not in row
    assert "1 of 10 judged cells differ beyond their noise and the drift." in markdown
    assert "**Failed**: 1 cell(s) slower than A by more than 10% beyond their noise" in markdown
    assert "- s × c3: at least 28.6% slower" in markdown


def test_a_regression_smaller_than_the_threshold_plus_the_noise_passes():
    """One cell 10% slower with ±1% noise: slower by at least 8.2%, so --fail-above 5 fails it and 10 does not."""
    comparison = compare_runs(matrix(floors=True), matrix({"c5": 0.9}, floors=True))
    assert [c for _, c, _ in gate(comparison, 5).failed] == ["c5"]
    assert gate(comparison, 8).failed and gate(comparison, 10).passed


def test_floors_are_found_by_the_protocol_the_run_recorded():
    """A floor whose name does not say raw-tcp is still one when the run's manifest entries say protocol raw-tcp;
    a raw-tcp-named server facing a WebSocket client is not a floor."""
    implementations = {"server": {"c-relay": {"protocol": "raw-tcp"}, "s": {"protocol": "websocket"}},
                       "client": {"c-driver": {"protocol": "raw-tcp"}, "c0": {"protocol": "websocket"}}}
    rates = (990, 1000, 1010)
    a = run_with([cell("c-relay", "c-driver", *rates), cell("s", "c0", *rates), cell("raw-tcp-x", "c0", *rates)])
    b = run_with([cell("c-relay", "c-driver", *(r * 0.8 for r in rates)), cell("s", "c0", *(r * 0.8 for r in rates)),
                  cell("raw-tcp-x", "c0", *rates)])
    a.implementations = b.implementations = implementations
    comparison = compare_runs(a, b)
    assert comparison.drift_cells == 1 and comparison.drift.value == pytest.approx(0.8)
    by_key = {(c.server, c.client): c for c in comparison.cells}
    assert by_key[("c-relay", "c-driver")].verdict == "anchor" and not by_key[("raw-tcp-x", "c0")].floor
    assert by_key[("s", "c0")].verdict == "same"  # 20% slower, as the floor: drift
    assert by_key[("raw-tcp-x", "c0")].verdict == "faster"  # steady while the floor slowed by 20%


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
    """--fail-above 10: exit 1 with one slow cell; exit 0 when every cell and the floors slowed together (drift),
    exit 1 when the WebSocket cells slowed and the floors did not; the JSON has the drift, the scope and the gate."""
    slow = compare_command(*write_runs(tmp_path, matrix(floors=True), matrix({"c3": 0.7}, floors=True)),
                           "--fail-above", "10", "--format", "json")
    assert slow.returncode == 1, slow.stderr
    printed = json.loads(slow.stdout)
    assert printed["format_version"] == 4 and printed["scope"] == "within one run"
    assert printed["gate"]["passed"] is False and [c[:2] for c in printed["gate"]["failed"]] == [["s", "c3"]]
    assert printed["drift"]["value"] == pytest.approx(1.0) and printed["drift_cells"] == 4
    assert {c["client"]: c["verdict"] for c in printed["cells"]}["c3"] == "slower"
    drift = compare_command(*write_runs(tmp_path, matrix(floors=True), matrix(scale=0.8, floors=True,
                                                                              floor_scale=0.8)), "--fail-above", "5")
    assert drift.returncode == 0, drift.stderr
    assert "**Passed**" in drift.stdout and "B/A ×0.80" in drift.stdout
    shared = compare_command(*write_runs(tmp_path, matrix(floors=True), matrix(scale=0.8, floors=True)),
                             "--fail-above", "5")
    assert shared.returncode == 1 and "**Failed**: 10 cell(s)" in shared.stdout
    without = compare_command(*write_runs(tmp_path, matrix(), matrix({"c3": 0.7})), "--format", "json")
    assert without.returncode == 0 and json.loads(without.stdout)["gate"] is None


def write_sides(tmp_path, a_runs, b_runs):
    """Files a1.json ... and b1.json ...: the arguments of compare A1 A2 ... --against B1 B2 ..."""
    paths = {}
    for side, runs in (("a", a_runs), ("b", b_runs)):
        paths[side] = []
        for number, run in enumerate(runs, 1):
            path = tmp_path / f"{side}{number}.json"
            path.write_text(json.dumps(run.to_dict()))
            paths[side].append(str(path))
    return [*paths["a"], "--against", *paths["b"]]


def test_several_runs_a_side_compare_run_medians_across_runs(tmp_path):
    """Three runs a side, runs apart by ±2% (each run's own noise ±1%): every cell's interval is the two-sample
    interval of the run medians (90% with 3 and 3), a 15% regression of c3 fails a 5% gate, and the output says
    'across 3 and 3 runs'."""
    levels = (0.98, 1.0, 1.02)
    a_runs = [matrix(scale=level, floors=True, floor_scale=level) for level in levels]
    b_runs = [matrix({"c3": 0.85}, scale=level, floors=True, floor_scale=level) for level in levels]
    arguments = write_sides(tmp_path, a_runs, b_runs)
    completed = compare_command(*arguments, "--fail-above", "5", "--format", "json")
    assert completed.returncode == 1, completed.stderr
    printed = json.loads(completed.stdout)
    assert printed["scope"] == "across 3 and 3 runs"
    cells = {c["client"]: c for c in printed["cells"] if c["server"] == "s"}
    assert cells["c3"]["a_n"] == 3 and cells["c3"]["ratio"]["kind"] == "two-sample"
    assert cells["c3"]["ratio"]["coverage"] == pytest.approx(0.9)
    assert cells["c3"]["ratio"]["high"] == pytest.approx(0.85 * 1.02 / 0.98)  # every pairwise ratio's range
    assert [c[:2] for c in printed["gate"]["failed"]] == [["s", "c3"]]
    assert {c["verdict"] for name, c in cells.items() if name != "c3"} == {"same"}
    markdown = compare_command(*arguments, "--fail-above", "5")
    assert "(across 3 and 3 runs)" in markdown.stdout and "Intervals across 3 and 3 runs" in markdown.stdout
    assert "two-sample interval of the run medians, 3+ runs a side (covers 90% when the runs differ by one " \
           "factor)" in markdown.stdout


def test_runs_of_one_side_with_other_settings_are_refused_in_one_line(tmp_path):
    """A side's runs must share their settings (a seed may differ): one line, exit 2, naming the setting."""
    a_runs = [matrix(), run_with(matrix().cells, compression="off")]
    completed = compare_command(*write_sides(tmp_path, a_runs, [matrix(), matrix()]))
    assert completed.returncode == 2 and completed.stderr.count("\n") == 1
    assert "differ in compression ('default' vs 'off'): combine runs of the same settings" in completed.stderr
    seeds = [run_with(matrix().cells, rounds={"seed": seed}) for seed in (1, 2)]
    assert compare_command(*write_sides(tmp_path, seeds, seeds)).returncode == 0
    lonely = compare_command(str(tmp_path / "a1.json"))
    assert lonely.returncode == 2 and "compare takes two files" in lonely.stderr


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
        "steady": "same", "faster": "faster", "slower": "slower", "single": "unknown"}
    (tmp_path / "bad.json").write_text("{}")
    bad = compare_command(paths[0], str(tmp_path / "bad.json"))
    assert bad.returncode == 2 and "is not a results file of this suite" in bad.stderr
    assert bad.stderr.count("\n") == 1


def test_runs_of_two_workloads_are_not_compared(tmp_path):
    """Deliveries/s against roundtrips/s would be a ratio of two different things: one line, exit 2."""
    completed = compare_command("results/reference/2026-11-22-default-matrix.json.xz",
                                "results/reference/2026-11-22-broadcast-receivers10.json.xz")
    assert completed.returncode == 2 and completed.stderr.count("\n") == 1
    assert "deliveries/s (broadcast)" in completed.stderr and "compare runs of the same workload" in completed.stderr


def test_two_broadcast_runs_compare_in_deliveries(tmp_path):
    completed = compare_command("results/reference/2026-11-22-broadcast-receivers10.json.xz",
                                "results/reference/2026-11-22-broadcast-receivers100.json.xz")
    assert completed.returncode == 0, completed.stderr
    assert "median deliveries/s of B over A's" in completed.stdout and "receivers 10 → 100" in completed.stdout
