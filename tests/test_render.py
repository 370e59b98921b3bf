"""Tables rendered from fixed results: noisy, failed, partial and skipped cells, CSV columns, paired ratios, and the
broker's figures of a --workers run."""

import csv
import io
import re
from array import array
from dataclasses import replace

import pytest

from pingpong.harness.analysis.costs import websocket_costs
from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.analysis.workers import LOCAL, SPLIT
from pingpong.harness.report.csv_rows import CSV_COLUMNS, WORKERS_COLUMNS, render_csv
from pingpong.harness.report.formatting import axis_loops, with_loop
from pingpong.harness.report.markdown import render_markdown
from pingpong.harness.results.records import Attempt, Cell, RunResult
from pingpong.kit.driver import encode_histogram

CONFIG = {"repeat": 3, "duration_s": 5, "warmup_s": 1, "loop": "auto", "compression": "default",
          "payload_size": 4, "payload_kind": "text-ascii", "pinned": True}
HISTOGRAM = encode_histogram(array("q", [200_000] * 100))


def ok(repeat, rate):
    return Attempt(repeat=repeat, status="ok", reason=None, started_at="t", roundtrips=int(rate * 5), elapsed_s=5.0,
                   roundtrips_per_s=rate, latency_histogram=HISTOGRAM, server_cpu_s=1.0, client_cpu_s=4.5,
                   window_wall_s=5.0, client_report={"loop": "asyncio", "connections": [
                       {"extensions": "permessage-deflate", "tcp_nodelay": True, "family": "ipv4"}]},
                   server_info={"loop": "uvloop"})


def failed(repeat):
    return Attempt(repeat=repeat, status="not-ready", reason="no WebSocket handshake within 15 s", started_at="t")


def sample_run():
    cells = [Cell("steady", "c", attempts=[ok(1, 1000), ok(2, 1010), ok(3, 990)]),
             Cell("noisy", "c", attempts=[ok(1, 1000), ok(2, 1400), ok(3, 700)]),
             Cell("broken", "c", attempts=[failed(1), failed(2), failed(3)]),
             Cell("flaky", "c", attempts=[ok(1, 500), failed(2), ok(3, 520)]),
             Cell("absent", "c", skipped="server absent unavailable: runtime 'bun' not found")]
    return RunResult(started_at="2026-11-21T00:00:00+00:00", command_line=[], configuration=CONFIG,
                     environment={"cpu_model": "Test CPU", "cpu_count": 2}, implementations={}, cells=cells)


def row(markdown, name):
    return next(line for line in markdown.splitlines() if line.startswith(f"| {name} |")
                or line.startswith(f"| {name} ("))


def test_markdown_matrix_marks_each_kind_of_cell():
    run = sample_run()
    markdown = render_markdown(run, summarize_run(run))
    # the fixture negotiates deflate for 4-byte messages: marked ᶻ, and flagged ⚑ with its reason below
    assert row(markdown, "steady").startswith("| steady (uvloop) | 1,000 CV 1.0% · p99 200 µs ᶻ ⚑ |")
    assert "| server \\ client | c (asyncio) |" in markdown  # each row and column names the loop it ran on
    assert "- **steady × c**: permessage-deflate negotiated for 4-byte messages" in markdown
    assert "(noisy)" in row(markdown, "noisy") and "(noisy)" not in row(markdown, "steady")
    assert "FAILED (not-ready)" in row(markdown, "broken")
    assert "(1 failed)" in row(markdown, "flaky")
    assert row(markdown, "absent") == "| absent | — |"
    assert "Fastest WebSocket pair: **steady server × c client**, 1,000 roundtrips/s" in markdown
    assert "- absent × c: not measured: server absent unavailable" in markdown
    assert "- broken × c: repeat 1: not-ready: no WebSocket handshake within 15 s" in markdown


