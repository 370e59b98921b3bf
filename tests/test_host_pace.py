"""The host's pace in the window: the pure arithmetic (fake counts and clocks), the pacer on real processes, and real
runs with a driver, a compiled client and a program measured from outside; a kill -9 mid-slice leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pingpong.harness.analysis import host_pace, summary
from pingpong.harness.analysis.precision import paced_precision
from pingpong.harness.measure import judge
from pingpong.harness.measure.boundary import ClientRun, ServerFacts, Turn, WindowSamples, attempt_from
from pingpong.harness.measure.pacer import Pacer
from pingpong.harness.results import histograms
from pingpong.harness.results.records import Attempt, Cell, RunResult
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.system import host_sentinel

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = CellSettings(duration_s=0.2, warmup_s=0.2, loop="asyncio", compression="off", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=10, stall_timeout_s=10, pin=True)
SENTINEL_BUILT = pytest.mark.skipif(not host_sentinel.SENTINEL.exists() or len(os.sched_getaffinity(0)) < 2,
                                    reason="needs build/host_sentinel (sh native/build.sh) and two CPUs")


def pace_record(pauses: int = 40, paused_s: float = 0.04, sentinel_ns: float = 15_000.0) -> dict:
    return {"cpus": [1], "run_ms": 4.0, "slice_roundtrips": 40, "pauses": pauses, "paused_s": paused_s,
            "sentinel_ns_per_roundtrip": sentinel_ns, "per_cpu_ns_per_roundtrip": {"cpu1": sentinel_ns},
            "slices_ns": [sentinel_ns] * pauses, "error": None}


def test_a_paced_window_counts_its_running_time_and_takes_its_rate_to_the_reference_pace():
    """1,000 roundtrips in 0.2 s of which 0.04 s paused, the sentinel at 15 µs: 6,250/s raw, 10.67 sentinel
    roundtrips a roundtrip, 9,375/s at the reference pace of 10 µs."""
    paced = host_pace.paced_window(1000, 0.2, pace_record())
    assert paced.running_s == pytest.approx(0.16)
    assert paced.raw_roundtrips_per_s == pytest.approx(6250)
    assert paced.sentinel_roundtrips_per_roundtrip == pytest.approx(1e9 / 6250 / 15_000)
    assert paced.roundtrips_per_s == pytest.approx(6250 * 15_000 / host_pace.REFERENCE_SENTINEL_NS)


def test_the_same_cell_on_a_host_half_as_fast_reads_the_same_at_the_reference_pace():
    """The host slows the cell and its sentinel alike: the raw rate halves, the rate at the reference pace stays."""
    fast = host_pace.paced_window(1000, 0.2, pace_record(sentinel_ns=12_000.0))
    slow = host_pace.paced_window(500, 0.2, pace_record(sentinel_ns=24_000.0))
    assert slow.raw_roundtrips_per_s == pytest.approx(fast.raw_roundtrips_per_s / 2)
    assert slow.roundtrips_per_s == pytest.approx(fast.roundtrips_per_s)
    assert slow.sentinel_roundtrips_per_roundtrip == pytest.approx(fast.sentinel_roundtrips_per_roundtrip)


@pytest.mark.parametrize("record", [None, {"off": "PINGPONG_RAW_WINDOWS=1"}, pace_record(pauses=0),
                                    pace_record(paused_s=0.3), pace_record(sentinel_ns=None)])
def test_a_window_without_a_usable_pace_is_not_paced(record):
    """Off, no pause to say the pace, or no running time left: the raw rate stands as it is."""
    assert host_pace.paced_window(1000, 0.2, record) is None


def test_one_pause_says_a_windows_pace():
    """A busy client of several threads can delay the sentinel's turns to one or two in a short window: the pace its
    slice measured still takes the window to the reference pace."""
    paced = host_pace.paced_window(1000, 0.2, pace_record(pauses=1, paused_s=0.001))
    assert paced is not None and paced.running_s == pytest.approx(0.199)


def client_run(roundtrips: int = 1000, elapsed_s: float = 0.2) -> ClientRun:
    report = {"format_version": 1, "role": "client", "implementation": "fake", "roundtrips": roundtrips,
              "elapsed_s": elapsed_s, "roundtrips_per_s": roundtrips / elapsed_s, "error": None, "errors": 0,
              "latency": {"unit": "ns", "recorded": True, "hdr_histogram": None},
              "pauses": {"continued": 40, "latency_dropped": 80}}
    return ClientRun(0, 123, 0, json.dumps(report), "")


def test_the_judge_puts_the_rate_at_the_reference_pace_and_keeps_the_raw_one_beside_it():
    """The attempt's roundtrips_per_s is at the reference pace; its raw rate, running time and unit-free figure are
    kept, and per-roundtrip figures of the sampled window use its running time and its raw rate."""
    window = WindowSamples(wall_s=0.21, host_pace=pace_record(), server_cpu_s=0.08, client_cpu_s=0.08)
    outcome = judge.judge_attempt([client_run()], None, window, SETTINGS, ServerFacts())
    attempt = attempt_from(Turn(1, "now"), outcome)
    assert attempt.ok and attempt.paced
    assert attempt.roundtrips_per_s == pytest.approx(9375)
    assert attempt.raw_roundtrips_per_s == pytest.approx(6250) and attempt.raw_rate == pytest.approx(6250)
    assert attempt.running_s == pytest.approx(0.16)
    assert attempt.sampled_roundtrips == pytest.approx(6250 * 0.17)
    # 80 ms of CPU over 1,062.5 roundtrips: 75.3 µs raw, at the reference pace 75.3 x 10/15
    assert summary.cpu_us_per_roundtrip(attempt, "server") == pytest.approx(0.08 / (6250 * 0.17) * 1e6 * 10 / 15)


def test_an_unpaced_window_keeps_its_raw_rate_as_the_headline():
    window = WindowSamples(wall_s=0.2, host_pace={"off": "PINGPONG_RAW_WINDOWS=1"})
    attempt = attempt_from(Turn(1, "now"), judge.judge_attempt([client_run()], None, window, SETTINGS,
                                                                ServerFacts()))
    assert not attempt.paced and attempt.roundtrips_per_s == pytest.approx(5000) and attempt.pace_scale == 1.0


def faulted(parts: list[int], roundtrips_per_s: float = 1000.0) -> Attempt:
    return Attempt(repeat=1, status="ok", reason=None, started_at="now", roundtrips=200, elapsed_s=0.2,
                   roundtrips_per_s=roundtrips_per_s, window_wall_s=0.2, client_minor_faults=sum(parts) + 60,
                   interior_minor_faults={"server": 0, "client": sum(parts), "share": 0.5, "server_parts": [0, 0],
                                          "client_parts": parts, "part_shares": [0.25, 0.25]})


def test_a_cost_a_window_pays_once_is_not_taken_for_a_cost_per_roundtrip():
    """A heap that grows once (60 faults in one part of the interior) or a report built at the window's end (60 faults
    outside it) leaves the side settled; a fault every two roundtrips in both parts does not."""
    assert summary.interior_faults_per_roundtrip(faulted([60, 0]), "client") == 0
    per_message = faulted([25, 25])  # 50 roundtrips in each part
    assert summary.interior_faults_per_roundtrip(per_message, "client") == pytest.approx(0.5)
    assert summary.side_cpu([faulted([60, 0]), faulted([0, 0])], "client").unsettled_attempts == 0
    assert summary.side_cpu([per_message], "client").unsettled_attempts == 1


def test_precision_is_said_at_the_reference_pace_and_raw_side_by_side():
    """A cell whose raw rates follow the host but whose unit-free figure holds: within ±3% paced, not raw."""
    attempts = []
    for repeat, sentinel_ns in enumerate([10_000, 13_000, 10_000, 15_000, 11_000, 14_000], start=1):
        raw = 5000 * 10_000 / sentinel_ns
        attempts.append(Attempt(repeat=repeat, status="ok", reason=None, started_at="now", roundtrips=1000,
                                elapsed_s=0.2, roundtrips_per_s=raw * sentinel_ns / 10_000,
                                raw_roundtrips_per_s=raw, running_s=0.17,
                                host_pace=pace_record(sentinel_ns=sentinel_ns)))
    run = RunResult(started_at="now", command_line=[], configuration={"rounds": {"precision": 0.03}},
                    environment={}, implementations={}, cells=[Cell("s", "c", attempts=attempts)])
    both = paced_precision(run)
    assert (both.paced.within, both.raw.within) == (1, 0)
    assert both.paced_median_cv == pytest.approx(0) and both.raw_median_cv > 0.1
    assert "at the reference pace 1 of 1 cells within ±3%" in both.sentence()
    pace = host_pace.run_pace(run)
    assert pace.fast_level_ns == 10_000 and pace.attempts == 6


def stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        return False


@SENTINEL_BUILT
def test_the_pacer_pauses_the_groups_for_sentinel_slices_and_leaves_them_running():
    """Two process groups on one CPU are stopped for each slice and continued after it, and running when the pacer
    stops; the record counts the pauses, their time and the sentinel's pace."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    groups = [subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"],
                               process_group=0) for _ in range(2)]
    try:
        pacer = Pacer([cpu], [g.pid for g in groups])
        pacer.prepare()
        began = time.monotonic()
        pacer.start(began + 10)
        seen_stopped = False
        while time.monotonic() < began + 0.5:
            seen_stopped = seen_stopped or any(stopped(g.pid) for g in groups)
        record = pacer.stop()
        assert not any(stopped(g.pid) for g in groups)
        assert seen_stopped
        assert record["pauses"] >= 10 and record["error"] is None
        assert 0 < record["paused_s"] < 0.5 and len(record["slices_ns"]) == record["pauses"]
        assert record["sentinel_ns_per_roundtrip"] > 0 and record["cpus"] == [cpu]
    finally:
        for group in groups:
            os.killpg(group.pid, signal.SIGKILL)
            group.wait()
        host_sentinel.close_all()


