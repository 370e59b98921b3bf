"""--workers N, without processes: each pair's placement read from the workers' counts, its roundtrips from the
client report, and the broker hop's cost paired within each attempt (analysis/workers.py), as the reports show it."""

from array import array
from dataclasses import replace
from types import SimpleNamespace

import pytest

from pingpong.harness.analysis.stats import RANGE
from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.analysis.workers import (LOCAL, SPLIT, WorkersFigures, attempt_hop, attempt_workers_record,
                                               cell_figures, pair_p50s, pair_records, process_pair_roundtrips,
                                               workers_figures)
from pingpong.harness.measure.attempt_plan import pair_rooms
from pingpong.harness.measure.judge import merge_reports
from pingpong.harness.report.markdown import render_markdown
from pingpong.harness.report.sweep import render_sweep_markdown, sweep_index
from pingpong.harness.report.terminal import render_plain, terminal_report
from pingpong.harness.results.histograms import merge
from pingpong.harness.results.records import Attempt, Cell, RunResult
from pingpong.kit.driver import encode_histogram
from pingpong.kit.driver.core import pair_urls
from tests.conftest import CellSettings

SETTINGS = CellSettings(duration_s=1.0, warmup_s=0.2, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=20.0, stall_timeout_s=5.0, pin=True, pairs=4,
                        client_processes=2, workers=2)
HISTOGRAM = encode_histogram(array("q", [500_000] * 10))
CONFIG = {"repeat": 5, "duration_s": 1, "warmup_s": 0.2, "loop": "auto", "compression": "default",
          "payload_size": 4, "payload_kind": "text-ascii", "pinned": True, "pairs": 4, "workers": 2}


def worker(pid, rooms):
    return {"pid": pid, "final": True, "broker": True, "relayed_local": 0, "published": 0,
            "delivered_from_broker": 0, "own_from_broker": 0, "joined_per_room": rooms}


def test_the_harness_names_each_pairs_room_as_the_drivers_do():
    """pair_rooms gives, per client process, the rooms pair_urls opens: ROOM-p0.. for several pairs, ROOM for one;
    an idle holder drives none."""
    rooms = pair_rooms(SETTINGS, repeat=3, number=1)
    assert rooms == [["/bench-r3-c0-p0", "/bench-r3-c0-p1"], ["/bench-r3-c1-p0", "/bench-r3-c1-p1"]]
    assert [url.removeprefix("ws://h:1") for url in pair_urls("ws://h:1/bench-r3-c0", 2)] == rooms[0]
    assert pair_rooms(replace(SETTINGS, pairs=1, client_processes=1), 1, 2) == [["/bench-r1-n2"]]
    assert pair_urls("ws://h:1/bench-r1-n2", 1) == ["ws://h:1/bench-r1-n2"]
    assert pair_rooms(replace(SETTINGS, pairs=3, client_processes=1, idle_connections=10), 1, 1) == [
        ["/bench-r1-c0-p0", "/bench-r1-c0-p1", "/bench-r1-c0-p2"], []]  # a holder is a client process too


