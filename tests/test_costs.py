"""The WebSocket cost split: each side's CPU per roundtrip against its runtime's raw-TCP floor facing the C floor."""

import pytest

from pingpong.harness.analysis.costs import cpu_by_round, websocket_costs
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


def test_each_side_is_held_against_its_runtimes_floor_facing_the_c_floor():
    """py-ws's server CPU over raw-tcp-python's facing raw-tcp-c; node-ws's client CPU over raw-tcp-node's facing
    raw-tcp-c; the end-to-end figure over the same runtimes' floors paired."""
    run = run_of([Cell("py-ws", "node-ws", attempts=attempts(5000, 150, 60)),
                  Cell("raw-tcp-python", "raw-tcp-c", attempts=attempts(14000, 50, 20)),
                  Cell("raw-tcp-c", "raw-tcp-node", attempts=attempts(16000, 25, 40)),
                  Cell("raw-tcp-python", "raw-tcp-node", attempts=attempts(10000, 48, 45)),
                  Cell("raw-tcp-c", "raw-tcp-c", attempts=attempts(23000, 19, 19))])
    split = websocket_costs(run)[("py-ws", "node-ws")]
    assert split.server.value == pytest.approx(150 / 50) and split.server_floor == ("raw-tcp-python", "raw-tcp-c")
    assert split.client.value == pytest.approx(60 / 40) and split.client_floor == ("raw-tcp-c", "raw-tcp-node")
    assert split.end_to_end.value == pytest.approx(10000 / 5000)
    assert split.end_to_end_floor == ("raw-tcp-python", "raw-tcp-node")
    assert split.server.low <= split.server.value <= split.server.high  # paired by round: one ratio per round
    assert set(websocket_costs(run)) == {("py-ws", "node-ws")}  # the floors themselves have no cost


def test_a_part_whose_floor_was_not_measured_is_absent_not_guessed():
    """bun-ws has no Bun floor in this run: its server part and end-to-end figure are None, its client part is not."""
    run = run_of([Cell("bun-ws", "node-ws", attempts=attempts(12000, 25, 40)),
                  Cell("raw-tcp-c", "raw-tcp-node", attempts=attempts(16000, 25, 40)),
                  Cell("raw-tcp-python", "raw-tcp-c", skipped="server raw-tcp-python unavailable")])
    split = websocket_costs(run)[("bun-ws", "node-ws")]
    assert split.server is None and split.server_floor is None
    assert split.end_to_end is None and split.end_to_end_floor is None
    assert split.client.value == pytest.approx(1.0) and split.client_floor == ("raw-tcp-c", "raw-tcp-node")


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


def mixed_run():
    return run_of([Cell("py-ws", "node-ws", attempts=attempts(5000, 150, 60)),
                   Cell("raw-tcp-python", "raw-tcp-c", attempts=attempts(14000, 50, 20)),
                   Cell("raw-tcp-c", "raw-tcp-node", attempts=attempts(16000, 25, 40)),
                   Cell("raw-tcp-python", "raw-tcp-node", attempts=attempts(10000, 48, 45))])


def test_the_markdown_shows_each_part_as_a_matrix():
    """Server part, client part and end to end: one table each, the ratio with its interval."""
    from pingpong.harness.analysis.summary import summarize_run
    from pingpong.harness.report.markdown import render_markdown

    run = mixed_run()
    markdown = render_markdown(run, summarize_run(run))
    split = websocket_costs(run)[("py-ws", "node-ws")]
    tables = [markdown.split(caption)[1].split("\n\n")[1] for caption in ("Server part:", "Client part:",
                                                                          "End to end:")]
    for table, ratio in zip(tables, (split.server, split.client, split.end_to_end)):
        assert table.splitlines()[0] == "| server \\ client | node-ws |"
        assert table.splitlines()[2] == f"| py-ws | {ratio.value:.2f}× [{ratio.low:.2f}–{ratio.high:.2f}] |"


def test_the_terminal_shows_server_part_slash_client_part():
    from pingpong.harness.analysis.summary import summarize_run
    from pingpong.harness.report.terminal import render_plain, terminal_report

    run = mixed_run()
    text = render_plain(terminal_report(run, summarize_run(run)))
    assert "WebSocket cost, server part/client part" in text
    row = next(line for line in text.splitlines() if line.startswith("py-ws") and "/" in line)
    assert row.split() == ["py-ws", "3.00/1.50"]
    assert max(len(line) for line in text.splitlines()) <= 120


def test_the_html_page_has_the_cost_matrix_and_each_cell_names_its_floors():
    from pingpong.harness.analysis.summary import summarize_run
    from pingpong.harness.report.html import render_html

    run = mixed_run()
    page = render_html(run, summarize_run(run))
    assert '<table id="costs">' in page
    assert "server part 3.00× [" in page and "client part 1.50× [" in page and "end to end 2.00× [" in page
    assert "server part (against raw-tcp-python × raw-tcp-c)" in page
    assert "end to end (against raw-tcp-python × raw-tcp-node)" in page
