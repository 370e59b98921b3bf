"""Each workload's own headline wherever a run is shown, and reports that fit their screen (pure functions)."""

from __future__ import annotations

import re

from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.report.formatting import Headline
from pingpong.harness.report.html import render_html
from pingpong.harness.report.terminal import render_plain, terminal_report
from pingpong.harness.report.workloads import cell_figures, sweep_sections
from pingpong.harness.results.histograms import encode_value_counts
from pingpong.harness.results.records import Attempt, Cell, RunResult, load
from tests.conftest import ROOT

REFERENCE = ROOT / "results" / "reference" / "2026-11-21-default-matrix.json.xz"
CONFIG = {"duration_s": 0.5, "warmup_s": 0.2, "loop": "auto", "compression": "default", "payload_size": 4,
          "payload_kind": "text-ascii", "pinned": True, "workload": "pingpong", "repeat": 1}
IMPLEMENTATIONS = {"server": {"s": {"protocol": "websocket", "runtime": "node"},
                              "t": {"protocol": "websocket", "runtime": "python"}},
                   "client": {"c": {"protocol": "websocket", "runtime": "node"},
                              "d": {"protocol": "websocket", "runtime": "python"}}}


def open_loop_attempt(p50_ms: float, p99_ms: float, saturated: bool) -> Attempt:
    """One round of a pair offered 500/s: 100 latencies, 98 at p50 and 2 at p99 (so its p99 is p99_ms)."""
    figures = {"open_loop": {"rate_per_pair": 500.0, "offered_per_s": 500.0, "achieved_per_s": 499.0,
                             "send_lag_max_ns": 1e6}}
    histogram = encode_value_counts([[int(p50_ms * 1e6), 98], [int(p99_ms * 1e6), 2]])
    return Attempt(repeat=1, status="ok", reason=None, started_at="t", roundtrips=100, elapsed_s=0.2,
                   roundtrips_per_s=499.0, workload_figures=figures, latency_histogram=histogram)


def open_loop_run() -> RunResult:
    cells = [Cell("s", "c", attempts=[open_loop_attempt(1.0, 4.0, False)]),
             Cell("s", "d", attempts=[open_loop_attempt(1.5, 12.0, True)]),
             Cell("t", "c", attempts=[open_loop_attempt(1.2, 5.0, False)]),
             Cell("t", "d", attempts=[open_loop_attempt(1.1, 6.0, False)])]
    return RunResult(started_at="2026-11-24T00:00:00+00:00", command_line=[],
                     configuration={**CONFIG, "rate": 500.0, "saturation_p99_ms": 10.0}, environment={},
                     implementations=IMPLEMENTATIONS, cells=cells)


def test_an_open_loop_run_headlines_latency_at_the_offered_rate_and_flags_only_saturation():
    """Every cell answers ~500/s, so the matrix shows each cell's p99 and the ranking orders by it with the
    verdict; only the saturated cell is flagged, under its cause."""
    run = open_loop_run()
    summaries = summarize_run(run)
    assert Headline(run).latency and Headline(run).value(summaries[("s", "d")]) > 11.9e6
    assert [key for key, summary in summaries.items() if summary.flags] == [("s", "d")]
    text = render_plain(terminal_report(run, summaries))
    assert "p99 latency from the intended send time at 500 messages/s offered per pair" in text
    assert "answered/s, median" not in text
    assert re.search(r"^Lowest p99 at 500 messages/s offered per pair", text, re.M)
    assert "saturated at the offered rate: s × d" in text
    figures = dict(cell_figures(summaries))
    assert "saturated (p99 12.0 ms > 10 ms)" in figures[("s", "d")] and "keeps up" in figures[("s", "c")]