def test_per_cell_figures_cpu_and_bottleneck():
    """CPU per roundtrip and utilization come from the window samples; the saturated side is the bottleneck."""
    summary = summarize_run(sample_run())[("steady", "c")]
    assert summary.client_cpu.us_per_roundtrip == 4.5 / (1000 * 5) * 1e6
    assert summary.client_cpu.utilization == 0.9 and summary.server_cpu.utilization == 0.2
    assert summary.bottleneck == "client"
    assert summary.compression_negotiated == "permessage-deflate"
    assert (summary.server_loop, summary.client_loop) == ("uvloop", "asyncio")


def test_csv_has_one_row_per_cell():
    run = sample_run()
    rows = list(csv.DictReader(io.StringIO(render_csv(run, summarize_run(run)))))
    assert [r["server"] for r in rows] == ["steady", "noisy", "broken", "flaky", "absent"]
    assert float(rows[0]["roundtrips_per_s_median"]) == 1000 and rows[1]["noisy"] == "True"
    assert rows[4]["status"] == "skipped" and "bun" in rows[4]["reason"]
    assert (rows[0]["interval_low"], rows[0]["interval_high"], rows[0]["interval_kind"]) == ("990", "1010", "range")
    assert rows[0]["interval_coverage"] == "0.75" and rows[3]["interval_coverage"] == "0.5"  # 3 and 2 repeats
    assert not [column for column in rows[0] if "95" in column]


def test_a_run_without_workers_keeps_its_columns():
    """No cell ran more than one worker: the CSV's header is CSV_COLUMNS, none of the Workers columns."""
    run = sample_run()
    assert next(csv.reader(io.StringIO(render_csv(run, summarize_run(run))))) == CSV_COLUMNS


def workers_record(local_rates, split_rates, unplaced=0, cpu_us_per_publish=20.0, crossed_broker_share=0.5):
    """An attempt's `workers` record at N = 2: each pair's placement and its roundtrips over a 5 s window."""
    pairs = ([{"placement": LOCAL, "roundtrips": rate * 5, "elapsed_s": 5.0} for rate in local_rates]
             + [{"placement": SPLIT, "roundtrips": rate * 5, "elapsed_s": 5.0} for rate in split_rates]
             + [{"placement": None, "roundtrips": 500, "elapsed_s": 5.0}] * unplaced)
    return {"count": 2, "reported": 2, "crossed_broker_share": crossed_broker_share,
            "broker": {"version": "7", "window": {"publishes": 10_000, "publishes_per_roundtrip": 2.0,
                                                  "cpu_us_per_publish": cpu_us_per_publish}},
            "pairs": pairs}


def workers_run():
    """A cell on 2 workers: three attempts with local and split pairs (split ÷ local 0.8, 0.9 and 0.5), one with
    local pairs only, a failed one left out; and a cell of one process beside it."""
    attempts = [replace(ok(1, 1000), workers=workers_record([1000, 1000], [800], cpu_us_per_publish=20.0)),
                replace(ok(2, 1000), workers=workers_record([1000], [900, 900], unplaced=1, cpu_us_per_publish=30.0,
                                                             crossed_broker_share=0.6)),
                replace(ok(3, 1000), workers=workers_record([1000, 1000], [500, 500], cpu_us_per_publish=25.0,
                                                             crossed_broker_share=0.4)),
                replace(ok(4, 1000), workers=workers_record([1000] * 3, [], cpu_us_per_publish=40.0)),
                replace(failed(5), workers=workers_record([1000], [100], cpu_us_per_publish=900.0))]
    cells = [Cell("cluster", "c", attempts=attempts), Cell("single", "c", attempts=[ok(1, 990), ok(2, 1000)])]
    return RunResult(started_at="2026-11-25T00:00:00+00:00", command_line=[], configuration={**CONFIG, "workers": 2},
                     environment={"cpu_model": "Test CPU", "cpu_count": 2}, implementations={}, cells=cells)