def run_bench(tmp_path: Path, *options: str) -> dict:
    completed = subprocess.run([sys.executable, "run_bench.py", *options, "--duration", "0.3", "--warmup", "0.2",
                                "--host-figure", "off", "--no-figures", "--results-dir", str(tmp_path)],
                               cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-1500:]
    return json.loads((tmp_path / "latest.json").read_text())


@SENTINEL_BUILT
def test_a_run_paces_a_driver_a_compiled_client_and_a_program_measured_from_outside(tmp_path):
    """Every window of a driver, a compiled client and a program measured from outside has the host's pace in it: its
    rate at the reference pace beside its raw rate, and the client's own count of the pauses agrees; a paused
    roundtrip stays out of the latency histogram; the report says both precisions."""
    run = run_bench(tmp_path, "--servers", "sanic", "--clients", "websockets,go-gorilla,websockets-plain",
                    "--repeat", "2")
    attempts = {cell["client"]: cell["attempts"] for cell in run["cells"] if cell["attempts"]}
    assert set(attempts) == {"websockets", "go-gorilla", "websockets-plain"}
    for client, measured in attempts.items():
        for attempt in measured:
            assert attempt["status"] == "ok", attempt["reason"]
            pace = attempt["host_pace"]
            assert pace["pauses"] >= host_pace.MIN_PAUSES and pace["error"] is None, client
            raw = attempt["roundtrips"] / attempt["running_s"]
            assert attempt["raw_roundtrips_per_s"] == pytest.approx(raw)
            assert attempt["roundtrips_per_s"] == pytest.approx(
                raw * pace["sentinel_ns_per_roundtrip"] / host_pace.REFERENCE_SENTINEL_NS)
            assert attempt["running_s"] == pytest.approx(attempt["elapsed_s"] - pace["paused_s"])
            report = attempt["client_report"]
            if client == "websockets-plain":
                continue
            assert report["pauses"]["continued"] == pace["pauses"]
            histogram = histograms.merge([attempt["latency_histogram"]])
            assert histogram.get_total_count() == attempt["roundtrips"] - report["pauses"]["latency_dropped"]
            assert histogram.get_max_value() < min(pace["paused_s"] / pace["pauses"], 0.05) * 1e9 * 0.9 or \
                report["pauses"]["latency_dropped"] >= pace["pauses"]
    markdown = (tmp_path / "latest.md").read_text()
    assert "at the reference pace (a host-sentinel roundtrip of 10 µs" in markdown
    assert "Pace: the host's pace in the windows" in markdown


