"""The WebSocket cost split: µs per roundtrip beyond the raw-TCP floors, each side's CPU against the floor pair of
the same two runtimes, parts that add up to the end-to-end difference, and how the reports show them."""

import re

import pytest

from pingpong.harness.analysis.costs import cpu_by_round, websocket_costs
from pingpong.harness.analysis.stats import ORDER_STATISTIC, REMAINDER, paired_difference, remainder
from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.results.records import Attempt, Cell, RunResult
from tests.conftest import IMPLEMENTATIONS
from tests.test_render import CONFIG

IMPLEMENTATIONS_RECORD = {
    "server": {"py-ws": {"protocol": "websocket", "runtime": "python"},
               "bun-ws": {"protocol": "websocket", "runtime": "bun"},
               "raw-tcp-python": {"protocol": "raw-tcp", "runtime": "python"},
               "raw-tcp-c": {"protocol": "raw-tcp", "runtime": "native"}},
    "client": {"node-ws": {"protocol": "websocket", "runtime": "node"},
               "raw-tcp-node": {"protocol": "raw-tcp", "runtime": "node"},
               "raw-tcp-c": {"protocol": "raw-tcp", "runtime": "native"}},
}


def attempts(rate, server_us, client_us, rounds=(1, 2, 3)):
    """Good attempts of 1 s at `rate`, each side spending the given µs of CPU per roundtrip (+1% per round)."""
    return [Attempt(repeat=r, status="ok", reason=None, started_at="t", roundtrips=rate, elapsed_s=1.0,
                    roundtrips_per_s=rate * (1 + r / 100), server_cpu_s=server_us * (1 + r / 100) * rate / 1e6,
                    client_cpu_s=client_us * (1 + r / 100) * rate / 1e6) for r in rounds]


def run_of(cells):
    return RunResult(started_at="t", command_line=[], configuration=CONFIG, environment={},
                     implementations=IMPLEMENTATIONS_RECORD, cells=cells)


def by_round(rates, server_us, client_us):
    """Good attempts of 1 s, round r at rates[r-1] roundtrips/s, each side spending the given µs of CPU per
    roundtrip in that round."""
    return [Attempt(repeat=r, status="ok", reason=None, started_at="t", roundtrips=rate, elapsed_s=1.0,
                    roundtrips_per_s=rate, server_cpu_s=server * rate / 1e6, client_cpu_s=client * rate / 1e6)
            for r, (rate, server, client) in enumerate(zip(rates, server_us, client_us), 1)]


SIX = (5000,) * 6  # six rounds: the median's interval is the range, covering 96.9%


def known_run():
    """py-ws × node-ws with known per-round CPU and rates against its floors, six rounds.

    Server: 80 µs a round against the floor pair's Python server's 50; client: 60 against its Node client's 40;
    the cell runs at 5,000/s (200 µs), its runtimes' floors paired at 10,000/s (100 µs). The floors facing the C
    floor (faster peers, less CPU per roundtrip) are in the run too, and are not what the parts are taken against."""
    return run_of([
        Cell("py-ws", "node-ws", attempts=by_round(SIX, (80, 82, 79, 81, 80, 79), (60, 61, 59, 60, 62, 60))),
        Cell("raw-tcp-python", "raw-tcp-c", attempts=by_round((14000,) * 6, (35,) * 6, (20,) * 6)),
        Cell("raw-tcp-c", "raw-tcp-node", attempts=by_round((16000,) * 6, (25,) * 6, (30,) * 6)),
        Cell("raw-tcp-python", "raw-tcp-node", attempts=by_round((10000, 10000, 9900, 10100, 10000, 10000),
                                                                 (50, 51, 49, 51, 52, 48), (40, 40, 41, 40, 40, 40)))])


def test_a_side_costs_its_cpu_us_beyond_its_floors_with_an_interval_of_the_per_round_differences():
    """Floor server 50 µs, cell's server 80 µs, round by round: the server part is +30 µs, the median of the
    per-round differences (30, 31, 30, 30, 28, 31), its interval their range (6 rounds: 96.9%)."""
    split = websocket_costs(known_run())[("py-ws", "node-ws")]
    assert split.server.value == pytest.approx(30) and split.server_floor == ("raw-tcp-python", "raw-tcp-node")
    assert (split.server.low, split.server.high) == (pytest.approx(28), pytest.approx(31))
    assert (split.server.kind, split.server.coverage, split.server.n) == (ORDER_STATISTIC, 0.96875, 6)
    assert split.client.value == pytest.approx(20) and split.client_floor == ("raw-tcp-python", "raw-tcp-node")
    assert (split.client.low, split.client.high) == (pytest.approx(18), pytest.approx(22))
    # end to end: 200 µs per roundtrip against the floors' 100 (101.0 and 99.0 in the rounds at 9,900 and 10,100)
    assert split.end_to_end.value == pytest.approx(100) and split.end_to_end_floor == ("raw-tcp-python",
                                                                                        "raw-tcp-node")
    assert (split.end_to_end.low, split.end_to_end.high) == (pytest.approx(1e6 / 5000 - 1e6 / 9900),
                                                             pytest.approx(1e6 / 5000 - 1e6 / 10100))
    assert set(websocket_costs(known_run())) == {("py-ws", "node-ws")}  # the floors themselves have no cost