def test_each_pair_gets_its_roundtrips_and_where_its_members_sat():
    """Two processes of two pairs, merged as the judge merges them: a room whose two members joined one worker is
    local, one whose members joined two is split, one the workers' counts do not account for is unknown."""
    reports = [{"roundtrips": 300, "roundtrips_per_s": 300.0, "elapsed_s": 1.0, "pairs": 2,
                "per_pair_roundtrips": [200, 100]},
               {"roundtrips": 310, "roundtrips_per_s": 310.0, "elapsed_s": 1.0, "pairs": 2,
                "per_pair_roundtrips": [210, 100]}]
    merged = merge_reports(reports)
    assert process_pair_roundtrips(merged) == [([200, 100], 1.0), ([210, 100], 1.0)]
    assert all("per_pair_hdr_histograms" not in entry for entry in merged["per_process"])
    workers = [worker(11, {"/bench-r1-c0-p0": 2, "/bench-r1-c0-p1": 1, "/bench-r1-c1-p1": 1, "/__room_probe_1": 1}),
               worker(12, {"/bench-r1-c0-p1": 1, "/bench-r1-c1-p0": 2})]
    pairs = pair_records(pair_rooms(SETTINGS, 1, 1), merged, workers)
    assert [(p["room"], p["roundtrips"], p["workers"], p["placement"]) for p in pairs] == [
        ("/bench-r1-c0-p0", 200, 1, LOCAL), ("/bench-r1-c0-p1", 100, 2, SPLIT),
        ("/bench-r1-c1-p0", 210, 1, LOCAL), ("/bench-r1-c1-p1", 100, 1, None)]
    one_pair = {"roundtrips": 90, "roundtrips_per_s": 90.0, "elapsed_s": 0.5}
    assert process_pair_roundtrips(one_pair) == [([90], 0.5)]
    assert process_pair_roundtrips({"roundtrips": 9, "elapsed_s": 1.0, "pairs": 3}) is None
    assert pair_records(pair_rooms(SETTINGS, 1, 1), one_pair, workers) is None  # one process, not two


def test_an_attempt_counts_deliveries_per_publish_and_the_publishes_of_its_local_pairs():
    """Worker 11 published 100 messages of a split pair, each reaching 2 subscribers, worker 12 another 100 of it and
    4 of a local pair's room (each reaching 1): 204 publishes, 404 deliveries (1.98 per publish); the split pair's
    record has its 200 publishes, the local pair's its 4, and local_pair_publishes says 4. A run's cell has the
    median of its attempts' deliveries per publish, the sum of their local pairs' publishes, and the Markdown shows
    the former."""
    report = {"roundtrips": 300, "roundtrips_per_s": 300.0, "elapsed_s": 1.0, "pairs": 2,
              "per_pair_roundtrips": [200, 100]}
    settings = replace(SETTINGS, pairs=2, client_processes=1)
    workers = [{**worker(11, {"/bench-r1-p0": 2, "/bench-r1-p1": 1}), "published": 100, "publish_deliveries": 200,
                "published_per_room": {"/bench-r1-p1": 100}},
               {**worker(12, {"/bench-r1-p1": 1}), "published": 104, "publish_deliveries": 204,
                "published_per_room": {"/bench-r1-p1": 100, "/bench-r1-p0": 4}}]
    outcome = SimpleNamespace(window=None, measured=None, ok=True, client=SimpleNamespace(report=report))
    record = attempt_workers_record(2, None, workers, outcome, pair_rooms(settings, 1, 1))
    assert (record["published"], record["publish_deliveries"], record["deliveries_per_publish"]) == (204, 404, 1.98)
    assert [(pair["placement"], pair["publishes"]) for pair in record["pairs"]] == [(LOCAL, 4), (SPLIT, 200)]
    assert record["local_pair_publishes"] == 4
    before = attempt_workers_record(2, None, [worker(11, {}), worker(12, {})], outcome, None)
    assert before["deliveries_per_publish"] is None and before["local_pair_publishes"] is None  # nothing published
    run = workers_run()
    for index, attempt in enumerate(run.cells[0].attempts):
        attempt.workers.update(deliveries_per_publish=2.0 + index / 100, local_pair_publishes=index % 2)
    (figures,) = workers_figures(run)
    assert figures.deliveries_per_publish.value == 2.02 and figures.local_pair_publishes == 2
    assert WorkersFigures.from_json(figures.to_json()) == figures
    row = next(line for line in render_markdown(run, summarize_run(run)).splitlines()
               if line.startswith("| node-ws-cluster | websockets | 2 |"))
    assert "| 2.00 [2.00–2.00] | 2.02 [2.00–2.04] |" in row


