"""Where a roundtrip's time goes: /proc's scheduling text parsed, deltas over a window, the budget's arithmetic, the
reports that show it (and stay as they were without it), and a real pair whose budget adds up."""

import csv
import io
import json
import os
import threading
import time
from dataclasses import replace

import pytest

from pingpong.harness.analysis.summary import summarize_cell, summarize_run
from pingpong.harness.analysis.time_budget import time_budget
from pingpong.harness.measure.boundary import WindowSamples
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.report.csv_rows import CSV_COLUMNS, TIME_BUDGET_COLUMNS, render_csv
from pingpong.harness.report.html import render_html
from pingpong.harness.report.markdown import render_markdown
from pingpong.harness.report.terminal import render_plain, terminal_report
from pingpong.harness.results.records import Cell, RunResult
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.system import scheduling
from pingpong.harness.system.scheduling import Scheduling, SchedulingSample
from tests.conftest import ROOT, by_name
from tests.test_render import ok, sample_run

# /proc/PID/stat of a process whose name holds a space and a parenthesis; utime 1234 and stime 56 ticks.
STAT = (b"4242 (odd) name) S 1 4242 4242 0 -1 4194560 900 0 0 0 1234 56 0 0 20 0 11 0 777 1000000 2000 "
        b"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n")
STATUS = (b"Name:\tpython\nState:\tS (sleeping)\nTgid:\t4242\nThreads:\t1\n"
          b"Cpus_allowed_list:\t0-1\nvoluntary_ctxt_switches:\t5531\nnonvoluntary_ctxt_switches:\t87\n")

# one window of 5 s at 1,000 roundtrips/s (test_render.ok): 5,000 roundtrips, a roundtrip every 1,000 µs
SERVER_READING = Scheduling(run_delay_ns=250_000_000, voluntary_switches=10_000, involuntary_switches=50,
                            user_ticks=30, system_ticks=10, threads=1)  # 50 µs of run delay, 2 switches per rt
CLIENT_READING = Scheduling(run_delay_ns=100_000_000, voluntary_switches=5_000, involuntary_switches=500,
                            user_ticks=0, system_ticks=0, threads=2)


def budgeted(repeat: int, rate: float = 1000):
    return replace(ok(repeat, rate), server_scheduling=SERVER_READING, client_scheduling=CLIENT_READING)


def test_schedstat_gives_the_run_delay_in_its_second_field():
    assert scheduling.parse_run_delay_ns(b"124075692 41035725 157\n") == 41035725


def test_status_gives_the_voluntary_and_involuntary_switches():
    assert scheduling.parse_context_switches(STATUS) == (5531, 87)


def test_stat_gives_user_and_system_ticks_after_the_name():
    """Fields 14 and 15, however many spaces and parentheses the process name holds."""
    assert scheduling.parse_user_and_system_ticks(STAT) == (1234, 56)


def test_a_delta_counts_the_threads_present_at_both_edges_only():
    """A thread that started or exited inside the window is left out with what it did; ticks per process; the main
    thread's (the busiest) CPU and run delay apart from the other threads'."""
    before = SchedulingSample(threads={(10, 10): (1_000, 5, 1, 100), (10, 11): (9_000, 90, 9, 900),
                                       (10, 13): (0, 0, 0, 50)}, ticks={10: (100, 20)})
    after = SchedulingSample(threads={(10, 10): (4_000, 25, 3, 600), (10, 12): (7_000, 70, 7, 700),
                                      (10, 13): (500, 1, 1, 250)}, ticks={10: (130, 25), 20: (50, 50)})
    assert scheduling.delta(before, after) == Scheduling(run_delay_ns=3_500, voluntary_switches=21,
                                                         involuntary_switches=3, user_ticks=30, system_ticks=5,
                                                         threads=2, main_thread_cpu_ns=500, other_threads_cpu_ns=200,
                                                         main_thread_run_delay_ns=3_000)
    assert scheduling.delta(before, SchedulingSample(threads={(10, 12): (1, 1, 1, 1)})) is None