@SENTINEL_BUILT
def test_the_raw_windows_switch_measures_without_slices(tmp_path):
    """PINGPONG_RAW_WINDOWS=1: no pause, the client counts none, and the headline is the raw rate."""
    completed = subprocess.run([sys.executable, "run_bench.py", "--servers", "sanic", "--clients", "websockets",
                                "--repeat", "1", "--duration", "0.2", "--warmup", "0.1", "--host-figure", "off",
                                "--no-figures", "--results-dir", str(tmp_path)], cwd=ROOT, capture_output=True,
                               text=True, timeout=300, env={**os.environ, "PINGPONG_RAW_WINDOWS": "1"})
    assert completed.returncode == 0, completed.stderr[-1500:]
    attempt = json.loads((tmp_path / "latest.json").read_text())["cells"][0]["attempts"][0]
    assert attempt["host_pace"] == {"off": "PINGPONG_RAW_WINDOWS=1"}
    assert attempt["raw_roundtrips_per_s"] is None and attempt["client_report"]["pauses"]["continued"] == 0
    assert attempt["roundtrips_per_s"] == pytest.approx(attempt["roundtrips"] / attempt["elapsed_s"])


@SENTINEL_BUILT
def test_kill_9_of_the_orchestrator_in_a_paused_slice_leaves_no_stopped_process(tmp_path):
    """The orchestrator killed while the cell is stopped for a slice: the guardian's SIGKILL ends the stopped
    server and client as any other, and the sentinels with them; nothing is left, stopped or running."""
    with open(tmp_path / "run_bench.stderr", "w") as stderr:
        process = subprocess.Popen([sys.executable, str(ROOT / "run_bench.py"), "--servers", "sanic", "--clients",
                                    "websockets", "--repeat", "6", "--duration", "2", "--warmup", "0.2",
                                    "--host-figure", "off", "--results-dir", str(tmp_path / "results")], cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=stderr)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            children = psutil.Process(process.pid).children(recursive=True)
            paused = [child for child in children if stopped(child.pid)]
            if paused:
                pids = [child.pid for child in children]
                break
        else:
            raise AssertionError("no paused slice within 120 s")
    finally:
        process.kill()
        process.wait(10)
    deadline = time.monotonic() + 10
    alive = pids
    while time.monotonic() < deadline and alive:
        alive = [pid for pid in pids if psutil.pid_exists(pid)
                 and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.05)
    assert not alive, [psutil.Process(pid).cmdline() for pid in alive if psutil.pid_exists(pid)]


