"""The start barrier: several client processes measure one window; each driver waits for the go; failures end it."""

import json
import os
import select
import subprocess
import time

import pytest

from pingpong.contract import EVENTS_FD_ENV, GO_FD_ENV, GO_LINE
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.measure.start_barrier import StartBarrier, window_spread
from pingpong.harness.results.histograms import latency_summary, merge
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import resolve_command
from tests.conftest import QUICK_RELAY_SILENCE_S, ROOT, by_name

SETTINGS = CellSettings(duration_s=1.0, warmup_s=0.2, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=True,
                        relay_silence_s=QUICK_RELAY_SILENCE_S)
# One client per driver: the Python driver, node/driver/ under Node and Bun, the C client, the Go, Rust and C++
# clients; each with a server of its protocol.
DRIVERS = [("websockets", "websockets"), ("websockets", "node-ws"), ("websockets", "bun"),
           ("raw-tcp-c", "raw-tcp-c"), ("websockets", "go-gorilla"), ("websockets", "rust-tungstenite"),
           ("websockets", "cpp-websocketpp")]


def test_the_barrier_releases_every_client_once_the_last_is_ready():
    """Nothing reaches a go pipe before the last arrival; then each holds exactly one go line."""
    barrier = StartBarrier(3)
    read_fds = list(barrier.read_fds)
    barrier.arrived()
    barrier.arrived()
    assert not barrier.released.is_set()
    assert all(select.select([fd], [], [], 0)[0] == [] for fd in read_fds)
    barrier.arrived()
    assert barrier.released.is_set() and barrier.abort() is True
    assert [os.read(fd, 64) for fd in read_fds] == [f"{GO_LINE}\n".encode()] * 3
    assert [os.read(fd, 64) for fd in read_fds] == [b""] * 3  # and then end of file: the pipes are closed
    barrier.close_read_ends()


def test_an_aborted_barrier_closes_without_a_go_and_stays_closed():
    barrier = StartBarrier(2)
    read_fds = list(barrier.read_fds)
    barrier.arrived()
    assert barrier.abort() is False
    barrier.arrived()  # a late ready after the abort releases nothing
    assert not barrier.released.is_set()
    assert [os.read(fd, 64) for fd in read_fds] == [b"", b""]
    barrier.close_read_ends()


def test_window_spread_is_absent_where_a_process_did_not_report():
    assert window_spread([1.0, 1.5], [2.0, 2.002], [3.0], 2) == {
        "processes": 2, "ready_spread_s": 0.5, "start_spread_s": 0.002, "end_spread_s": None}


@pytest.mark.parametrize("server,client", DRIVERS, ids=[client for _, client in DRIVERS])
def test_a_driver_holds_its_warmup_until_the_go(server, client, shared_servers, tmp_path):
    """Run by hand with both fds: the driver says ready, sends nothing until the go, then measures as usual;
    with the go pipe closed instead, it reports the barrier as its error and exits 1."""
    server_under_test = shared_servers.get(by_name("server", server), SETTINGS)
    for released in (True, False):
        events_read, events_write = os.pipe()
        go_read, go_write = os.pipe()
        room = f"/by-hand-{released}"
        argv = resolve_command(by_name("client", client), ROOT) + [
            "--url", server_under_test.base_url + room, "--duration", "0.3", "--warmup", "0.1"]
        environment = {**os.environ, EVENTS_FD_ENV: str(events_write), GO_FD_ENV: str(go_read)}
        driver = subprocess.Popen(argv, cwd=ROOT, env=environment, pass_fds=(events_write, go_read),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(events_write)
        os.close(go_read)
        assert os.read(events_read, 64) == b"ready\n"  # sent once its connections are open
        # held: no window-start while waiting (unheld, it would come after the 0.1 s warmup)
        assert select.select([events_read], [], [], 0.3)[0] == []
        if released:
            os.write(go_write, f"{GO_LINE}\n".encode())
        os.close(go_write)
        stdout, stderr = driver.communicate(timeout=30)
        with os.fdopen(events_read, "rb") as events:
            rest = events.read()
        report = json.loads(stdout)
        if released:
            assert driver.returncode == 0, stderr
            assert rest == b"window-start\nwindow-end\n" and report["roundtrips"] > 0
        else:
            assert driver.returncode == 1 and rest == b""
            assert report["error"].startswith("start barrier: the orchestrator closed it without a go")


@pytest.mark.parametrize("server,client", DRIVERS, ids=[client for _, client in DRIVERS])
def test_client_processes_measure_one_window(server, client, shared_servers):
    """Three client processes (two for the one-pair C client) are released together: their window starts lie
    within 10% of the window, and the merged counts, histogram and CPU are those of the processes together."""
    processes = 2 if client == "raw-tcp-c" else 3
    settings = CellSettings(**{**SETTINGS.__dict__, "client_processes": processes, "pairs": processes})
    attempt = run_attempt_on(shared_servers.get(by_name("server", server), settings), by_name("client", client),
                             settings, repeat=1, project_root=ROOT)
    assert attempt.status == "ok", attempt.reason
    spread = attempt.window_spread
    assert spread["processes"] == processes
    assert spread["start_spread_s"] < 0.1 * settings.duration_s, spread
    assert spread["end_spread_s"] < 0.1 * settings.duration_s, spread
    report = attempt.client_report
    assert report["client_processes"] == processes and report["errors"] == 0
    assert report["payload"] == {"kind": "text-ascii", "size": 4}  # every payload was verified by its driver
    per_process = [entry["roundtrips"] for entry in report["per_process"]]
    assert all(count > 0 for count in per_process) and attempt.roundtrips == sum(per_process)
    assert latency_summary(merge([attempt.latency_histogram]))["count"] == \
        attempt.roundtrips - report["pauses"]["latency_dropped"]
    assert attempt.client_cpu_s > 0 and attempt.cpu_source == "process-clock"
    assert attempt.window_wall_s == pytest.approx(settings.duration_s, abs=0.1 * settings.duration_s)


@pytest.mark.parametrize("fault", ["crash", "hang"])
def test_a_client_that_never_gets_ready_fails_the_attempt_with_the_reason(fault, shared_servers):
    """Process 1 crashes (or hangs) before it is ready: the attempt fails naming it and the barrier, process 0
    (waiting for the go) is released by the abort, and no process is left behind (checked after every test)."""
    settings = CellSettings(**{**SETTINGS.__dict__, "client_processes": 2, "pairs": 2,
                               "start_barrier_timeout_s": 3})
    began = time.monotonic()
    attempt = run_attempt_on(shared_servers.get(by_name("server", "websockets"), settings),
                             by_name("client", f"faulty-{fault}-in-process-1"), settings, repeat=1, project_root=ROOT)
    if fault == "crash":
        assert attempt.status == "client-failed"
        assert attempt.reason.startswith("client process 1 ended before the start barrier released: "
                                         "client printed no JSON on stdout (exit code 4)")
    else:
        assert attempt.status == "timeout"
        assert attempt.reason == "start barrier: 1 of 2 client processes reported ready within 3 s"
        assert "hanging on purpose" in attempt.client_stderr_tail
    assert time.monotonic() - began < 20