def test_the_parts_and_other_add_up_to_the_end_to_end_difference():
    """server + client + other = end to end, exactly; other's interval is the end-to-end interval less both parts',
    covering at least 1 − the three intervals' misses."""
    split = websocket_costs(known_run())[("py-ws", "node-ws")]
    assert split.server.value + split.client.value + split.other.value == pytest.approx(split.end_to_end.value)
    assert split.other.value == pytest.approx(100 - 30 - 20)
    assert split.other.low == pytest.approx(split.end_to_end.low - split.server.high - split.client.high)
    assert split.other.high == pytest.approx(split.end_to_end.high - split.server.low - split.client.low)
    assert split.other.kind == REMAINDER and split.other.coverage == pytest.approx(1 - 3 * (1 - 0.96875))
    assert split.other.coverage_text() == "≥90.6%"
    assert [name for name, _ in split.parts()] == ["server", "client", "other", "end_to_end"]


def test_a_difference_below_zero_stays_a_difference_below_zero():
    """A side cheaper than its floor has a negative part with its interval, not a ratio below 1; the remainder of
    figures without an interval has none either."""
    cheaper = paired_difference({1: 45.0, 2: 46.0, 3: 44.0}, {1: 50.0, 2: 50.0, 3: 50.0})
    assert (cheaper.value, cheaper.low, cheaper.high) == (-5.0, -6.0, -4.0) and cheaper.excludes_zero()
    assert not paired_difference({1: 49.0, 2: 51.0}, {1: 50.0, 2: 50.0}).excludes_zero()
    single = paired_difference({1: 80.0}, {1: 50.0})
    assert single.low is None and remainder(single, [cheaper]).low is None
    assert remainder(single, [cheaper]).value == pytest.approx(35)


def test_a_cost_whose_floor_pair_was_not_measured_is_absent_not_guessed():
    """bun-ws has no Bun floor in this run, so no floor pair: no figure, though the Node floor facing the C floor was
    measured; py-ws's floor pair failed every attempt: none either."""
    run = run_of([Cell("bun-ws", "node-ws", attempts=attempts(12000, 25, 40)),
                  Cell("py-ws", "node-ws", attempts=attempts(5000, 80, 60)),
                  Cell("raw-tcp-c", "raw-tcp-node", attempts=attempts(16000, 25, 40)),
                  Cell("raw-tcp-python", "raw-tcp-node", attempts=[Attempt(repeat=1, status="timeout", reason="x",
                                                                           started_at="t")])])
    assert websocket_costs(run) == {}


def test_per_round_values_are_keyed_by_the_attempts_round():
    """A failed round and an unsampled one leave gaps: the figures stay keyed by attempt.repeat, for pairing."""
    good = attempts(1000, 100, 50, rounds=(1, 3))
    unsampled = Attempt(repeat=4, status="ok", reason=None, started_at="t", roundtrips=1000, elapsed_s=1.0,
                        roundtrips_per_s=1000)
    failed = Attempt(repeat=2, status="client-failed", reason="x", started_at="t")
    by_round = cpu_by_round(Cell("s", "c", attempts=[good[0], failed, good[1], unsampled]), "server")
    assert list(by_round) == [1, 3] and by_round[1] == pytest.approx(101)


def test_every_runtime_with_a_websocket_implementation_has_its_floor_on_both_sides():
    """Floors for every runtime: each runtime a WebSocket server or client runs on has a raw-TCP server and client."""
    runtimes = {i.runtime for i in IMPLEMENTATIONS if i.protocol == "websocket"}
    for role in ("server", "client"):
        floors = {i.runtime for i in IMPLEMENTATIONS if i.protocol == "raw-tcp" and i.role == role}
        assert runtimes | {"native"} <= floors, role


def cheaper_server_run():
    """bun-ws spends 5 µs less CPU per roundtrip than the Bun floor server: a negative server part."""
    implementations = {"server": {**IMPLEMENTATIONS_RECORD["server"],
                                  "raw-tcp-bun": {"protocol": "raw-tcp", "runtime": "bun"}},
                       "client": IMPLEMENTATIONS_RECORD["client"]}
    cells = [Cell("bun-ws", "node-ws", attempts=by_round((8000,) * 6, (20, 21, 20, 19, 20, 20), (60,) * 6)),
             Cell("raw-tcp-bun", "raw-tcp-c", attempts=by_round((20000,) * 6, (25,) * 6, (20,) * 6)),
             Cell("raw-tcp-c", "raw-tcp-node", attempts=by_round((16000,) * 6, (25,) * 6, (40,) * 6)),
             Cell("raw-tcp-bun", "raw-tcp-node", attempts=by_round((12000,) * 6, (25,) * 6, (45,) * 6))]
    return RunResult(started_at="t", command_line=[], configuration=CONFIG, environment={},
                     implementations=implementations, cells=cells)