def test_the_main_thread_is_the_one_that_ran_the_loop_not_the_first():
    """Go runs its goroutines on threads of its own and leaves the process's first thread idle: the busiest thread
    of each process is its main one."""
    before = SchedulingSample(threads={(10, 10): (0, 0, 0, 100), (10, 11): (0, 0, 0, 900), (20, 20): (0, 0, 0, 0)})
    after = SchedulingSample(threads={(10, 10): (5, 1, 0, 110), (10, 11): (7, 2, 0, 5_900), (20, 20): (1, 1, 0, 40)})
    reading = scheduling.delta(before, after)
    assert (reading.main_thread_cpu_ns, reading.other_threads_cpu_ns) == (5_040, 10)
    assert reading.main_thread_run_delay_ns == 8


def test_schedstat_gives_the_cpu_time_and_the_run_delay():
    assert scheduling.parse_runtime_and_delay_ns(b"124075692 41035725 157\n") == (124075692, 41035725)


def test_the_budget_puts_the_main_thread_on_the_roundtrip_and_the_other_threads_beside_it():
    """A client whose thread pool does a quarter of its CPU (deflate in Node's zlib pool): the roundtrip is the main
    thread's CPU, its run delay and the time it was blocked; the pool's CPU runs beside it, so blocked stays >= 0."""
    reading = replace(CLIENT_READING, main_thread_cpu_ns=3_000, other_threads_cpu_ns=1_000,
                      main_thread_run_delay_ns=50_000_000)
    good = [replace(ok(repeat, 1000), client_scheduling=reading) for repeat in (1, 2, 3)]
    budget = time_budget(good, "client", cpu_us_per_roundtrip=900.0, median_rate=1000.0)
    assert budget.main_thread_cpu_us == pytest.approx(675) and budget.other_threads_cpu_us == pytest.approx(225)
    assert budget.run_delay_us == pytest.approx(10)  # the main thread's: 50 ms over 5,000 roundtrips
    assert budget.blocked_us == pytest.approx(1000 - 675 - 10)
    assert budget.main_thread_cpu_us + budget.run_delay_us + budget.blocked_us == pytest.approx(1000)


def test_hosts_readings_add_up_and_a_missing_one_makes_none():
    assert scheduling.combined([SERVER_READING, CLIENT_READING]) == Scheduling(350_000_000, 15_000, 550, 30, 10, 3)
    split = replace(SERVER_READING, main_thread_cpu_ns=1, other_threads_cpu_ns=2, main_thread_run_delay_ns=3)
    assert scheduling.combined([split, split]).other_threads_cpu_ns == 4
    assert scheduling.combined([split, SERVER_READING]).main_thread_cpu_ns is None  # one without the split
    assert scheduling.combined([SERVER_READING, None]) is None and scheduling.combined([]) is None


def test_a_sleeping_thread_shows_voluntary_switches_and_a_new_thread_is_left_out():
    """This process, read twice: a thread that sleeps 20 times switches voluntarily at least 20 times; a thread
    started between the readings is not counted."""
    pid = os.getpid()
    ready, finish = threading.Event(), threading.Event()

    def sleeper():
        ready.wait(10)
        for _ in range(20):
            time.sleep(0.001)
        finish.wait(10)

    thread = threading.Thread(target=sleeper)
    thread.start()
    before = scheduling.sample([pid])
    ready.set()
    newcomer = threading.Thread(target=finish.wait, args=(10,))
    newcomer.start()
    time.sleep(0.2)
    after = scheduling.sample([pid])
    finish.set()
    thread.join()
    newcomer.join()
    reading = scheduling.delta(before, after)
    assert reading.voluntary_switches >= 20 and reading.run_delay_ns >= 0 and reading.involuntary_switches >= 0
    assert reading.threads == len(before.threads) == len(after.threads) - 1
    assert scheduling.sample([2**22 + 12345]) == SchedulingSample()  # no such process: nothing, no error