def test_merged_reports_keep_each_process_pairs_histograms():
    """Each process's per_pair_hdr_histograms stay with its per_process entry, not one process's at the top; a
    process with one pair has its own histogram as its pair's; one without latencies (--no-latency) has none."""
    first, second = encode_histogram(array("q", [1_000] * 3)), encode_histogram(array("q", [2_000] * 2))
    latency = {"unit": "ns", "recorded": True, "hdr_histogram": HISTOGRAM}
    reports = [{"roundtrips": 5, "roundtrips_per_s": 5.0, "elapsed_s": 1.0, "pairs": 2, "latency": latency,
                "per_pair_roundtrips": [3, 2], "per_pair_hdr_histograms": [first, second]},
               {"roundtrips": 10, "roundtrips_per_s": 10.0, "elapsed_s": 1.0, "latency": latency},
               {"roundtrips": 10, "roundtrips_per_s": 10.0, "elapsed_s": 1.0,
                "latency": {"unit": "ns", "recorded": False, "hdr_histogram": None}}]
    merged = merge_reports(reports)
    assert merged["per_process"][0]["per_pair_hdr_histograms"] == [first, second]
    assert merged["per_process"][1]["per_pair_hdr_histograms"] == [HISTOGRAM]
    assert "per_pair_hdr_histograms" not in merged["per_process"][2] and "per_pair_hdr_histograms" not in merged
    assert merge([merged["latency"]["hdr_histogram"]]).get_total_count() == 20


def test_each_pair_gets_its_own_latency_from_its_own_histogram():
    """Pairs at 1 ms and 3 ms in one process: each pair's record has its own p50, and pair_p50s lists them in pair
    order; a pair's histogram missing (latency not recorded) gives None, and no list."""
    fast, slow = encode_histogram(array("q", [1_000_000] * 9)), encode_histogram(array("q", [3_000_000] * 3))
    report = {"roundtrips": 12, "roundtrips_per_s": 12.0, "elapsed_s": 1.0, "pairs": 2,
              "per_pair_roundtrips": [9, 3], "per_pair_hdr_histograms": [fast, slow],
              "latency": {"unit": "ns", "recorded": True, "hdr_histogram": HISTOGRAM}}
    settings = replace(SETTINGS, pairs=2, client_processes=1)
    workers = [worker(11, {"/bench-r1-p0": 2, "/bench-r1-p1": 1}), worker(12, {"/bench-r1-p1": 1})]
    pairs = pair_records(pair_rooms(settings, 1, 1), report, workers)
    assert [(p["placement"], round(p["p50_ns"], -4), round(p["p99_ns"], -4)) for p in pairs] == [
        (LOCAL, 1_000_000, 1_000_000), (SPLIT, 3_000_000, 3_000_000)]
    attempt = Attempt(repeat=1, status="ok", reason=None, started_at="t", roundtrips=12, elapsed_s=1.0,
                      roundtrips_per_s=12.0, client_report=report)
    assert [round(p50, -4) for p50 in pair_p50s(attempt)] == [1_000_000, 3_000_000]
    hop = attempt_hop(1, pairs)
    assert round(hop.extra_p50_us) == 2000
    unrecorded = {key: value for key, value in report.items() if key != "per_pair_hdr_histograms"}
    assert pair_p50s(replace(attempt, client_report=unrecorded)) is None
    assert all(p["p50_ns"] is None for p in pair_records(pair_rooms(settings, 1, 1), unrecorded, workers))
    assert attempt_hop(1, pair_records(pair_rooms(settings, 1, 1), unrecorded, workers)).extra_p50_us is None


def pairs_of(local_rates, split_rates, elapsed_s=1.0):
    """Pairs whose p50 is the closed loop's 1/rate (a pair has one roundtrip in flight)."""
    return ([{"placement": LOCAL, "roundtrips": rate * elapsed_s, "elapsed_s": elapsed_s, "p50_ns": 1e9 / rate}
             for rate in local_rates]
            + [{"placement": SPLIT, "roundtrips": rate * elapsed_s, "elapsed_s": elapsed_s, "p50_ns": 1e9 / rate}
               for rate in split_rates])