def cost_rows(markdown: str) -> list[str]:
    """The rows of the Markdown's cost table."""
    table = markdown.split("| server | client | server part | client part | other | end to end |")[1]
    return table.split("\n\n")[0].splitlines()[2:]


def test_the_markdown_shows_the_parts_in_columns_that_add_up():
    """One row per cell: server part, client part, other, end to end, each in µs with its bracket; the caption says
    what other and a negative figure mean."""
    from pingpong.harness.report.markdown import render_markdown

    run = known_run()
    markdown = render_markdown(run, summarize_run(run))
    assert "| server | client | server part | client part | other | end to end |" in markdown
    assert cost_rows(markdown) == ["| py-ws | node-ws | +30 µs [+28, +31] | +20 µs [+18, +22] "
                                   "| +50 µs [+46, +55, ≥90.6%] | +100 µs [+99, +101] |"]
    assert "server part + client part + other = end to end" in markdown
    assert "the floor spent more CPU per roundtrip than the WebSocket side" in markdown
    assert "×" not in cost_rows(markdown)[0]  # no ratio left


def test_a_negative_part_is_rendered_as_negative_everywhere():
    """bun-ws's server part is −5 µs: '-5.0 µs [...]' in the Markdown and the HTML, '-5+…' in the terminal's sum."""
    from pingpong.harness.report.html import render_html
    from pingpong.harness.report.markdown import render_markdown
    from pingpong.harness.report.terminal import render_plain, terminal_report

    run = cheaper_server_run()
    summaries = summarize_run(run)
    split = websocket_costs(run)[("bun-ws", "node-ws")]
    assert split.server.value == pytest.approx(-5) and split.server.high < 0
    assert cost_rows(render_markdown(run, summaries))[0].split(" | ")[2] == "-5.0 µs [-6.0, -4.0]"
    assert "server part -5.0 µs [-6.0, -4.0, 96.9%]" in render_html(run, summaries)
    text = render_plain(terminal_report(run, summaries))
    cost_row = next(line for line in text.splitlines() if line.startswith("bun-ws") and "=" in line)
    assert cost_row.split() == ["bun-ws", "-5+15+32=42"]  # 125 µs less the floors' 1e6 / 12,000 = 83.3
    assert "Below 0: the floor took more" in text


def test_the_terminal_shows_each_cost_as_the_sum_it_is():
    from pingpong.harness.report.terminal import render_plain, terminal_report

    run = known_run()
    text = render_plain(terminal_report(run, summarize_run(run)))
    assert "WebSocket cost, µs per roundtrip beyond the raw-TCP floors" in text
    row = next(line for line in text.splitlines() if line.startswith("py-ws") and "=" in line)
    assert row.split() == ["py-ws", "30+20+50=100"]
    servers, client, other, whole = map(int, re.fullmatch(r"(-?\d+)\+?(-?\d+)\+?(-?\d+)=(-?\d+)",
                                                         row.split()[1]).groups())
    assert servers + client + other == whole
    assert max(len(line) for line in text.splitlines()) <= 120


def test_the_html_page_has_the_cost_matrix_and_each_cell_names_its_floors():
    from pingpong.harness.report.html import render_html

    run = known_run()
    page = render_html(run, summarize_run(run))
    assert '<table id="costs">' in page
    assert ("server part +30 µs [+28, +31, 96.9%]<br>client part +20 µs [+18, +22, 96.9%]<br>other +50 µs "
            "[+46, +55, ≥90.6%]<br>end to end +100 µs [+99, +101, 96.9%]") in page
    assert "server part (against raw-tcp-python × raw-tcp-node)" in page
    assert "end to end (against raw-tcp-python × raw-tcp-node)" in page


def test_the_csv_has_each_figure_with_its_interval():
    """websocket_cost_<part>_us with _low_us, _high_us and _coverage; empty for the floors' own rows."""
    import csv
    import io

    from pingpong.harness.report.csv_rows import render_csv

    run = known_run()
    rows = {(row["server"], row["client"]): row
            for row in csv.DictReader(io.StringIO(render_csv(run, summarize_run(run))))}
    cell = rows[("py-ws", "node-ws")]
    assert float(cell["websocket_cost_server_us"]) == pytest.approx(30)
    assert float(cell["websocket_cost_server_low_us"]) == pytest.approx(28)
    assert float(cell["websocket_cost_end_to_end_us"]) == pytest.approx(100)
    assert float(cell["websocket_cost_other_coverage"]) == pytest.approx(0.90625)
    assert rows[("raw-tcp-python", "raw-tcp-c")]["websocket_cost_server_us"] == ""