def test_the_readings_cross_as_json_and_older_files_load_without_them():
    """An attempt's scheduling is saved as plain JSON and read back typed; a file from before has None."""
    window = WindowSamples(server_scheduling=SERVER_READING, client_scheduling=CLIENT_READING, wall_s=1.0)
    assert WindowSamples.from_dict(json.loads(json.dumps(window.to_dict()))) == window
    assert WindowSamples.from_dict({"wall_s": 1.0}).server_scheduling is None
    run = RunResult(started_at="t", command_line=[], configuration={}, environment={}, implementations={},
                    cells=[Cell("s", "c", attempts=[budgeted(1), ok(2, 1000)])])
    data = json.loads(json.dumps(run.to_dict()))
    assert data["cells"][0]["attempts"][0]["server_scheduling"]["run_delay_ns"] == 250_000_000
    assert RunResult.from_dict(data) == run
    for attempt in data["cells"][0]["attempts"]:
        del attempt["server_scheduling"], attempt["client_scheduling"]
    assert RunResult.from_dict(data).cells[0].attempts[0].server_scheduling is None


def test_the_budget_splits_the_cpu_by_ticks_and_its_parts_add_up_to_the_roundtrip():
    """1,000 roundtrips/s: 1,000 µs a roundtrip. The server's 200 µs of CPU (1 s over 5,000 roundtrips) split 3:1
    by its ticks, 50 µs of run delay, the rest blocked; the client without a tick has no split."""
    summary = summarize_cell(Cell("s", "c", attempts=[budgeted(1), budgeted(2), budgeted(3)]))
    server = summary.server_time_budget
    assert server.roundtrip_us == pytest.approx(1000) and server.cpu_us == pytest.approx(200)
    assert (server.user_us, server.system_us) == (pytest.approx(150), pytest.approx(50))
    assert server.run_delay_us == pytest.approx(50) and server.blocked_us == pytest.approx(750)
    assert (server.voluntary_switches, server.involuntary_switches, server.ticks) == (2, 0.01, 120)
    assert server.user_us + server.system_us + server.run_delay_us + server.blocked_us == pytest.approx(1000)
    client = summary.client_time_budget
    assert client.user_us is None and client.system_us is None and client.ticks == 0
    assert client.cpu_us == pytest.approx(900) and client.run_delay_us == pytest.approx(20)
    assert client.blocked_us == pytest.approx(1000 - 900 - 20)
    assert summary.to_json()["server_time_budget"]["blocked_us"] == pytest.approx(750)


def test_per_roundtrip_figures_are_medians_over_the_rounds_and_the_roundtrip_is_the_median_rate():
    slow = replace(budgeted(2), server_scheduling=replace(SERVER_READING, run_delay_ns=5_000_000_000))
    good = [budgeted(1), slow, budgeted(3, rate=1250)]
    budget = time_budget(good, "server", cpu_us_per_roundtrip=200.0, median_rate=1000.0)
    assert budget.run_delay_us == pytest.approx(50)  # 50, 1000 and 40 µs: the median
    assert budget.blocked_us == pytest.approx(1000 - 200 - 50)
    assert time_budget([ok(1, 1000)], "server", 200.0, 1000.0) is None  # never read
    assert time_budget(good, "server", None, 1000.0) is None  # no CPU figure


def test_without_readings_no_report_changes():
    """A run saved before the readings: no budget in its summaries, no section, no column, no bar style."""
    run = sample_run()
    summaries = summarize_run(run)
    assert all(s.server_time_budget is None and "server_time_budget" not in s.to_json() for s in summaries.values())
    assert "Where a roundtrip's time goes" not in render_markdown(run, summaries)
    assert next(csv.reader(io.StringIO(render_csv(run, summaries)))) == CSV_COLUMNS
    page = render_html(run, summaries)
    assert "Where a roundtrip" not in page and ".budget" not in page


def budgeted_run() -> RunResult:
    cells = [Cell("steady", "c", attempts=[budgeted(1), budgeted(2), budgeted(3)]),
             Cell("old", "c", attempts=[ok(1, 800), ok(2, 810), ok(3, 790)])]
    return RunResult(started_at="2026-11-21T00:00:00+00:00", command_line=[], configuration=sample_run().configuration,
                     environment={}, implementations={}, cells=cells)