def test_a_single_point_of_idle_connections_gives_no_figure_per_connection():
    """One N is one difference: the report says how the server's memory moved, with its sign, and that a list of
    counts is needed for memory per connection."""
    idle = {"idle": {"requested": 2000, "opened": 2000, "server_connections_established": 2002,
                     "server_memory_growth": {"pss_bytes": -6_606_000, "rss_bytes": 1_000_000}}}
    attempt = Attempt(repeat=1, status="ok", reason=None, started_at="t", roundtrips=900, elapsed_s=0.5,
                      roundtrips_per_s=1800.0, workload_figures=idle)
    run = RunResult(started_at="t", command_line=[], configuration={**CONFIG, "idle_connections": 2000},
                    environment={}, implementations=IMPLEMENTATIONS, cells=[Cell("s", "c", attempts=[attempt])])
    (_, text), = cell_figures(summarize_run(run))
    assert "server PSS shrank by 6,451.2 KiB" in text and "+-" not in text
    assert "per connection" not in text.split("Memory per connection")[0]
    assert "needs a list of --idle-connections" in text


def test_a_sweep_of_idle_connections_with_none_first_gives_the_pairs_rate_against_none():
    """0 first in the list: the memory table gives the pair's rate at the largest N over its rate with none held,
    paired by round; without 0 it says what it would need."""
    def entry(n, ratio):
        return {"idle_connections": n, "idle_memory_by_round": {"1": {"pss_bytes": 1000 + 3000 * n,
                                                                      "rss_bytes": 4000 * n, "established": n + 2},
                                                                "2": {"pss_bytes": 900 + 3100 * n,
                                                                      "rss_bytes": 4100 * n, "established": n + 2}},
                "ratio_to_first_point": ratio}
    ratio = {"value": 1.21, "low": 1.17, "high": 1.27, "coverage": 0.5, "kind": "range", "n": 2}
    index = {"points": [{"idle_connections": 0}, {"idle_connections": 1000}],
             "cells": {"aiohttp × websockets": [entry(0, None), entry(1000, ratio)]}}
    text = "\n".join(sweep_sections(index, ["idle_connections"], ["0 idle", "1,000 idle"]))
    assert "| 1.21× [1.17–1.27] |" in text
    index["points"] = [{"idle_connections": 500}, {"idle_connections": 1000}]
    text = "\n".join(sweep_sections(index, ["idle_connections"], ["500 idle", "1,000 idle"]))
    assert "it needs 0 first in the list of --idle-connections" in text


def test_the_default_matrix_fits_80_columns_by_splitting_its_tables():
    """At 80 columns no line is wider: the matrix comes in parts that each repeat the row names, with every client
    column in one of them; at 120 the matrix is one table."""
    run = load(REFERENCE)
    summaries = summarize_run(run)
    narrow = render_plain(terminal_report(run, summaries, "results/reference/x.json", width=80))
    assert max(len(line) for line in narrow.splitlines()) <= 80
    headers = [line for line in narrow.splitlines() if line.startswith("server \\ client")]
    columns = [name for header in headers for name in header.split()[3:]]
    assert len(headers) >= 2 and all(header.split()[:3] == ["server", "\\", "client"] for header in headers)
    assert {"websockets", "aiohttp", "node-ws", "picows", "node-builtin", "bun"} <= set(columns)
    assert "(part 1 of" in narrow
    wide = render_plain(terminal_report(run, summaries, "results/reference/x.json", width=120))
    assert max(len(line) for line in wide.splitlines()) <= 120
    assert "(part 1 of" not in wide.split("Fastest WebSocket pairs")[0]


def test_the_html_tables_scroll_inside_the_page_and_an_open_loop_heat_map_shows_latency():
    """Wide tables sit in a horizontally scrolling box, so the page itself never needs to be wider than the
    screen; an open loop's heat map cells show p99."""
    run = open_loop_run()
    page = render_html(run, summarize_run(run))
    assert page.count('<div class="scroll"><table') >= 2 and ".scroll { overflow-x: auto" in page
    assert "P99 latency from the intended send time" in page and "bright is low" in page
    assert re.search(r'title="s × c: 4.00 ms"><a href="#cell-s--c">4.0ms</a>', page)
