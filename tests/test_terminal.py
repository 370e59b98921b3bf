"""The terminal report: rates only with one-character marks, aligned, within 120 columns; the plan line."""

import os
import subprocess
import sys

import pytest

from pingpong.harness.analysis.anomalies import CAUSES
from pingpong.harness.analysis.costs import CostSplit
from pingpong.harness.analysis.stats import Difference
from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.commands import report as report_command
from pingpong.harness.measure.progress import plan_line
from pingpong.harness.report import terminal
from pingpong.harness.report.terminal import format_short, render_plain, terminal_report
from pingpong.harness.results.records import Cell, RunResult, load
from pingpong.harness.settings.round_policy import RoundPolicy
from tests.conftest import ROOT
from tests.test_render import CONFIG, sample_run

REFERENCE = ROOT / "results" / "reference" / "2026-11-21-default-matrix.json.xz"
DEFAULT_RUN = ROOT / "results" / "reference" / "2026-11-25-default-run-2.json.xz"  # the README's headline run


def reference_text() -> str:
    run = load(REFERENCE)
    return render_plain(terminal_report(run, summarize_run(run), "results/reference/x.json"))


def test_the_default_matrix_fits_120_columns_and_its_columns_line_up():
    text = reference_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 120
    header = next(line for line in lines if line.startswith("server \\ client"))
    assert header.split() == ["server", "\\", "client", "websockets", "aiohttp", "node-ws", "picows",
                              "node-builtin", "bun"]  # the raw-TCP floors are not columns of the matrix
    loops = lines[lines.index(header) + 1]
    assert loops.split() == ["asyncio", "asyncio", "libuv", "asyncio", "libuv", "bun"]  # each client's loop
    rows = lines[lines.index(header) + 3:lines.index(header) + 10]
    assert [row.split()[:2] for row in rows] == [["sanic", "(uvloop)"], ["blacksheep", "(uvloop)"],
                                                 ["aiohttp", "(asyncio)"], ["websockets", "(asyncio)"],
                                                 ["node-ws", "(libuv)"], ["picows", "(asyncio)"], ["bun", "(bun)"]]
    assert len({len(row) for row in rows + [header, loops]}) == 1  # padded: every row as wide as the header
    assert rows[0].split()[2:] == ["2.6k", "3.6k~", "7.3k~", "5.0k~", "6.6k~", "8.3k"]


def test_the_ranking_starts_with_the_fastest_websocket_pair_and_the_floors_are_apart():
    text = reference_text()
    assert "1  bun      bun           20.8k  1.00×  (reference)" in text  # no interval of its own
    assert "1.00–1.00" not in text
    assert "the median of per-round ratios; interval:\nrange of 3 (covers the median 75%)" in text
    assert "Raw-TCP floors (the same relay without WebSocket, for scale): raw-tcp-python × raw-tcp-python 7.7k" in text


def test_short_rates():
    assert [format_short(v) for v in (850, 7300, 23070, 231000, 1234567)] == ["850", "7.3k", "23.1k", "231k",
                                                                             "1.23M"]


def test_marks_and_failures_are_one_character_or_one_word():
    run = sample_run()
    text = render_plain(terminal_report(run, summarize_run(run)))
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()
            if line.split()[:1] and line.split()[0] in ("steady", "noisy", "broken", "flaky", "absent")}
    # the loop the server reported, where it was measured; a server never measured has none to show
    assert rows == {"steady": ["(uvloop)", "1.0k!z"], "noisy": ["(uvloop)", "1.0k!~z"], "broken": ["FAIL"],
                    "flaky": ["(uvloop)", "510!z?"], "absent": ["—"]}


def test_the_plan_names_cells_rounds_and_time():
    run = RunResult(started_at="t", command_line=[], configuration=CONFIG, environment={}, implementations={},
                    cells=[Cell("a", "c"), Cell("b", "c"), Cell("x", "c", skipped="incompatible")])
    fixed = RoundPolicy(min_rounds=3, max_rounds=3, precision=None, budget_s=None, seed=7)
    assert plan_line([run], 2, 6, fixed, warmup_s=1, duration_s=5, attempt_estimate_s=8) == (
        "plan: 2 cell(s) to measure (1 skipped, reasons in the files), 3 round(s) over them -> 6 attempt(s) of "
        "1 s warmup + 5 s; about 0m48s; one server process per round, order seed 7")
    budgeted = RoundPolicy(min_rounds=6, max_rounds=20, precision=0.03, budget_s=270, seed=7, fresh_server=True)
    assert plan_line([run, run], 4, 24, budgeted, warmup_s=0.2, duration_s=0.5, attempt_estimate_s=1) == (
        "plan: 4 cell(s) at 2 points to measure (2 skipped, reasons in the files), 6 round(s) over them -> 24 "
        "attempt(s) of 0.2 s warmup + 0.5 s; about 0m24s; then more rounds of every cell alike while a whole round "
        "fits (up to 20, 270 s in all); a fresh server per attempt, order seed 7")