def test_with_readings_the_markdown_csv_html_and_terminal_show_the_budget():
    """The Markdown's table has a row per side of each cell with readings, the CSV its columns (empty for a cell
    without), the HTML a bar per side with a legend; the terminal none, a flagged cell's included (its cause's one
    line points to the files)."""
    run = budgeted_run()
    summaries = summarize_run(run)
    markdown = render_markdown(run, summaries)
    section = markdown.split("## Where a roundtrip's time goes")[1]
    assert "| steady | c | server | 1000.0 | 150.0 | 50.0 | – | – | 50.0 | 750.0 | 2.00 | 0.01 |" in section
    assert "| steady | c | client | 1000.0 | – | – | – | – | 20.0 | 80.0 | 1.00 | 0.10 |" in section
    assert "| old |" not in section
    rows = list(csv.DictReader(io.StringIO(render_csv(run, summaries))))
    assert set(TIME_BUDGET_COLUMNS) <= set(rows[0])
    assert float(rows[0]["server_blocked_us_per_roundtrip"]) == pytest.approx(750)
    assert rows[0]["client_user_us_per_roundtrip"] == "" and rows[1]["server_run_delay_us_per_roundtrip"] == ""
    page = render_html(run, summaries)
    assert page.count('<div class="budget">') == 2 and '<span class="swatch budget-run-delay">' in page
    assert 'class="budget-user" style="width:15.00%"' in page
    assert 'class="budget-blocked" style="width:75.00%"' in page
    unflagged = {key: replace(summary, flags=()) for key, summary in summaries.items()}
    flagged = {**unflagged, ("steady", "c"): replace(summaries[("steady", "c")], flags=("odd on purpose",))}
    for shown in (unflagged, flagged):
        terminal = render_plain(terminal_report(run, shown))
        assert "750.0" not in terminal and "run delay" not in terminal
    assert "  odd on purpose: steady × c." in terminal and "time budget are in the files" in terminal


# A real pair: the websockets server (one Python thread) and the websockets client
PAIR_SETTINGS = CellSettings(duration_s=1.0, warmup_s=0.3, loop="asyncio", compression="off", payload_size=4,
                             payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=True)
TOLERANCE = 1.15  # CPU + run delay of a single-threaded side may pass its roundtrip by the edges' skew, not more


def test_a_real_pairs_budget_exists_and_its_measured_parts_fit_in_the_roundtrip(shared_servers):
    """Both sides of websockets × websockets are read at the window's edges: they leave the CPU at least once per
    roundtrip (each waits for the other), never have a negative run delay, and their CPU plus run delay is within
    the roundtrip (×1.15): each is one thread, so it cannot run or wait for a CPU longer than the wall time.

    A side leaves the CPU by blocking (a voluntary switch) or, when both share one CPU (placement auto), by being
    preempted by the side it has just woken before it reaches its own wait (an involuntary one): both count."""
    server = shared_servers.get(by_name("server", "websockets"), PAIR_SETTINGS)
    attempt = run_attempt_on(server, by_name("client", "websockets"), PAIR_SETTINGS, repeat=1, project_root=ROOT)
    assert attempt.status == "ok", attempt.reason
    roundtrips = attempt.roundtrips_per_s * attempt.window_wall_s
    roundtrip_us = 1e6 / attempt.roundtrips_per_s
    for side in ("server", "client"):
        reading = attempt.scheduling(side)
        assert reading is not None and reading.threads >= 1, side
        switches = reading.voluntary_switches + reading.involuntary_switches
        assert switches / roundtrips > 0.5 and reading.run_delay_ns >= 0, (side, reading)
        cpu_us = getattr(attempt, f"{side}_cpu_s") / roundtrips * 1e6
        run_delay_us = reading.run_delay_ns / 1e3 / roundtrips
        assert cpu_us + run_delay_us <= roundtrip_us * TOLERANCE, (side, cpu_us, run_delay_us, roundtrip_us)
    summary = summarize_cell(Cell("websockets", "websockets", attempts=[attempt]))
    for side in ("server", "client"):
        budget = summary.time_budget(side)
        assert budget.voluntary_switches > 0 and budget.run_delay_us >= 0
        parts = budget.cpu_us + budget.run_delay_us + budget.blocked_us
        assert parts == pytest.approx(budget.roundtrip_us)
        if budget.user_us is not None:
            assert budget.user_us + budget.system_us == pytest.approx(budget.cpu_us)
