"""What a server keeps of each CPU at N over N = 1 (analysis/per_cpu.py), its table in every --workers sweep, and
`python -m benchmarks.per_cpu_keeping --from`: the committed by-room sweep of 2026-11-26 (real figures) read back as
the docs give it, two runs pooled round by round, and bad input refused in one line."""

import json
import subprocess
import sys

import pytest

from pingpong.harness.analysis.per_cpu import KEPT_AT_LEAST, keeping, render_keeping
from pingpong.harness.commands.run import summarize_run
from pingpong.harness.commands.scaling import sweep_runs
from pingpong.harness.report.sweep import render_sweep_markdown, sweep_index
from pingpong.harness.results.stored import read_json_text
from tests.conftest import ROOT

REFERENCE = ROOT / "results" / "reference"
BY_ROOM = REFERENCE / "2026-11-26-by-worker-sessions-restored-sweep.json.xz"  # docs/workloads.md, "In one session"


def by_cell(found):
    return {(entry.server, entry.client): entry for entry in found}


def test_the_committed_by_room_sweep_gives_the_figures_the_docs_quote():
    """docs/workloads.md's table: cpp-websocketpp 0.92× [0.88–0.93] with node-ws and 0.88× [0.85–0.91] with
    go-gorilla, sanic-workers 0.96× and 0.95×; each from the 5 rounds both points measured."""
    found = by_cell(keeping([sweep_runs([BY_ROOM])[0]]))
    assert len(found) == 12 and {entry.workers for entry in found.values()} == {2}
    cpp = found[("cpp-websocketpp", "go-gorilla")]
    assert (round(cpp.pooled.value, 2), round(cpp.pooled.low, 2), round(cpp.pooled.high, 2)) == (0.88, 0.85, 0.91)
    assert cpp.pooled.n == 5 and not cpp.kept() and cpp.runs_kept() == 0
    assert round(found[("cpp-websocketpp", "node-ws")].pooled.value, 2) == 0.92
    sanic = found[("sanic-workers", "go-gorilla")]
    assert round(sanic.pooled.value, 2) == 0.95 and sanic.kept() and sanic.pooled.value >= KEPT_AT_LEAST


def test_runs_are_pooled_round_by_round_and_a_missing_cell_is_a_gap():
    """The same sweep twice: each run's median as before, the pooled one over 10 rounds with an order-statistic
    interval; a run without a cell leaves a gap in its column and adds no round."""
    points = sweep_runs([BY_ROOM])[0]
    twice = by_cell(keeping([points, points]))
    once = by_cell(keeping([points]))
    for key, entry in twice.items():
        assert entry.per_run == (once[key].pooled, once[key].pooled)
        assert entry.pooled.n == 10 and entry.pooled.value == pytest.approx(once[key].pooled.value)
        assert entry.pooled.kind == "order-statistic", entry.pooled
    without_cpp = sweep_runs([BY_ROOM])[0]
    for run in without_cpp:
        run.cells = [cell for cell in run.cells if cell.server != "cpp-websocketpp"]
    gapped = by_cell(keeping([sweep_runs([BY_ROOM])[0], without_cpp]))
    cpp = gapped[("cpp-websocketpp", "node-ws")]
    assert cpp.per_run[1] is None and cpp.pooled.n == 5 and len(cpp.measured_runs()) == 1
    table = render_keeping(list(gapped.values()), ["a", "b"])
    row = next(line for line in table.splitlines() if line.startswith("| cpp-websocketpp × node-ws"))
    assert "| — |" in row and "yes (1 of 1 runs)" in row


def test_a_sweep_without_n_1_or_with_two_points_at_one_n_is_refused():
    at_two = [run for run in sweep_runs([BY_ROOM])[0] if run.configuration.get("workers") == 2]
    with pytest.raises(ValueError, match="no point at N = 1"):
        keeping([at_two])
    points = sweep_runs([BY_ROOM])[0]
    with pytest.raises(ValueError, match="share a --workers value"):  # another setting swept beside --workers
        keeping([points + points])


def test_every_workers_sweep_prints_the_rate_per_server_cpu_paired_by_round():
    """The sweep's table (written by every run over several points) says what each cell keeps of each server CPU,
    from the same rounds as its rate."""
    points = sweep_runs([BY_ROOM])[0]
    members = [({"workers": run.configuration["workers"]}, run, summarize_run(run), f"w{number}.json")
               for number, run in enumerate(points, 1)]
    index = sweep_index(members)
    entry = index["cells"]["cpp-websocketpp × go-gorilla"][1]
    assert round(entry["server_cpu_rate_ratio_to_first_point"]["value"], 2) == 0.88
    markdown = render_sweep_markdown(index)
    heading = next(line for line in markdown.splitlines() if line.startswith("Rate per server CPU"))
    assert "paired by round against the first point (1 worker)" in heading
    section = markdown[markdown.index(heading):].split("\n\n")[1]
    assert "| cpp-websocketpp × go-gorilla | 0.88× [0.85–0.91] |" in section.splitlines()


def test_the_benchmark_reads_sweeps_prints_json_and_refuses_bad_input_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.per_cpu_keeping", "--from", str(BY_ROOM)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["kind"] == "per-cpu-keeping" and record["measured"] is False and record["kept_at_least"] == 0.9
    cpp = next(cell for cell in record["cells"] if (cell["server"], cell["client"]) ==
               ("cpp-websocketpp", "go-gorilla"))
    assert cpp["kept"] is False and cpp["runs_kept"] == 0 and cpp["pooled"]["n"] == 5
    assert "| cpp-websocketpp × go-gorilla | 2 | 0.88× [0.85–0.91] |" in done.stderr
    point = tmp_path / "point.json"
    point.write_text(read_json_text(REFERENCE / "2026-11-26-by-worker-sessions-restored-workers2.json.xz"))
    refused = subprocess.run([sys.executable, "-m", "benchmarks.per_cpu_keeping", "--from", str(point)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "no point at N = 1" in refused.stderr
    missing = subprocess.run([sys.executable, "-m", "benchmarks.per_cpu_keeping", "--from", str(tmp_path / "no")],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "does not exist" in missing.stderr


def test_the_docs_table_of_the_three_pooled_runs_is_what_the_committed_sweeps_give():
    """docs/workloads.md's 2026-11-27 table, every run median and pooled median with its interval, is what keeping()
    computes from the three committed sweeps of that run, to the two decimals the table prints."""
    text = (ROOT / "docs" / "workloads.md").read_text()
    table = text[text.index("| server | node-ws: runs 1 / 2 / 3 | pooled |"):].split("\n\n")[0].splitlines()[2:]
    found = by_cell(keeping([sweep_runs([REFERENCE / f"2026-11-27-per-cpu-keeping-run{number}-sweep.json.xz"])[0]
                             for number in (1, 2, 3)]))
    assert len(table) == 6
    for row in table:
        server, *columns = [part.strip() for part in row.strip("|").split("|")]
        for client, runs, pooled in (("node-ws", columns[0], columns[1]), ("go-gorilla", columns[2], columns[3])):
            entry = found[(server, client)]
            assert runs == " / ".join(f"{ratio.value:.2f}" for ratio in entry.per_run), (server, client)
            assert pooled == (f"{entry.pooled.value:.2f}× [{entry.pooled.low:.2f}–{entry.pooled.high:.2f}]"), \
                (server, client)