def test_a_window_that_was_to_be_paced_and_was_not_fails_rather_than_mixing_raw_rates_in():
    """The sentinel failed, or no pause: the attempt fails with why, so a cell's rates stay on one scale."""
    for record, why in ((pace_record(pauses=0), "0 pauses"),
                        ({**pace_record(pauses=0), "error": "the host sentinel failed: it exited"}, "it exited")):
        outcome = judge.judge_attempt([client_run()], None, WindowSamples(wall_s=0.2, host_pace=record), SETTINGS,
                                      ServerFacts())
        assert outcome.status == "error" and why in outcome.reason


def test_a_cell_that_waits_on_timers_keeps_its_own_rate():
    """On one CPU, a cell busy 10% of its running time waits on a timer a pause does not stop: its rate is the
    client's own, with why; a busy cell's is taken to the reference pace."""
    idle = WindowSamples(wall_s=0.2, host_pace=pace_record(), server_cpu_s=0.008, client_cpu_s=0.008)
    attempt = attempt_from(Turn(1, "now"), judge.judge_attempt([client_run()], None, idle, SETTINGS, ServerFacts()))
    assert attempt.ok and not attempt.paced and attempt.roundtrips_per_s == pytest.approx(5000)
    assert "busy 10%" in attempt.pace_not_applied
    busy = WindowSamples(wall_s=0.2, host_pace=pace_record(), server_cpu_s=0.08, client_cpu_s=0.08)
    assert attempt_from(Turn(1, "now"), judge.judge_attempt([client_run()], None, busy, SETTINGS,
                                                            ServerFacts())).paced