def test_the_csv_has_the_workers_figures_as_numbers():
    """The cell on 2 workers has its figures over its 4 good attempts: the pairs counted exactly, the broker's
    medians, and the hop as the median of the 3 per-attempt ratios (0.8) and differences (+250 µs) with the range of
    3 as interval; the cell of one process has the columns empty."""
    run = workers_run()
    text = render_csv(run, summarize_run(run))
    assert next(csv.reader(io.StringIO(text)))[-len(WORKERS_COLUMNS):] == WORKERS_COLUMNS
    cluster, single = csv.DictReader(io.StringIO(text))
    assert [cluster[c] for c in ("workers", "attempts_with_workers", "local_pairs", "split_pairs", "unplaced_pairs",
                                 "attempts_with_both")] == ["2", "4", "8", "5", "1", "3"]
    assert float(cluster["publishes_per_roundtrip"]) == 2.0
    assert float(cluster["broker_cpu_us_per_publish"]) == 27.5  # the median of 20, 30, 25, 40; not the failed 900
    assert float(cluster["crossed_broker_share"]) == 0.5
    ratio = [float(cluster[c]) for c in ("hop_ratio", "hop_ratio_low", "hop_ratio_high", "hop_ratio_coverage")]
    assert ratio == pytest.approx([0.8, 0.5, 0.9, 0.75])
    hop_us = [float(cluster[c]) for c in ("hop_us", "hop_low_us", "hop_high_us", "hop_coverage")]
    assert hop_us == pytest.approx([1e6 / 800 - 1e3, 1e6 / 900 - 1e3, 1e6 / 500 - 1e3, 0.75])
    assert {single[c] for c in WORKERS_COLUMNS} == {""}


def test_the_fastest_pair_is_a_websocket_pair_and_the_floors_are_named_apart():
    """A raw-TCP floor faster than every WebSocket cell is not "the fastest pair"; it is named as a floor."""
    run = RunResult(started_at="2026-11-21T00:00:00+00:00", command_line=[], configuration=CONFIG,
                    environment={}, implementations={"server": {"ws": {"protocol": "websocket"},
                                                                "floor": {"protocol": "raw-tcp"}}},
                    cells=[Cell("ws", "c", attempts=[ok(1, 1000), ok(2, 1010), ok(3, 990)]),
                           Cell("floor", "c", attempts=[ok(1, 9000), ok(2, 9100), ok(3, 8900)])])
    markdown = render_markdown(run, summarize_run(run))
    assert "Fastest WebSocket pair: **ws server × c client**, 1,000 roundtrips/s" in markdown
    assert "(raw-TCP floors, without WebSocket: floor × c 9,000)" in markdown


def test_costs_within_a_run_are_paired_by_round():
    """Round 2 is slow for every cell: the end-to-end WebSocket cost is the median of the per-round differences of
    roundtrip time (1000 − 333, 2000 − 667, 909 − 303 µs), and the tables name their intervals with the coverage
    they have (the range of 3 rounds: 75%)."""
    run = RunResult(started_at="2026-11-21T00:00:00+00:00", command_line=[], configuration=CONFIG,
                    environment={}, implementations={
                        "server": {"ws": {"protocol": "websocket", "runtime": "node"},
                                   "raw-tcp-node": {"protocol": "raw-tcp", "runtime": "node"}},
                        "client": {"c": {"protocol": "websocket", "runtime": "node"},
                                   "raw-tcp-node": {"protocol": "raw-tcp", "runtime": "node"}}},
                    cells=[Cell("ws", "c", attempts=[ok(1, 1000), ok(2, 500), ok(3, 1100)]),
                           Cell("raw-tcp-node", "raw-tcp-node", attempts=[ok(1, 3000), ok(2, 1500), ok(3, 3300)])])
    summaries = summarize_run(run)
    split = websocket_costs(run)[("ws", "c")]
    difference = split.end_to_end
    assert split.end_to_end_floor == ("raw-tcp-node", "raw-tcp-node")
    assert difference.value == pytest.approx(1e6 / 1000 - 1e6 / 3000)
    assert (difference.low, difference.high) == (pytest.approx(1e6 / 1100 - 1e6 / 3300),
                                                 pytest.approx(1e6 / 500 - 1e6 / 1500))
    assert (difference.kind, difference.coverage, difference.n) == ("range", 0.75, 3)
    markdown = render_markdown(run, summaries)
    assert "the median of the per-round differences (each round measures every cell once)" in markdown
    assert "brackets: range of 3 (covers the median 75%)" in markdown and "| +667 µs [+606, +1333] |" in markdown


