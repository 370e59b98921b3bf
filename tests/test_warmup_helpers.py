"""A client's helper threads during its warm-up (measure/warmup_helpers.py): off the measured CPU while it warms up,
every thread back on it before the window, said in each attempt; `--warmup-helpers measured` keeps them put."""

import json
import os
import subprocess
import sys
import time

import pytest

from pingpong.harness.measure.warmup_helpers import BACK_BEFORE_WINDOW_S, WarmupHelpers, helper_threads, off_reason
from pingpong.harness.results.records import load, recorded_setting
from tests.conftest import ROOT

TWO_CPUS = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to move threads between")
# a process with a main thread and one helper thread, both waiting
TWO_THREADS = ("import sys, threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
               "print('ready', flush=True)\ntime.sleep(60)\n")


def test_the_helpers_move_only_with_one_client_process_a_spare_cpu_and_time_before_the_window():
    assert off_reason("spare", 1, {1}, {0}, 0.5) is None
    assert off_reason("measured", 1, {1}, {0}, 0.5) == "--warmup-helpers measured"
    assert off_reason("spare", 2, {1}, {0}, 0.5) == "several client processes"
    assert off_reason("spare", 1, None, {0}, 0.5).startswith("no spare CPU")
    assert off_reason("spare", 1, {0, 1}, {0}, 0.5).startswith("no spare CPU")
    assert off_reason("spare", 1, {1}, {0}, BACK_BEFORE_WINDOW_S).startswith("a warm-up of")


@TWO_CPUS
def test_a_processs_helper_threads_go_to_the_spare_cpu_and_all_come_back_before_the_window():
    measured, spare = {sorted(os.sched_getaffinity(0))[0]}, {sorted(os.sched_getaffinity(0))[1]}
    child = subprocess.Popen([sys.executable, "-c", TWO_THREADS], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        [helper] = helper_threads(child.pid)
        os.sched_setaffinity(child.pid, measured)
        os.sched_setaffinity(helper, measured)
        helpers = WarmupHelpers(child.pid, measured, spare, warmup_s=0.3)
        helpers.released()
        assert os.sched_getaffinity(helper) == spare and os.sched_getaffinity(child.pid) == measured
        time.sleep(0.3)  # the warm-up; its timer brings the helper back BACK_BEFORE_WINDOW_S before its end
        assert os.sched_getaffinity(helper) == measured
        helpers.window_started()
        helpers.close()
        record = helpers.record()
        assert record["moved"] == 1 and record["all_on_measured"] is True
        assert record["off_s"] == pytest.approx(0.3 - BACK_BEFORE_WINDOW_S, abs=0.1)
        assert record["back_before_window_s"] > 0
    finally:
        child.kill()
        child.wait()


@TWO_CPUS
def test_a_node_client_warms_up_with_its_helpers_on_the_spare_cpu_and_measured_says_they_stayed(tmp_path):
    runs = {}
    for mode in ("spare", "measured"):
        completed = subprocess.run(
            [sys.executable, "run_bench.py", "--servers", "node-ws", "--clients", "node-builtin,websockets",
             "--repeat", "1", "--duration", "0.2", "--jit-warmup", "0.3", "--warmup-helpers", mode,
             "--host-figure", "off", "--no-figures", "--results-dir", str(tmp_path / mode)],
            cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert completed.returncode == 0, completed.stderr[-1500:]
        runs[mode] = json.loads((tmp_path / mode / "latest.json").read_text())
    assert runs["spare"]["configuration"]["warmup_helpers"] == "spare"
    attempts = {cell["client"]: cell["attempts"][0] for cell in runs["spare"]["cells"]}
    node = attempts["node-builtin"]["warmup_helpers"]
    assert node["moved"] >= 2, node  # V8's platform threads at least
    assert node["all_on_measured"] is True and node["back_before_window_s"] > 0
    assert attempts["websockets"]["warmup_helpers"]["moved"] == 0  # one thread: nothing to move
    for cell in runs["measured"]["cells"]:
        assert cell["attempts"][0]["warmup_helpers"] == {"off": "--warmup-helpers measured"}


def test_a_file_from_before_the_switch_reads_as_measured():
    run = load(ROOT / "results" / "reference" / "2026-11-29-default-1.json.xz")
    assert recorded_setting(run, "warmup_helpers") == "measured"
