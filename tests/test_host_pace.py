"""The host's pace in the window: the pure arithmetic (fake counts and clocks), the pacer on real processes, and real
runs with a driver, a compiled client and a program measured from outside; a kill -9 mid-slice leaves nothing.
On one CPU the sentinel takes the CPU in the real-time class and stops no one (measure/pacer.py, STOP_PREEMPT); where
that is refused, and for a cell on two CPUs, the cell is stopped with SIGSTOP for each slice."""

from __future__ import annotations

import json
import shutil
import statistics
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pingpong.harness.analysis import host_pace, summary
from pingpong.harness.analysis.host_modes import SLOW_FACTOR
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


def test_a_side_is_settled_by_what_its_faults_cost_a_roundtrip_at_the_runs_cost_of_a_fault():
    """With the run's cost of a fault, the line is a share of the roundtrip: 0.5 faults per roundtrip at 4 µs each are
    0.2% of a 1 ms roundtrip (settled) and 4% of a 50 µs one (not). So a cost paid per second (25 faults in each 50 ms
    part) costs the same share at any rate, where the count per roundtrip grows as the host slows. Without the
    figure (older files) the count alone decides."""
    slow, fast = faulted([25, 25], roundtrips_per_s=1000.0), faulted([500, 500], roundtrips_per_s=20000.0)
    per_second = faulted([25, 25], roundtrips_per_s=20000.0)
    assert summary.interior_faults_per_roundtrip(per_second, "client") == pytest.approx(0.025)
    assert summary.side_cpu([per_second], "client", us_per_fault=4.0).max_fault_cost_share == pytest.approx(0.002)
    settled = summary.side_cpu([slow], "client", us_per_fault=4.0)
    assert settled.unsettled_attempts == 0 and settled.max_fault_cost_share == pytest.approx(0.002)
    unsettled = summary.side_cpu([slow, fast], "client", us_per_fault=4.0)
    assert unsettled.unsettled_attempts == 1 and unsettled.max_fault_cost_share == pytest.approx(0.04)
    assert summary.side_cpu([slow, fast], "client").unsettled_attempts == 2
    assert summary.side_cpu([slow, fast], "client").max_fault_cost_share is None
    assert summary.us_per_fault({"page_fault": {"us_per_fault": 3.8}}) == 3.8
    assert summary.us_per_fault({"page_fault": {"us_per_fault": None, "error": "x"}}) is None
    assert summary.us_per_fault({}) is None


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
    assert pace.classes == {host_pace.ORDINARY: 6}  # records without "stop": the stopping sentinel's
    assert "the cell stopped with SIGSTOP" in pace.sentence()


def paced_run(stops: list[str | None]) -> RunResult:
    attempts = [Attempt(repeat=repeat, status="ok", reason=None, started_at="now", roundtrips=1000, elapsed_s=0.2,
                        roundtrips_per_s=5000.0, raw_roundtrips_per_s=4000.0, running_s=0.19,
                        host_pace={**pace_record(), **({"stop": stop} if stop else {})})
                for repeat, stop in enumerate(stops, start=1)]
    return RunResult(started_at="now", command_line=[], configuration={}, environment={}, implementations={},
                     cells=[Cell("s", "c", attempts=attempts)])


def test_a_runs_windows_say_which_class_of_sentinel_timed_them():
    """preempt: the real-time sentinel took the CPU; sentinel, orchestrator or no record of it: the cell was stopped
    and the sentinel was an ordinary process. The Pace: line says which, and how many of each when both."""
    assert host_pace.sentinel_classes(paced_run(["preempt", "preempt"])) == {host_pace.REAL_TIME}
    assert host_pace.sentinel_classes(paced_run(["sentinel", None])) == {host_pace.ORDINARY}
    two_cpus = paced_run(["orchestrator"])
    two_cpus.cells[0].attempts[0].host_pace["cpus"] = [0, 1]
    assert host_pace.sentinel_classes(two_cpus) == set()  # timed by ordinary sentinels on any host: no class to keep
    assert "the sentinel in the real-time class, taking the CPU" in host_pace.run_pace(
        paced_run(["preempt"])).sentence()
    mixed = host_pace.run_pace(paced_run(["preempt", "preempt", "sentinel"]))
    assert mixed.classes == {host_pace.REAL_TIME: 2, host_pace.ORDINARY: 1}
    assert "2 with the sentinel in the real-time class" in mixed.sentence()
    assert "1 with the cell stopped with SIGSTOP" in mixed.sentence()