def test_the_hop_is_a_split_pairs_rate_against_a_local_pairs_in_the_same_window():
    """An attempt with local pairs at 1000/s and split ones at 800/s: ratio 0.8, +250 µs per roundtrip; an attempt
    with one kind only has no hop."""
    hop = attempt_hop(1, pairs_of([1000, 1000], [800, 800]))
    assert hop.local_pairs == hop.split_pairs == 2
    assert hop.ratio == pytest.approx(0.8) and hop.extra_us == pytest.approx(250)
    assert attempt_hop(1, pairs_of([1000, 900], [])) is None and attempt_hop(1, None) is None


def workers_attempt(repeat, local_rate, split_rate, count=2, status="ok"):
    record = {"count": count, "reported": count, "crossed_broker_share": 0.5 if count > 1 else 0.0,
              "broker": {"version": "7", "window": {"publishes": 2000, "cpu_s": 0.04, "cpu_us_per_publish": 20.0,
                                                    "publishes_per_roundtrip": 2.0}} if count > 1 else None,
              "pairs": pairs_of([local_rate] * 2, [split_rate] * 2 if count > 1 else [])}
    return Attempt(repeat=repeat, status=status, reason=None if status == "ok" else "x", started_at="t",
                   roundtrips=2000, elapsed_s=1.0, roundtrips_per_s=2000.0, latency_histogram=HISTOGRAM,
                   server_cpu_s=0.5, client_cpu_s=0.5, window_wall_s=1.0, workers=record)


def workers_run(count=2):
    attempts = [workers_attempt(r, 1000 + 10 * r, 800 + 10 * r, count) for r in range(1, 6)]
    attempts.append(workers_attempt(6, 1, 1, count, status="client-failed"))
    cells = [Cell("node-ws-cluster", "websockets", attempts=attempts),
             Cell("sanic", "websockets", skipped="server sanic runs one process")]
    return RunResult(started_at="2026-11-25T00:00:00+00:00", command_line=[], configuration={**CONFIG,
                                                                                              "workers": count},
                     environment={"cpu_model": "Test CPU", "cpu_count": 2}, implementations={}, cells=cells)


def test_a_cells_figures_are_medians_over_its_good_attempts_with_their_interval():
    """Five good attempts with both kinds (a failed one left out): the hop's ratio and µs are the medians of the
    per-attempt figures, with the range of 5 as their interval; a run at N = 1 has no Workers figures."""
    (figures,) = workers_figures(workers_run())
    assert (figures.server, figures.workers, figures.attempts, figures.both_kinds) == ("node-ws-cluster", 2, 5, 5)
    assert (figures.local_pairs, figures.split_pairs, figures.unplaced_pairs) == (10, 10, 0)
    ratios = sorted((800 + 10 * r) / (1000 + 10 * r) for r in range(1, 6))
    assert figures.hop_ratio.value == pytest.approx(ratios[2])
    assert (figures.hop_ratio.low, figures.hop_ratio.high) == pytest.approx((ratios[0], ratios[-1]))
    assert figures.hop_ratio.kind == RANGE and figures.hop_ratio.n == 5
    assert figures.hop_us.value == pytest.approx(1e6 / 830 - 1e6 / 1030)
    assert figures.hop_p50_us.value == pytest.approx(1e6 / 830 - 1e6 / 1030)  # p50 = 1/rate here
    assert figures.publishes_per_roundtrip.value == 2.0 and figures.cpu_us_per_publish.value == 20.0
    assert figures.crossed_broker_share.value == 0.5
    assert WorkersFigures.from_json(figures.to_json()) == figures
    assert workers_figures(workers_run(count=1)) == []
    assert cell_figures("a", "b", [workers_attempt(1, 1000, 800)]).hop_ratio.kind is None  # one attempt