def test_a_name_that_ran_on_two_loops_shows_both():
    """Loops come from what each side reported in its measured cells: a server reporting asyncio in one cell and
    uvloop in another is labelled with both; failed cells say nothing about loops."""
    mixed = [ok(1, 1000), ok(2, 1010)]
    mixed[1] = Attempt(**{**vars(mixed[1]), "server_info": {"loop": "asyncio"}})
    run = RunResult(started_at="t", command_line=[], configuration=CONFIG, environment={}, implementations={},
                    cells=[Cell("s", "c", attempts=mixed[:1]), Cell("s", "d", attempts=mixed[1:]),
                           Cell("x", "c", attempts=[failed(1)])])
    servers, clients = axis_loops(summarize_run(run))
    assert servers == {"s": "asyncio/uvloop"} and clients == {"c": "asyncio", "d": "asyncio"}
    assert with_loop("s", servers) == "s (asyncio/uvloop)" and with_loop("x", servers) == "x"


def test_plus_minus_means_an_interval_half_width_and_never_a_cv():
    """'CV 34.0%' names the noisy cell's coefficient of variation; every '±' in the Markdown, the HTML and the
    terminal is a cell's interval half-width over its median (its precision), never a CV."""
    from pingpong.harness.report.html import render_html
    from pingpong.harness.report.terminal import render_plain, terminal_report

    run = sample_run()
    summaries = summarize_run(run)
    noisy = summaries[("noisy", "c")].roundtrips_per_s
    assert f"{noisy.cv:.1%}" != f"{noisy.precision:.1%}"  # the two spreads differ here, so a mix-up shows
    markdown = render_markdown(run, summaries)
    assert f"CV {noisy.cv:.1%}" in row(markdown, "noisy")
    half_widths = {f"{s.roundtrips_per_s.precision:.1%}" for s in summaries.values()
                   if s.measured and s.roundtrips_per_s.precision is not None}
    for text in (markdown, render_html(run, summaries), render_plain(terminal_report(run, summaries))):
        shown = re.findall(r"±(\d+(?:\.\d+)?%)", text)
        assert set(shown) <= half_widths
    assert f"±{noisy.precision:.1%}" in markdown and f"±{noisy.cv:.1%}" not in markdown


def test_the_reference_cell_of_a_ranking_has_no_interval_of_its_own():
    """The fastest pair is 1.00× by construction: '1.00× (reference)', no bracket, in the Markdown and the HTML."""
    from pingpong.harness.report.html import render_html

    run = sample_run()
    summaries = summarize_run(run)
    markdown = render_markdown(run, summaries)
    relative = markdown.split("Every cell relative to it")[1].split("\n\n")[1]
    assert "| steady | 1.00× (reference) |" in relative and "[1.00–1.00]" not in markdown
    assert "| noisy | 1.00× [" in relative  # the others keep their intervals
    page = render_html(run, summaries)
    assert "relative to the fastest pair</td><td>1.00× (reference)</td>" in page


def test_every_format_the_parser_offers_has_its_exporter_and_every_saved_one_is_offered():
    """The parser reads results.files.FORMATS without importing the exporters; the two lists must agree."""
    from pingpong.harness.report.exporters import EXPORTERS
    from pingpong.harness.results.files import FORMATS, SAVED_FORMATS

    assert tuple(EXPORTERS) == FORMATS
    assert set(SAVED_FORMATS) <= set(FORMATS)


def test_the_machine_line_names_the_measurement_switches_a_run_had_set():
    from pingpong.harness.report.formatting import switches_text

    assert switches_text({}) == "" and switches_text({"measurement_switches": {}}) == ""
    assert switches_text({"measurement_switches": {"PINGPONG_B": "1", "PINGPONG_A": "x"}}) == (
        " Measurement switches set: PINGPONG_A=x, PINGPONG_B=1.")