def test_resume_and_compare_keep_the_two_sentinel_classes_apart(tmp_path):
    """A run paced by the stopping sentinel is not continued with real-time rounds (nor the reverse); compare says
    when its runs were paced in both classes."""
    from pingpong.harness.results.files import resume
    from pingpong.harness.results.records import write_atomically
    from pingpong.harness.settings.usage import UsageError
    saved = tmp_path / "ordinary.json"
    write_atomically(saved, json.dumps(paced_run(["sentinel"] * 3).to_dict(None)))
    fresh = paced_run([])
    with pytest.raises(UsageError, match="ordinary class, the new rounds' would be in the real-time one"):
        resume(saved, fresh, tmp_path, host_pace.REAL_TIME)
    resumed, _ = resume(saved, fresh, tmp_path, host_pace.ORDINARY)
    assert len(resumed.cells[0].attempts) == 3
    other = tmp_path / "real-time.json"
    write_atomically(other, json.dumps(paced_run(["preempt"] * 3).to_dict(None)))
    compared = subprocess.run([sys.executable, "run_bench.py", "compare", str(saved), str(other)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    assert "paced by the host sentinel in two classes" in compared.stderr, compared.stderr[-800:]


def stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        return False


def paced_for(pacer: Pacer, pids: list[int], seconds: float) -> tuple[dict, bool]:
    """Run a prepared pacer for this long, watching whether any of pids is ever seen stopped: (its record, seen)."""
    began = time.monotonic()
    pacer.start(began + 10)
    seen_stopped = False
    while time.monotonic() < began + seconds:
        seen_stopped = seen_stopped or any(stopped(pid) for pid in pids)
    return pacer.stop(), seen_stopped


@SENTINEL_BUILT
def test_a_stopping_pacer_stops_the_groups_for_each_slice_and_leaves_them_running():
    """Without the real-time class (preempt=False): two process groups on one CPU are stopped for each slice and
    continued after it, and running when the pacer stops; the record counts the pauses, their time and the
    sentinel's pace."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    groups = [subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"],
                               process_group=0) for _ in range(2)]
    try:
        pacer = Pacer([cpu], [g.pid for g in groups], preempt=False, slice_log=host_pace.SliceLog())
        pacer.prepare()
        pacer.warm_slice()  # the slice before the warm-up: the groups running after it, the slice not a pause
        assert not any(stopped(g.pid) for g in groups) and pacer.pauses == 0 and pacer.warm_slice_ns > 0
        taken = pacer.warm_slice_ns
        pacer.warm_slice()  # once a window
        assert pacer.warm_slice_ns == taken
        record, seen_stopped = paced_for(pacer, [g.pid for g in groups], 0.5)
        assert not any(stopped(g.pid) for g in groups)
        assert record["warm_slice_ms"] == pytest.approx(taken / 1e6, abs=1e-3)
        assert seen_stopped and record["stop"] == "sentinel"
        assert record["pauses"] >= 10 and record["error"] is None
        assert 0 < record["paused_s"] < 0.5 and len(record["slices_ns"]) == record["pauses"]
        assert record["sentinel_ns_per_roundtrip"] > 0 and record["cpus"] == [cpu]
        # read against the fast mode of its own slices and those of the run's earlier windows (none here)
        assert record["fast_mode"]["slices"] == record["pauses"] and record["sentinel_ns_trimmed"] > 0
        assert record["sentinel_ns_per_roundtrip"] == pytest.approx(host_pace.window_pace_ns(
            record["slices_ns"], fast=host_pace.fast_mode(record["slices_ns"])), rel=1e-3)
    finally:
        for group in groups:
            os.killpg(group.pid, signal.SIGKILL)
            group.wait()
        host_sentinel.close_all()


# A busy process on the measured CPU: it counts the SIGCONTs it gets and notes every gap of more than 0.1 ms between
# two readings of the clock (the CPU taken from it), and prints both when its stdin closes.
GAP_WATCHER = """
import os, signal, sys, threading, time
continued = 0
def count(*_):
    global continued
    continued += 1
signal.signal(signal.SIGCONT, count)
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
gaps, last = [], time.monotonic_ns()
print("ready", flush=True)
while not done.is_set():
    now = time.monotonic_ns()
    if now - last > 100_000:
        gaps.append(now - last)
    last = now
print(continued, *gaps, flush=True)
"""


def gap_watcher(cpu: int) -> subprocess.Popen:
    process = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", GAP_WATCHER], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, process_group=0)
    assert process.stdout.readline().strip() == "ready"
    return process


@SENTINEL_BUILT
def test_a_preempting_pacer_takes_the_cpu_from_the_groups_for_each_slice_without_stopping_them():
    """The default on one CPU: the sentinel in the real-time class takes the CPU for each slice; the groups are never
    stopped, each of their processes sees each slice as a gap in its clock as long as the slice, and gets one
    SIGCONT per pause to count (the drivers' latency filter)."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    busy = gap_watcher(cpu)
    try:
        pacer = Pacer([cpu], [busy.pid])
        pacer.prepare()
        real_time = pacer.stop_mode == "preempt" and all(
            os.sched_getscheduler(sentinel.process.pid) == os.SCHED_FIFO for sentinel in pacer._sentinels)
        record, seen_stopped = paced_for(pacer, [busy.pid], 0.5)
        output, _ = busy.communicate("", timeout=10)
    finally:
        if busy.poll() is None:
            os.killpg(busy.pid, signal.SIGKILL)
            busy.wait()
        host_sentinel.close_all()
    if record.get("preempt_refused"):
        pytest.skip(record["preempt_refused"])
    continued, *gaps = (int(field) for field in output.split())
    assert real_time and record["stop"] == "preempt" and record["error"] is None and not seen_stopped
    # two SIGCONTs that come while the watcher waits for the CPU are one signal (standard signals do not queue)
    assert record["pauses"] >= 10 and record["pauses"] - 1 <= continued <= record["pauses"]
    shortest_slice_ns = min(record["slices_ns"]) * record["slice_roundtrips"]
    assert sum(gap >= 0.9 * shortest_slice_ns for gap in gaps) >= record["pauses"]


CAN_DROP_SYS_NICE = os.geteuid() == 0 and shutil.which("setpriv") is not None


@SENTINEL_BUILT
@pytest.mark.skipif(not CAN_DROP_SYS_NICE, reason="needs root and setpriv to run the sentinel without CAP_SYS_NICE")
def test_where_the_real_time_class_is_refused_the_pacer_stops_the_groups_and_says_why(tmp_path, monkeypatch):
    """The sentinel run without CAP_SYS_NICE (and with no RLIMIT_RTPRIO) is refused SCHED_FIFO: it exits 3 saying
    so; the pacer, handed that sentinel, falls back to one that stops the groups, and its record says why."""
    wrapper = tmp_path / "host_sentinel"
    wrapper.write_text(f"#!/bin/sh\nexec prlimit --rtprio=0 setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice "
                       f"{host_sentinel.SENTINEL} \"$@\"\n")
    wrapper.chmod(0o755)
    refused = subprocess.run([str(wrapper), "--preempt"], input="10\n", capture_output=True, text=True, timeout=10)
    assert refused.returncode == host_sentinel.PREEMPT_REFUSED_EXIT and refused.stdout == ""
    assert "SCHED_FIFO" in refused.stderr
    monkeypatch.setattr(host_sentinel, "SENTINEL", wrapper)
    monkeypatch.setattr(host_sentinel, "preempt_refused", None)
    cpu = sorted(os.sched_getaffinity(0))[-1]
    busy = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"], process_group=0)
    try:
        host_sentinel.close_all()  # none of the real sentinels: the wrapper's are started
        pacer = Pacer([cpu], [busy.pid])
        pacer.prepare()
        record, seen_stopped = paced_for(pacer, [busy.pid], 0.3)
        assert host_sentinel.real_time_granted(cpu) is False
    finally:
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()
        host_sentinel.close_all()
    assert seen_stopped and record["stop"] == "sentinel" and record["pauses"] >= 5, record
    assert "refused the host sentinel the real-time class" in record["preempt_refused"]


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
            # one slice as the client connected, before its warm-up: a driver and a compiled client say so; a
            # program measured from outside is watched only from its window on
            assert (pace["warm_slice_ms"] is None) == (client == "websockets-plain"), (client, pace["warm_slice_ms"])
            assert pace["warm_slice_ms"] is None or pace["warm_slice_ms"] > 0
            # the client's received segments between the pauses: two a roundtrip (A's and B's message) over the
            # pacer's span, which starts as the orchestrator sees the window start and so covers a little less
            pieces = pace["intervals"]
            assert len(pieces["running_ns"]) == len(pieces["segments_in"]) == pace["pauses"] + 1, client
            # (a pacer started late under load covers less; one side's count, not both sides', at most two)
            assert 0.5 < sum(pieces["segments_in"]) / attempt["roundtrips"] <= 2.05, (client, pieces)
            assert min(pieces["segments_in"]) >= 0 and min(pieces["running_ns"]) >= 0
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


def in_a_slice(children: list[psutil.Process], placement: str) -> bool:
    """Whether the run's cell is in a slice now: split, a process of it stopped (the orchestrator stops a cell on
    two CPUs); same-cpu, the real-time sentinel running (it takes the cell's CPU and stops no one)."""
    for child in children:
        try:
            if placement == "split" and child.status() == psutil.STATUS_STOPPED:
                return True
            if (placement == "same-cpu" and child.name() == "host_sentinel"
                    and os.sched_getscheduler(child.pid) == os.SCHED_FIFO
                    and child.status() == psutil.STATUS_RUNNING):
                return True
        except (psutil.NoSuchProcess, ProcessLookupError):
            continue
    return False


@SENTINEL_BUILT
@pytest.mark.parametrize("placement", ["split", "same-cpu"])
def test_kill_9_of_the_orchestrator_in_a_slice_leaves_no_process_stopped_or_running(tmp_path, placement):
    """The orchestrator killed in the middle of a slice (split: the cell stopped from the orchestrator; same-cpu: the
    real-time sentinel holding the cell's CPU): the guardian's SIGKILL ends the server and client (stopped or not)
    and the sentinels with them; nothing is left, stopped or running."""
    with open(tmp_path / "run_bench.stderr", "w") as stderr:
        process = subprocess.Popen([sys.executable, str(ROOT / "run_bench.py"), "--servers", "sanic", "--clients",
                                    "websockets", "--repeat", "6", "--duration", "2", "--warmup", "0.2",
                                    "--placement", placement, "--host-figure", "off",
                                    "--results-dir", str(tmp_path / "results")], cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=stderr)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            children = psutil.Process(process.pid).children(recursive=True)
            if in_a_slice(children, placement):
                pids = [child.pid for child in children]
                break
        else:
            raise AssertionError("no slice seen within 120 s")
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
                        ({**pace_record(pauses=0), "start_late_s": 0.31},  # the watcher handled the start late
                         "0 pauses (at least 1 needed); the pauses began 0.310 s after the window's start event"),
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


def test_the_elasticity_of_a_cells_rate_to_the_sentinels_pace():
    """Rates that fall as the pace's 1.5th power: elasticity 1.5, nothing left at it, something at the reference
    pace (which takes it as 1); the slice settings parse with their mode, a wrong mode is refused."""
    from benchmarks.window_pace import elasticity, parse_slices
    paces = [10_000.0, 12_000.0, 15_000.0, 11_000.0, 13_500.0]
    fit = elasticity([1e6 * pace ** -1.5 for pace in paces], paces)
    assert fit["elasticity"] == pytest.approx(1.5) and fit["correlation"] == pytest.approx(-1.0)
    assert fit["left_at_fitted"] == pytest.approx(0, abs=1e-9) and fit["left_at_reference_pace"] > 0.05
    assert elasticity([1.0, 2.0], [1.0, 2.0]) is None
    assert parse_slices("16:80,4:20:stop") == [(0.016, 80, True), (0.004, 20, False)]
    with pytest.raises(ValueError, match="preempt or stop"):
        parse_slices("16:80:later")


def test_the_committed_slice_densities_give_the_documented_figures():
    """docs/methodology.md's table of slice densities and elasticities comes from the committed file, through
    window_pace --summarize."""
    completed = subprocess.run([sys.executable, "-m", "benchmarks.window_pace", "--summarize",
                                "results/reference/2026-11-27-window-pace-cv-preempt.json.xz"], cwd=ROOT,
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-800:]
    cells = {cell["runtime"]: cell for cell in json.loads(completed.stdout)["cells"]}
    assert len(cells) == 9
    at_16 = {name: cell["slices"]["16:80:preempt"] for name, cell in cells.items()}
    assert round(100 * at_16["c"]["paced_cv"], 1) == 5.8 and round(100 * cells["c"]["raw_cv"], 1) == 11.8
    assert round(at_16["node"]["elasticity"]["elasticity"], 2) == 1.83
    assert min(round(s["elasticity"]["elasticity"], 2) for s in at_16.values()) == 1.09
    medians = [statistics.median(cell["slices"][name]["paced_cv"] for cell in cells.values())
               for name in ("16:80:preempt", "8:40:preempt", "4:20:preempt")]
    assert [round(100 * median, 1) for median in medians] == [5.8, 6.2, 5.9]


def test_a_windows_pace_leaves_out_its_fastest_and_slowest_fifth_of_slices():
    """One slice the host took the vCPU from (9x slower) moves the plain mean by 80%, the window's pace not at all;
    with fewer than five slices nothing is left out; no slice, no pace."""
    slices = [10_000.0, 10_400.0, 9_800.0, 10_200.0, 90_000.0, 10_000.0, 9_900.0, 10_100.0, 10_300.0, 9_700.0]
    assert statistics.fmean(slices) == pytest.approx(18_040)
    assert host_pace.window_pace_ns(slices) == pytest.approx(statistics.fmean(sorted(slices)[2:8]))
    assert 9_900 < host_pace.window_pace_ns(slices) < 10_200
    assert host_pace.window_pace_ns([10_000.0, 30_000.0]) == 20_000
    assert host_pace.window_pace_ns([]) is None


def test_the_pace_estimators_are_compared_on_recorded_slices():
    """benchmarks/pace_estimators: a cell whose raw rates follow the host, one window of it with a slice hit by the
    host: the trimmed pace leaves its rounds steadier than the plain mean does."""
    from benchmarks.pace_estimators import run_figures
    attempts = []
    for repeat, level in enumerate([10_000, 13_000, 10_000, 15_000], start=1):
        slices = [float(level)] * 12
        if repeat == 2:
            slices[3] = 8 * level  # the host took the vCPU in this slice
        attempts.append({"status": "ok", "raw_roundtrips_per_s": 5000 * 10_000 / level,
                         "host_pace": {"slices_ns": slices}})
    figures = run_figures({"cells": [{"server": "s", "client": "c", "attempts": attempts}]})
    assert figures["cells"] == 1 and figures["median_cv"]["trimmed"] == pytest.approx(0, abs=1e-12)
    assert figures["median_cv"]["mean"] > 0.1 and figures["median_cv"]["raw"] > 0.1
    assert figures["over_trimmed"]["mean"] == pytest.approx(1.0)
    assert figures["median_cv"]["fast mode"] == pytest.approx(0, abs=1e-12) and figures["within"]["fast mode"] == 1


def test_on_a_calm_host_the_fast_modes_jitter_no_longer_spreads_the_rates():
    """A cell whose raw rate does not move, 30 windows on a host whose slices only jitter (±4%, its fast mode): by the
    trimmed mean, the window's pace carries the jitter into the rates at the reference pace; read with the fast mode,
    every window counts as its typical slice and the rates are as steady as the raw ones. A slow slice (1.4x) still
    counts at what it read."""
    from benchmarks.pace_estimators import run_figures
    import random
    draw = random.Random(7)
    attempts = [{"status": "ok", "raw_roundtrips_per_s": 5000.0, "started_at": f"2026-11-29T12:00:{repeat:02d}",
                 "host_pace": {"slices_ns": [10_000.0 * draw.uniform(0.96, 1.04) for _ in range(12)],
                               "stop": "preempt"}} for repeat in range(30)]
    figures = run_figures({"cells": [{"server": "s", "client": "c", "attempts": attempts}]})
    assert figures["median_cv"]["raw"] == 0 and figures["median_cv"]["trimmed"] > 0.003
    assert figures["median_cv"]["fast mode"] < figures["median_cv"]["trimmed"] / 2  # the first windows: few slices yet
    assert figures["within"]["fast mode"] == 1
    # the main peak near 10 µs, a second one 9-10% slower (still the fast mode), a slow slice
    slices = [10_000.0, 10_100.0, 9_900.0, 10_050.0, 10_900.0, 10_950.0, 10_880.0, 14_000.0]
    fast = host_pace.fast_mode(slices)
    assert fast.level_ns == 9_900.0 and fast.typical_ns == 10_025.0 and fast.slices == 8  # the main peak's median
    assert host_pace.fast_mode(slices, peak=SLOW_FACTOR).typical_ns == 10_100.0  # every fast slice's, as before
    assert host_pace.window_pace_ns([10_300.0, 10_950.0, 14_000.0], fast=fast) == pytest.approx(
        (10_025.0 * 2 + 14_000.0) / 3)
    assert host_pace.window_pace_ns([10_300.0, 9_800.0], fast=None) == pytest.approx(10_050.0)
    assert host_pace.fast_mode([]) is None


def test_a_second_peak_of_the_fast_mode_whose_share_moves_over_the_run_does_not_move_the_rates():
    """The calm host of 2026-11-29 afternoon: within the fast mode the sentinel read a main peak and another 9% above
    it, which the cell did not share, in a share that moved over a run (most in its first minute). A cell whose raw
    rate does not move, 10 windows with half their slices in the upper peak and then 30 with a tenth: read against
    the median of every fast slice, the first windows' pace stood apart from the later ones'; read against the main
    peak's, every window's pace is the same, and so are the rates."""
    from benchmarks.pace_estimators import run_figures
    import random
    draw = random.Random(11)

    def window(upper_share: float) -> list[float]:
        return [(10_900.0 if draw.random() < upper_share else 10_000.0) * draw.uniform(0.995, 1.005)
                for _ in range(6)]
    attempts = [{"status": "ok", "raw_roundtrips_per_s": 5000.0, "started_at": f"2026-11-29T15:00:{index:02d}",
                 "host_pace": {"slices_ns": window(0.5 if index < 10 else 0.1), "stop": "preempt"}}
                for index in range(40)]
    figures = run_figures({"cells": [{"server": "s", "client": "c", "attempts": attempts}]})
    assert figures["median_cv"]["fast mode, every fast slice"] > 0.005
    assert figures["median_cv"]["fast mode"] < 0.001
    paces = host_pace.replayed_paces([("preempt", a["host_pace"]["slices_ns"]) for a in attempts])
    assert max(paces) / min(paces) < 1.002


def test_the_slice_log_reads_the_fast_mode_of_every_slice_so_far_by_stop_mode_and_forgets_the_oldest():
    """A first window is read against its own slices, later ones against all so far; the two sentinel classes keep
    separate logs; a replay of stored windows gives what the log gave; beyond LOGGED_SLICES the oldest go."""
    log = host_pace.SliceLog()
    first = log.add("preempt", [10_000.0] * 10)
    assert (first.level_ns, first.typical_ns, first.slices) == (10_000.0, 10_000.0, 10)
    second = log.add("preempt", [8_000.0] * 10)
    assert second.slices == 20 and second.level_ns == 8_000.0 and second.typical_ns == 8_000.0
    assert log.add("orchestrator", [13_000.0]).level_ns == 13_000.0
    windows = [("preempt", [10_000.0] * 10), ("preempt", [8_000.0] * 10), ("orchestrator", [13_000.0])]
    assert host_pace.replayed_paces(windows) == [10_000.0, 8_000.0, 13_000.0]
    small = host_pace.SliceLog()
    small.LOGGED_SLICES = 5
    small.add("preempt", [1_000.0] * 5)
    assert small.add("preempt", [2_000.0] * 5).level_ns == 2_000.0


def test_runs_at_different_hours_compare_alike_by_either_pace_read_again_from_their_slices():
    """hours_agreement on the morning's three committed runs: the plain mean of each window's slices gives back the
    recorded rates' agreement exactly; the trimmed pace puts more cells within ±5% across the runs (33 against 27)."""
    completed = subprocess.run([sys.executable, "-m", "benchmarks.hours_agreement",
                                *(f"results/reference/2026-11-27-default-paced-{n}.json.xz" for n in (1, 2, 3))],
                               cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-800:]
    found = json.loads(completed.stdout)
    again, recorded = found["paced again from the slices, their mean, all"], found["paced, all"]
    assert (again["cells"], again["within"]) == (recorded["cells"], recorded["within"])
    assert again["median_spread"] == pytest.approx(recorded["median_spread"], rel=1e-4)
    assert (found["paced, all"]["within"], found["paced again from the slices, trimmed, all"]["within"]) == (27, 33)


def test_a_process_that_forgets_close_all_still_ends_its_sentinel_before_the_guardian_has_to():
    """A benchmark that measured paced attempts and exits without host_sentinel.close_all(): its sentinel ends with it,
    by its own exit handler, and the guardian finds nothing left to end."""
    from pingpong.harness.system import host_sentinel
    if not host_sentinel.SENTINEL.exists():
        pytest.skip("the host sentinel is not built (sh native/build.sh)")
    script = ("from pingpong.harness.system import host_sentinel\n"
              "sentinel = host_sentinel.sentinel_on(0)\n"
              "print(sentinel.process.pid, flush=True)\n")
    completed = subprocess.run([sys.executable, "-c", script], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    pid = int(completed.stdout.split()[0])
    assert "ended process groups" not in completed.stderr
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


# A process with an io_uring ring set up with IORING_SETUP_SQPOLL, as libuv 1.45 to 1.48 set one up for every loop
# (uvloop 0.19.0's): the kernel starts its polling thread, "iou-sqp-<pid>". io_uring_setup is syscall 425 on x86-64
# and arm64; its io_uring_params are 120 bytes, flags at byte 8, sq_thread_idle (ms) at byte 16.
SQPOLL_RING = """
import ctypes, struct, sys
params = ctypes.create_string_buffer(120)
struct.pack_into("I", params, 8, 1 << 1)  # IORING_SETUP_SQPOLL
struct.pack_into("I", params, 16, 10)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
if libc.syscall(425, 8, params) < 0:
    sys.exit(f"io_uring_setup refused: errno {ctypes.get_errno()}")
"""
SQPOLL_SERVER = SQPOLL_RING + "import runpy; runpy.run_module('servers.websockets_server', run_name='__main__')\n"


def io_uring_allowed() -> bool:
    completed = subprocess.run([sys.executable, "-c", SQPOLL_RING], capture_output=True, text=True, timeout=30)
    return completed.returncode == 0


SQPOLL_ALLOWED = pytest.mark.skipif(not io_uring_allowed(), reason="this kernel refuses io_uring_setup with "
                                    "IORING_SETUP_SQPOLL (io_uring off: sysctl kernel.io_uring_disabled, seccomp)")


@SQPOLL_ALLOWED
def test_a_side_with_an_sqpoll_thread_is_found_and_kept_from_signalled_slices(tmp_path):
    """The SQPOLL thread of a real ring is found in its process group, and a cell stopped by signals (several CPUs)
    is measured without slices because of it; on one CPU (no one stopped) it is paced. A plain process has none."""
    from pingpong.harness.measure.pacer import SQPOLL_THREAD, signalled_sqpoll_reason, sqpoll_threads
    from pingpong.harness.system import processes
    ring = processes.start("ring", [sys.executable, "-c", SQPOLL_RING + "print('ready', flush=True)\n"
                                    "import time; time.sleep(60)"], ROOT, tmp_path)
    plain = processes.start("plain", [sys.executable, "-c", "import time; time.sleep(60)"], ROOT, tmp_path)
    try:
        deadline = time.monotonic() + 20
        while "ready" not in ring.stdout_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        found = sqpoll_threads([ring.pid])
        assert len(found) == 1
        assert open(f"/proc/{ring.pid}/task/{found[0]}/comm").read().strip() == f"{SQPOLL_THREAD}{ring.pid}"
        assert sqpoll_threads([plain.pid]) == []
        reason = signalled_sqpoll_reason([0, 1], [plain.pid, ring.pid])
        assert reason is not None and f"thread {found[0]}" in reason
        assert signalled_sqpoll_reason([1], [plain.pid, ring.pid]) is None  # one CPU: preempted, not stopped
        assert signalled_sqpoll_reason([0, 1], [plain.pid]) is None
    finally:
        processes.stop(ring)
        processes.stop(plain)


@SENTINEL_BUILT
@SQPOLL_ALLOWED
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs: the server on one, the client on the "
                    "other")
def test_a_run_with_an_sqpoll_server_on_two_cpus_measures_it_raw_and_says_why(tmp_path):
    """The websockets server with an SQPOLL ring of its own (tests' manifest entry written here): with the client on
    the other CPU its windows are measured raw, the attempt saying why; on one CPU they are paced."""
    manifest = tmp_path / "sqpoll.toml"
    manifest.write_text(f"""
[[server]]
name = "websockets-sqpoll"
runtime = "python"
protocol = "websocket"
command = ["{{python}}", "-c", {json.dumps(SQPOLL_SERVER)}]
requires = ["python-module:websockets"]
loops = ["auto", "asyncio", "uvloop"]
compression = ["default", "off"]
""")
    for placement, paced in (("split", False), ("same-cpu", True)):
        run = run_bench(tmp_path / placement, "--manifest", "manifest.toml", "--manifest", str(manifest),
                        "--servers", "websockets-sqpoll", "--clients", "websockets", "--repeat", "1",
                        "--placement", placement)
        (attempt,) = run["cells"][0]["attempts"]
        assert attempt["status"] == "ok", attempt["reason"]
        if paced:
            assert "off" not in attempt["host_pace"] and attempt["host_pace"]["pauses"] > 0
        else:
            assert "io_uring SQPOLL thread" in attempt["host_pace"]["off"]
            assert attempt["client_report"]["pauses"]["continued"] == 0


def test_the_cells_slopes_against_the_pace_are_read_and_a_slope_from_other_runs_is_applied():
    """benchmarks/cell_elasticity: in two runs, one cell slows exactly as the sentinel (slope 1) and one 1.5 times as
    much: the slopes read 1 and 1.5; at the pace the first's rounds do not spread and the second's do; a slope taken
    from the other run leaves neither spread; one slope for the run lies between."""
    from benchmarks.cell_elasticity import cell_points, read_runs
    levels = [10_000.0, 13_000.0, 16_000.0, 20_000.0, 25_000.0]

    def run(start: int) -> dict:
        cells = []
        for server, elasticity in (("follows", 1.0), ("steeper", 1.5)):
            attempts = [{"status": "ok", "raw_roundtrips_per_s": 5000 * (10_000 / level) ** elasticity,
                         "started_at": f"2026-11-29T0{start}:00:{index:02d}.{server == 'steeper':d}",
                         "host_pace": {"slices_ns": [level] * 12, "stop": "preempt"}}
                        for index, level in enumerate(levels)]
            cells.append({"server": server, "client": "c", "attempts": attempts})
        return {"cells": cells}
    figures = read_runs({"one": cell_points(run(1)), "two": cell_points(run(2))})
    slopes = {cell["server"]: cell["median_slope"] for cell in figures["cells"]}
    assert slopes == {"follows": pytest.approx(1.0), "steeper": pytest.approx(1.5)}
    first = figures["runs"][0]
    assert first["cells"] == 2 and 1.0 < first["slope_for_the_run"] < 1.5
    # the median over the cells: of none and the steeper cell's spread
    assert first["median_cv"]["raw"] > 0.2 and first["median_cv"]["pace"] > 0.05
    assert first["median_cv"]["slope per cell, from the other runs"] == pytest.approx(0, abs=1e-9)
    assert first["median_cv"]["slope per cell, round left out"] == pytest.approx(0, abs=1e-9)
    assert first["over_raw"]["pace"] == pytest.approx(first["median_cv"]["pace"] / first["median_cv"]["raw"], abs=1e-3)


def test_a_windows_running_pieces_are_cut_at_its_pauses_and_the_fast_ones_read_alone():
    """Readings of the client's received segments as the pauses begin, in each pause and as they end: a piece runs
    from a pause's end to the next one's start. The pieces around a slow slice are left out of the fast pieces'
    rate; without a fast piece, or without pieces, there is none."""
    pieces = host_pace.running_intervals((1_000, 100), [(17_000, 1_000, 180), (34_000, 1_000, 260)], (51_000, 340))
    assert pieces == {"running_ns": [16_000, 16_000, 16_000], "segments_in": [80, 80, 80]}
    fast = host_pace.FastMode(level_ns=10_000.0, typical_ns=10_000.0, slices=2)
    # the second slice slow: only the first piece (before the first slice, fast) is fast on both of its sides; the
    # last piece (after the last slice: it runs past the client's window) counts in neither rate
    uneven = {"running_ns": [10_000, 10_000, 10_000], "segments_in": [60, 30, 5]}
    found = host_pace.fast_intervals(uneven, [10_000.0, 14_000.0], fast)
    assert found["rate_ratio"] == pytest.approx(60 / 45) and found["running_share"] == pytest.approx(1 / 2)
    assert host_pace.fast_intervals(uneven, [10_000.0, 10_500.0], fast)["rate_ratio"] == pytest.approx(1.0)
    assert host_pace.fast_intervals(uneven, [14_000.0, 14_000.0], fast) is None  # every piece beside a slow slice
    assert host_pace.fast_intervals(uneven, [14_000.0, 10_000.0], fast) is None  # the 2nd piece: slow before it
    assert host_pace.fast_intervals(None, [10_000.0, 10_000.0], fast) is None
    assert host_pace.fast_intervals({"error": "no connection"}, [10_000.0, 10_000.0], fast) is None
    assert host_pace.fast_intervals(uneven, [10_000.0], fast) is None  # pieces that do not match the slices


def test_the_fast_pieces_estimator_reads_a_windows_rate_where_the_host_ran_fast():
    """benchmarks/pace_estimators, "fast intervals": a cell that runs at 5,000/s where the host is fast and 3,000/s
    beside a slow slice (the sentinel only 1.3x slower there, so the pace takes out less than the cell lost): read from
    its fast pieces its rounds agree; by the fast mode's pace they spread; a window without pieces takes that pace."""
    from benchmarks.pace_estimators import run_figures
    attempts = []
    for index, slow_slices in enumerate([0, 1, 2, 0, 1, 2]):
        slices = [13_000.0] * slow_slices + [10_000.0] * (4 - slow_slices)
        rates = [5.0 if all(slices[j] < 11_000 for j in (k - 1, k) if 0 <= j < 4) else 3.0 for k in range(4)]
        rates.append(rates[-1] * 0.9)  # the last piece, read after the client's window ended: left out
        running = [16_000_000] * 5
        segments = [int(2 * rate * 16_000) for rate in rates]
        raw = sum(segments[:4]) / 2 / (sum(running[:4]) / 1e9)  # the client's own window
        attempts.append({"status": "ok", "raw_roundtrips_per_s": raw, "started_at": f"2026-11-29T20:00:{index:02d}",
                         "host_pace": {"slices_ns": slices, "stop": "preempt",
                                       "intervals": {"running_ns": running, "segments_in": segments}}})
    figures = run_figures({"cells": [{"server": "s", "client": "c", "attempts": attempts}]})
    assert figures["median_cv"]["fast intervals"] == pytest.approx(0, abs=1e-9)
    assert figures["median_cv"]["fast mode"] > 0.05 and figures["median_cv"]["raw"] > 0.1
    assert figures["pieces"] == {"windows": 6, "with_pieces": 6, "with_a_fast_piece": 6,
                                 "median_fast_share": pytest.approx(0.5)}


@SENTINEL_BUILT
def test_the_pacer_reads_the_clients_segments_in_each_pause_and_gives_its_copies_back():
    """A client connection (in this process) receiving one-byte messages while a pacer runs: each pause cuts a piece,
    the pieces add up to every segment received meanwhile, and stop() leaves no copy of a socket open. Connections
    that cannot be opened leave an error in the record, and the pauses go on."""
    import socket
    import threading
    from pingpong.harness.system import kernel_signals
    from pingpong.harness.system.kernel_signals import HeldConnections

    def sockets_open() -> int:
        return sum(os.readlink(f"/proc/self/fd/{fd}").startswith("socket:") for fd in os.listdir("/proc/self/fd")
                   if os.path.exists(f"/proc/self/fd/{fd}"))

    def segments_in(connection: socket.socket) -> int:
        return kernel_signals.parse_tcp_info(connection.getsockopt(
            socket.IPPROTO_TCP, socket.TCP_INFO, kernel_signals.TCP_INFO_LENGTH))["data_segs_in"]

    cpu = sorted(os.sched_getaffinity(0))[-1]
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client, listener.accept()[0] as server:
            server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            opened = sockets_open()
            pacer = Pacer([cpu], [], slice_log=host_pace.SliceLog())
            pacer.prepare()
            before = segments_in(client)
            pacer.start(time.monotonic() + 10, connections=lambda: HeldConnections([os.getpid()], port))
            deadline = time.monotonic() + 5
            while pacer._counted_from is None and time.monotonic() < deadline:
                time.sleep(0.001)
            assert sockets_open() == opened + 1  # the client's connection, borrowed; not the server's nor the listener
            done = threading.Event()

            def drain() -> None:
                while not done.is_set():
                    client.recv(4096)
            reader = threading.Thread(target=drain, daemon=True)
            reader.start()
            sent_until = time.monotonic() + 0.3
            while time.monotonic() < sent_until:
                server.send(b"x")
                time.sleep(0.0005)
            time.sleep(0.05)
            after = segments_in(client)
            record = pacer.stop()
            done.set()
            server.send(b"x")
            reader.join(5)
            assert sockets_open() == opened
            failing = Pacer([cpu], [], slice_log=host_pace.SliceLog())
            failing.prepare()
            failing.start(time.monotonic() + 10, connections=lambda: HeldConnections([os.getpid()], port + 1))
            time.sleep(0.1)
            refused = failing.stop()
    host_sentinel.close_all()
    pieces = record["intervals"]
    assert record["pauses"] >= 10 and len(pieces["segments_in"]) == record["pauses"] + 1
    assert sum(pieces["segments_in"]) == after - before > 100
    assert record["fast_intervals"] is not None
    assert refused["pauses"] >= 1 and refused["intervals"] == {
        "error": "no connection of the client's to the server's port was found"}


@SENTINEL_BUILT
def test_the_pacing_controls_run_the_real_pacer_and_pacers_that_pause_nothing_on_one_cpu():
    """benchmarks/split_pacing_controls (through window_pace.measure_cell, which a cell on one CPU had broken):
    each arm's paced sub-windows against their unpaced neighbours; the real pacer pauses the cell, a control pacer
    pauses nothing; an unknown arm is a one-line error."""
    completed = subprocess.run([sys.executable, "-m", "benchmarks.split_pacing_controls", "--seconds", "0.8",
                                "--window", "0.1", "--repeat", "1", "--arms", "nothing,pauses,wake",
                                "--placement", "same-cpu"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-1500:]
    arms = {arm["arm"]: arm for arm in json.loads(completed.stdout)["arms"]}
    assert set(arms) == {"nothing", "pauses", "wake"}
    for name, arm in arms.items():
        paced = [window for window in arm["raw_windows"] if window["paced"]]
        assert len(arm["raw_windows"]) == 8 and len(paced) == 4 and arm["bias"]["pairs"] == 4, name
        assert all(window["roundtrips"] > 0 for window in arm["raw_windows"]), name
        pauses = [window["pace"]["pauses"] for window in paced]
        assert (min(pauses) >= 3) if name == "pauses" else (max(pauses) == 0), (name, pauses)
        assert 0.5 < arm["bias"]["median_ratio"] < 2, name
    refused = subprocess.run([sys.executable, "-m", "benchmarks.split_pacing_controls", "--arms", "pauses,sleep"],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and refused.stderr.strip() == (
        "split_pacing_controls: --arms: unknown arm 'sleep'; known: pauses, wake, thread-at-start, idle-thread, "
        "nothing")


class FailingSentinel:
    """A sentinel whose slice fails as it is answered, counting the slices it was asked for."""

    def __init__(self) -> None:
        self.asked = 0

    def ask(self, roundtrips: int, groups: tuple[int, ...] = ()) -> None:
        self.asked += 1

    def answer(self):
        raise OSError("the host sentinel exited (code 1)")


@SENTINEL_BUILT
def test_the_slice_before_the_warm_up_keeps_its_deadline_and_a_failed_one_leaves_the_window_paced():
    """Pacer.warm_slice: none begins after its deadline; one whose sentinel fails leaves the cell running, says why,
    and the window's pauses run on sentinels started again."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    busy = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"], process_group=0)
    try:
        pacer = Pacer([cpu], [busy.pid], preempt=False, slice_log=None)
        pacer.prepare()
        failing = FailingSentinel()
        pacer._sentinels = [failing]
        pacer.warm_slice(not_after=time.monotonic() - 1)  # the window may have begun: no slice
        assert failing.asked == 0 and pacer.warm_slice_ns is None and pacer.warm_slice_error is None
        pacer.warm_slice()
        assert failing.asked == 1 and not stopped(busy.pid)
        assert pacer.error is None and "exited" in pacer.warm_slice_error and pacer.warm_slice_ns is None
        assert pacer._sentinels and pacer._sentinels[0] is not failing  # started again for the pauses
        # pauses on the new sentinels, timed; how many fit in the time depends on the load of a shared test host (4
        # in 0.3 s beside three test workers, where 17 fit): two show the sentinels work again
        record, _ = paced_for(pacer, [busy.pid], 0.5)
        assert record["pauses"] >= 2 and record["error"] is None and not stopped(busy.pid)
        assert record["sentinel_ns_per_roundtrip"] > 0
        assert record["warm_slice_ms"] is None and record["warm_slice_error"] == pacer.warm_slice_error
    finally:
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()
        host_sentinel.close_all()