def test_the_reports_show_the_workers_section_only_above_one_worker():
    """The Markdown and the terminal have a Workers table with the hop cost and how many attempts had both kinds;
    a sweep over --workers 1,2 has it for the N = 2 point; a run at N = 1 has none."""
    run = workers_run()
    markdown = render_markdown(run, summarize_run(run))
    assert "\n## Workers\n" in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| node-ws-cluster | websockets | 2 |"))
    assert "2.00 [2.00–2.00]" in row and "| 5 of 5 |" in row and "| 10 / 10 |" in row
    assert "0.81× [0.80–0.81]" in row
    assert "+234 µs" in row
    terminal = render_plain(terminal_report(run, summarize_run(run), width=120))
    assert "Workers:" in terminal and "5 of 5" in terminal
    single = workers_run(count=1)
    assert "## Workers" not in render_markdown(single, summarize_run(single))
    assert "Workers:" not in render_plain(terminal_report(single, summarize_run(single)))
    index = sweep_index([({"workers": 1}, single, summarize_run(single), "w1.json"),
                         ({"workers": 2}, run, summarize_run(run), "w2.json")])
    sweep_markdown = render_sweep_markdown(index)
    assert "Workers (the points with more than one):" in sweep_markdown
    assert sum(line.startswith("| node-ws-cluster | websockets |") for line in sweep_markdown.splitlines()) == 1


def pair_latency_run(workers, scale):
    """Five rounds of one cell with two pairs whose p50s are 1 ms and 2 ms times scale (each pair's histogram)."""
    def attempt(repeat):
        per_pair = [encode_histogram(array("q", [int(ms * scale * 1e6)] * 5)) for ms in (1, 2)]
        report = {"roundtrips": 10, "roundtrips_per_s": 10.0, "elapsed_s": 1.0, "pairs": 2,
                  "per_pair_roundtrips": [5, 5], "per_pair_hdr_histograms": per_pair,
                  "latency": {"unit": "ns", "recorded": True, "hdr_histogram": HISTOGRAM}}
        return Attempt(repeat=repeat, status="ok", reason=None, started_at="t", roundtrips=10, elapsed_s=1.0,
                       roundtrips_per_s=10.0 / scale, latency_histogram=HISTOGRAM, client_report=report)
    cells = [Cell("node-ws-cluster", "websockets", attempts=[attempt(r) for r in range(1, 6)])]
    return RunResult(started_at="2026-11-25T00:00:00+00:00", command_line=[],
                     configuration={**CONFIG, "workers": workers}, environment={"cpu_count": 2}, implementations={},
                     cells=cells)


def test_a_sweep_shows_each_pairs_latency_against_the_first_point_paired_by_round():
    """--workers 1,2 with every pair's p50 twice as long at N = 2: the median pair's p50 (1.5 ms, then 3 ms) and the
    slowest pair's (2 ms, then 4 ms), and the median pair's p50 over N = 1's, 2.00× by round."""
    one, two = pair_latency_run(1, 1.0), pair_latency_run(2, 2.0)
    index = sweep_index([({"workers": 1}, one, summarize_run(one), "w1.json"),
                         ({"workers": 2}, two, summarize_run(two), "w2.json")])
    first, second = (entry["pair_latency"] for entry in index["cells"]["node-ws-cluster × websockets"])
    assert first["median_pair_p50_ns"] == pytest.approx(1.5e6, rel=0.01)
    assert second["slowest_pair_p50_ns"] == pytest.approx(4e6, rel=0.01) and second["rounds"] == 5
    assert second["median_pair_p50_ratio_to_first_point"]["value"] == pytest.approx(2.0, rel=0.01)
    markdown = render_sweep_markdown(index)
    assert "Each pair's latency" in markdown
    row = [line for line in markdown.splitlines() if line.startswith("| node-ws-cluster × websockets |")][-1]
    assert "1.50 ms · 2.00 ms" in row and "(2.00×" in row, row