def report_in_a_pipe(columns: str | None) -> list[str]:
    """`run_bench.py report DEFAULT_RUN --format terminal | cat`, with COLUMNS set to `columns` (None: unset)."""
    env = {name: value for name, value in os.environ.items() if name not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = columns
    completed = subprocess.run([sys.executable, "run_bench.py", "report", str(DEFAULT_RUN), "--format", "terminal"],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=120)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.splitlines()


def test_columns_sets_the_width_when_the_output_is_piped():
    """COLUMNS=80 is the width in a pipe, as on a terminal (and as rich and most terminal tools take it): no line
    wider (counted in characters, each of them one column: ×, ±, µ, –), the tables split into parts."""
    lines = report_in_a_pipe("80")
    assert max(len(line) for line in lines) <= 80
    assert any("(part 1 of " in line for line in lines)  # the matrix does not fit whole: it comes in parts


def test_a_pipe_without_columns_gets_120_and_a_wider_columns_no_more():
    """At 120 columns the default run's report is one screen: at most 80 lines (119 when each flagged cell had a
    line per side of its time budget)."""
    unset = report_in_a_pipe(None)
    assert 80 < max(len(line) for line in unset) <= 120  # the widest a report gets
    assert len(unset) <= 80
    assert report_in_a_pipe("200") == unset


@pytest.mark.parametrize("columns,width", [("80", 80), ("200", 200), ("0", 120), ("wide", 120), (None, 120)])
def test_the_width_is_columns_when_it_is_a_positive_number_else_120_in_a_pipe(columns, width, monkeypatch):
    """report.terminal_width() in this process, whose stdout pytest captures (no terminal): the width the
    report is asked for, before terminal_report() caps it at 120."""
    monkeypatch.delenv("COLUMNS", raising=False)
    if columns is not None:
        monkeypatch.setenv("COLUMNS", columns)
    with open(os.devnull, "w") as no_terminal:  # behind stdout, even under -s
        monkeypatch.setattr(sys, "__stdout__", no_terminal)
        assert report_command.terminal_width() == width


def test_flagged_cells_take_one_line_per_cause_with_their_cells_cost_and_mechanism():
    """No per-side budgets after the tables: each cause is one line (wrapped to the width), naming its cells as
    products, their WebSocket cost from the cost table, their cost beyond a healthy pair (µs per roundtrip) and what
    the cause does; the details are in the files."""
    text = reference_text()
    section = text[text.index("Flagged (12 cells), by cause"):text.index("Details: ")].splitlines()
    causes = [line for line in section if line.startswith("  ") and not line.startswith("    ")]
    assert len(causes) == 1 and len(section) == 6  # the heading's three lines, the cause's three
    assert " ".join(line.strip() for line in section[3:]) == (
        "permessage-deflate on small messages: blacksheep, aiohttp, websockets × websockets, node-ws, node-builtin, "
        "bun. Cost +146 to +239 µs per roundtrip, end to end (median +221). Beyond a healthy pair +40 to +243 µs per "
        "roundtrip (median +156). Every message goes through zlib both ways, saving nothing this small.")
    assert "run delay" not in text and "switches" not in text  # the time budgets are in the files


def test_every_cause_has_its_mechanism():
    assert {cause for _, cause in CAUSES} == set(terminal.MECHANISMS)


def test_a_causes_cells_are_written_as_the_products_they_make():
    cells = [("sanic", "bun"), ("aiohttp", "ws"), ("aiohttp", "bun"), ("blacksheep", "ws"), ("blacksheep", "bun")]
    assert terminal.cells_text(cells) == "sanic × bun; aiohttp, blacksheep × ws, bun"
    assert terminal.cells_text([("a", "b")]) == "a × b"


def test_a_causes_cost_is_its_cells_range_and_median_of_the_part_it_shows_in():
    def split(server, end_to_end):
        figure = (lambda value: None if value is None else Difference(value, None, None, None, None, 1))
        return CostSplit(figure(server), None, None, figure(end_to_end), None, None, None)

    costs = {("a", "x"): split(80.4, 200), ("a", "y"): split(120, 300), ("b", "x"): split(100, None),
             ("b", "y"): split(None, 250)}
    cells = list(costs)
    assert terminal.cause_cost_text(cells, costs, "server") == (
        "Cost +80 to +120 µs per roundtrip, its server part (median +100)")
    assert terminal.cause_cost_text(cells, costs, "end_to_end") == (
        "Cost +200 to +300 µs per roundtrip, end to end (median +250)")
    assert terminal.cause_cost_text([("b", "x")], costs, "server") == "Cost +100 µs per roundtrip, its server part"
    assert terminal.cause_cost_text([("b", "x")], costs, "client") == ""  # no figure: no cost said
    assert terminal.cause_cost_text([("c", "z")], costs, "server") == ""  # no floors in the run
