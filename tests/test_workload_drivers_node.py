"""The JavaScript driver's (node/driver/) broadcast, idle-connection, open-loop and many-pair workloads, and its
ping-pong's pauses, for real.

Every test runs a real client program (node-ws, node-builtin under Node, bun under Bun, the raw-TCP floors) against
a real server process, started and verified as a run starts it and shared by this module's tests (each test in a
room of its own). The ack pipe between a broadcast's processes is a real os.pipe(); the pauses are real SIGSTOPs and
SIGCONTs.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
import uuid

import pytest

from pingpong.harness.results import histograms
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import resolve_command
from pingpong.harness.system import processes
from tests.conftest import (DROPPED_PER_PAUSE, PAUSE_S, PAUSES, QUICK_RELAY_SILENCE_S, ROOT, by_name,
                            check_pauses, pause_by_hand)

SETTINGS = CellSettings(duration_s=0.3, warmup_s=0.1, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=False,
                        relay_silence_s=QUICK_RELAY_SILENCE_S)
SHORT = ["--duration", "0.3", "--warmup", "0.1", "--stall-timeout", "5"]
# a receivers process started before its sender waits for the sender's process to start and connect: beside the other
# test workers that took up to 4.8 s here (benchmarks/newcomer_wait.py), and a receivers process that gave up after 5 s
# failed a CI run of 2026-11-29 ("ack pipe: closed by every receivers process")
RECEIVERS_WAITING = ["--duration", "0.3", "--warmup", "0.1", "--stall-timeout", "30"]
WEBSOCKET_JS_CLIENTS = ["node-ws", "node-builtin", "bun"]
RAW_TCP_JS_CLIENTS = ["raw-tcp-node", "raw-tcp-bun"]
ACK_FD_ENV = "PINGPONG_ACK_FD"  # pingpong/contract.py's ACK_FD_ENV, once the Python side has it
EVENTS_FD_ENV = "PINGPONG_EVENTS_FD"
RUN_TIMEOUT_S = 60


def client_command(name: str) -> list[str]:
    return resolve_command(by_name("client", name), ROOT)


def room_url(shared_servers, server: str) -> str:
    """A room of its own on the module's shared `server`, which passed readiness and relay verification."""
    started = shared_servers.get(by_name("server", server), SETTINGS)
    assert started.problem is None, started.problem
    return f"{started.base_url}/{uuid.uuid4().hex[:12]}"


def run_client(name: str, url: str, *extra: str, env: dict | None = None, pass_fds=()) -> tuple[int, dict, str]:
    """Run a client to its end: exit code, its one JSON report and its stderr."""
    completed = subprocess.run(client_command(name) + ["--url", url, *extra], cwd=ROOT, capture_output=True,
                               text=True, timeout=RUN_TIMEOUT_S, env={**os.environ, **(env or {})},
                               pass_fds=pass_fds)
    lines = completed.stdout.strip().splitlines()
    assert len(lines) == 1, (completed.stdout, completed.stderr)
    return completed.returncode, json.loads(lines[0]), completed.stderr


def histogram_count(report: dict) -> int:
    return histograms.latency_summary(histograms.merge([report["latency"]["hdr_histogram"]]))["count"]


def read_event(fd: int, name: str, timeout_s: float, process: subprocess.Popen) -> None:
    """Block until the line `name` comes down the events pipe `fd` (or fail: timeout, end of file)."""
    deadline = time.monotonic() + timeout_s
    received = b""
    while f"{name}\n".encode() not in received:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {name} event within {timeout_s} s (got {received!r})"
        readable, _, _ = select.select([fd], [], [], remaining)
        if readable:
            chunk = os.read(fd, 4096)
            assert chunk, f"events pipe closed before {name} (got {received!r}); exit {process.poll()}"
            received += chunk


def established_on(port: int) -> int:
    """Server-side ESTABLISHED TCP sockets (local port `port`) on the host, from /proc/net/tcp."""
    count = 0
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                count += 1
    return count


def stop(process: subprocess.Popen) -> None:
    """End a client this test started, if it is still running (a failed assertion must not leave it behind)."""
    if process.poll() is None:
        process.kill()
        process.wait(10)


def check_broadcast_sender(report: dict, receivers: int) -> dict:
    """The sender's report is complete and consistent; returns its broadcast section."""
    assert report["error"] is None and report["errors"] == 0
    assert report["workload"] == "broadcast" and report["pairs"] == 1
    broadcast = report["broadcast"]
    sent = len(broadcast["send_ns"])
    assert broadcast["role"] == "sender" and broadcast["receivers"] == receivers
    assert broadcast["window_first"] == report["warmup"]["roundtrips"] > 0
    assert broadcast["window_count"] == report["roundtrips"] > 0
    assert sent == broadcast["window_first"] + broadcast["window_count"]
    # Exactly one record per message sent: every local receiver got every message (it completes only then).
    assert len(broadcast["first_ns"]) == len(broadcast["last_ns"]) == sent
    assert all(isinstance(t, int) for t in broadcast["send_ns"] + broadcast["first_ns"] + broadcast["last_ns"])
    for k in range(sent):
        assert broadcast["send_ns"][k] <= broadcast["first_ns"][k] <= broadcast["last_ns"][k]
        if k + 1 < sent:  # message k + 1 is sent only once message k is complete
            assert broadcast["last_ns"][k] <= broadcast["send_ns"][k + 1]
    assert report["elapsed_s"] >= 0.3
    assert report["roundtrips_per_s"] == pytest.approx(report["roundtrips"] / report["elapsed_s"])
    assert report["latency"]["recorded"] and histogram_count(report) == report["roundtrips"]
    return broadcast


@pytest.mark.parametrize("client", WEBSOCKET_JS_CLIENTS)
def test_broadcast_in_one_process_reaches_every_receiver(client, shared_servers):
    """--receivers 3 alone: each message reaches all three, timestamps on CLOCK_MONOTONIC (Python's monotonic_ns)."""
    url = room_url(shared_servers, "node-ws")
    before = time.monotonic_ns()
    code, report, stderr = run_client(client, url, "--workload", "broadcast", "--receivers", "3", *SHORT)
    after = time.monotonic_ns()
    assert code == 0, stderr
    broadcast = check_broadcast_sender(report, receivers=3)
    assert broadcast["ack_processes"] == 0
    # Absolute CLOCK_MONOTONIC ns, as other processes on the host read it (Bun's own hrtime starts at 0).
    assert before < broadcast["send_ns"][0] and broadcast["last_ns"][-1] < after
    assert [c["name"] for c in report["connections"]] == ["S", "R0", "R1", "R2"]
    assert report["connections_total"] == 4


def test_broadcast_lists_ten_receivers_and_counts_all_on_a_python_server(shared_servers):
    """12 receivers through aiohttp's relay: all get every message; the report lists S and R0..R9 of 13."""
    url = room_url(shared_servers, "aiohttp")
    code, report, stderr = run_client("node-ws", url, "--workload", "broadcast", "--receivers", "12", *SHORT)
    assert code == 0, stderr
    check_broadcast_sender(report, receivers=12)
    assert [c["name"] for c in report["connections"]] == ["S"] + [f"R{i}" for i in range(10)]
    assert report["connections_total"] == 13


@pytest.mark.parametrize("sender,receiver,server", [("node-ws", "bun", "node-ws"),
                                                     ("bun", "node-builtin", "node-ws"),
                                                     ("node-builtin", "node-ws", "aiohttp")])
def test_broadcast_over_two_processes_waits_for_the_ack_pipe(sender, receiver, server, shared_servers):
    """A receivers process acks each message on a real pipe; the sender sends the next only after the ack."""
    url = room_url(shared_servers, server)
    ack_read, ack_write = os.pipe()
    events_read, events_write = os.pipe()
    receivers = sender_process = None
    try:
        receivers = subprocess.Popen(
            client_command(receiver) + ["--url", url, "--workload", "broadcast", "--broadcast-role", "receivers",
                                        "--receivers", "2", *RECEIVERS_WAITING],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(ack_write, events_write),
            env={**os.environ, ACK_FD_ENV: str(ack_write), EVENTS_FD_ENV: str(events_write)})
        os.close(ack_write)
        os.close(events_write)
        read_event(events_read, "ready", 30, receivers)
        sender_process = subprocess.Popen(
            client_command(sender) + ["--url", url, "--workload", "broadcast", "--receivers", "1",
                                      "--ack-processes", "1", *SHORT],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(ack_read,),
            env={**os.environ, ACK_FD_ENV: str(ack_read)})
        os.close(ack_read)
        sender_out, sender_err = sender_process.communicate(timeout=RUN_TIMEOUT_S)
        receivers_out, receivers_err = receivers.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        for process in (sender_process, receivers):
            if process is not None:
                stop(process)
        os.close(events_read)
    assert sender_process.returncode == 0, (sender_err, receivers_err)
    assert receivers.returncode == 0, receivers_err
    sent = check_broadcast_sender(json.loads(sender_out), receivers=1)
    assert sent["ack_processes"] == 1
    report = json.loads(receivers_out)
    assert report["error"] is None and report["workload"] == "broadcast"
    got = report["broadcast"]
    assert got["role"] == "receivers" and got["receivers"] == 2
    assert [c["name"] for c in report["connections"]] == ["R0", "R1"] and report["connections_total"] == 2
    count = len(sent["send_ns"])
    assert report["roundtrips"] == count == len(got["first_ns"]) == len(got["last_ns"])
    assert report["latency"] == {"unit": "ns", "recorded": False, "hdr_histogram": None}
    assert report["elapsed_s"] == pytest.approx((got["last_ns"][-1] - got["first_ns"][0]) / 1e9)
    for k in range(count):
        # One clock on the host: a receiver gets message k after it was sent, and the sender sends k + 1 only once
        # the other process's last receiver has k (its ack is written after that).
        assert sent["send_ns"][k] <= got["first_ns"][k] <= got["last_ns"][k]
        if k + 1 < count:
            assert got["last_ns"][k] <= sent["send_ns"][k + 1]


@pytest.mark.parametrize("client", ["node-ws", "bun"])  # Node reads the pipe as a net.Socket, Bun as a file stream
def test_broadcast_sender_fails_when_the_ack_pipe_closes(client, shared_servers):
    """--ack-processes 1 on a pipe nobody writes to: its end of file fails the run at once, it does not hang."""
    url = room_url(shared_servers, "node-ws")
    ack_read, ack_write = os.pipe()
    os.close(ack_write)
    try:
        started = time.monotonic()
        code, report, _ = run_client(client, url, "--workload", "broadcast", "--ack-processes", "1",
                                     "--duration", "0.3", "--warmup", "0.1", "--stall-timeout", "20",
                                     env={ACK_FD_ENV: str(ack_read)}, pass_fds=(ack_read,))
    finally:
        os.close(ack_read)
    assert code == 1 and "ack pipe" in report["error"]
    assert time.monotonic() - started < 15


def test_broadcast_sender_refuses_an_echo_to_itself(shared_servers):
    """A server that echoes to the sender fails the broadcast with the contract's message."""
    url = room_url_unverified(shared_servers, "echo-to-sender")
    code, report, _ = run_client("node-ws", url, "--workload", "broadcast", *SHORT)
    assert code == 1
    assert report["error"] == "payload mismatch: the sender received a message (the server echoed it back)"


def room_url_unverified(shared_servers, server: str) -> str:
    """A room on a test server that fails relay verification on purpose (it must still have started)."""
    started = shared_servers.get(by_name("server", server), SETTINGS)
    assert started.problem is None or started.problem.status == "verification-failed", started.problem
    return f"{started.base_url}/{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize("client", WEBSOCKET_JS_CLIENTS)
def test_idle_connections_are_held_open_during_the_window(client, shared_servers):
    """--idle-connections 50: the server's kernel holds 52 established connections while the pair runs."""
    server = shared_servers.get(by_name("server", "node-ws"), SETTINGS)
    url = f"{server.base_url}/{uuid.uuid4().hex[:12]}"
    deadline = time.monotonic() + 5  # the previous test's connections may still be closing
    while established_on(server.port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert established_on(server.port) == 0
    events_read, events_write = os.pipe()
    process = None
    try:
        process = subprocess.Popen(
            client_command(client) + ["--url", url, "--idle-connections", "50", "--duration", "1", "--warmup", "0.1"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(events_write,),
            env={**os.environ, EVENTS_FD_ENV: str(events_write)})
        os.close(events_write)
        read_event(events_read, "window-start", 30, process)
        during = []
        for _ in range(5):  # a few reads: one read of /proc/net/tcp can miss rows as sockets come and go, and another
            during.append(established_on(server.port))  # test's load can hold a connection in closing a moment longer
            time.sleep(0.02)
        out, err = process.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if process is not None:
            stop(process)
        os.close(events_read)
    assert process.returncode == 0, err
    assert 50 + 2 in during, during  # one of them saw exactly the idle ones and the pair (53 once, -n 3)
    report = json.loads(out)
    idle = report["idle_connections"]
    assert idle["requested"] == idle["opened"] == 50 and idle["nofile_limit"] is None
    assert 0 < idle["open_s"] < 30
    assert [c["name"] for c in report["connections"]] == ["A", "B"]
    assert report["roundtrips"] > 0 and histogram_count(report) == report["roundtrips"]
    assert report["pauses"] == {"continued": 0, "latency_dropped": 0}  # nothing paused it: every latency recorded


def test_idle_connections_that_cannot_open_fail_with_the_count():
    """Nothing listening: the run fails naming how many of the idle connections opened, and the first error."""
    url = f"ws://127.0.0.1:{processes.free_port()}/x"
    code, report, _ = run_client("node-ws", url, "--idle-connections", "3", *SHORT)
    assert code == 1
    assert report["error"].startswith(f"idle connections: opened 0 of 3: Error: cannot connect to {url}-idle")


def check_open_loop(report: dict, rate: float, pairs: int) -> dict:
    """An open-loop report at a low rate: every window ping sent on time and answered."""
    assert report["error"] is None and report["errors"] == 0 and report["workload"] == "pingpong"
    loop = report["open_loop"]
    # Pings intended in [warmup, warmup + duration): 0.3 s at `rate` per pair, to within the schedule's rounding.
    assert abs(loop["sent"] - round(0.3 * rate) * pairs) <= pairs
    assert loop["rate_per_pair"] == rate and loop["offered_per_s"] == rate * pairs
    assert loop["answered"] == loop["sent"] == report["roundtrips"]
    # At a low rate nearly every pong is back before the window ends (the last ones may still be on their way).
    assert loop["sent"] - 3 * pairs <= loop["answered_in_window"] <= loop["sent"]
    assert loop["achieved_per_s"] == pytest.approx(loop["answered_in_window"] / 0.3)
    assert 0.9 * loop["offered_per_s"] <= loop["achieved_per_s"] <= 1.05 * loop["offered_per_s"]
    assert 0 <= loop["send_lag_mean_ns"] <= loop["send_lag_max_ns"] < 0.1e9
    # From the window's start to the last window pong: at least until the last window ping was due.
    assert (loop["sent"] / pairs - 1) / rate <= report["elapsed_s"] < 1.3
    assert report["latency"]["recorded"] and histogram_count(report) == report["roundtrips"]
    assert report["pairs"] == pairs
    return loop


@pytest.mark.parametrize("client", WEBSOCKET_JS_CLIENTS)
def test_open_loop_achieves_a_low_offered_rate(client, shared_servers):
    """--rate 200: about 60 window pings in 0.3 s, all answered, latencies from the intended send times."""
    url = room_url(shared_servers, "node-ws")
    code, report, stderr = run_client(client, url, "--rate", "200", *SHORT)
    assert code == 0, stderr
    check_open_loop(report, 200, pairs=1)
    assert "per_pair_roundtrips" not in report and "idle_connections" not in report


def test_open_loop_with_pairs_and_idle_connections_on_a_python_server(shared_servers):
    """Two pairs at 100/s each with 20 idle connections through aiohttp: 200/s offered, each pair its share."""
    url = room_url(shared_servers, "aiohttp")
    code, report, stderr = run_client("node-ws", url, "--rate", "100", "--pairs", "2", "--idle-connections", "20",
                                      *SHORT)
    assert code == 0, stderr
    check_open_loop(report, 100, pairs=2)
    per_pair = report["per_pair_roundtrips"]
    assert len(per_pair) == 2 and sum(per_pair) == report["roundtrips"] and all(abs(n - 30) <= 1 for n in per_pair)
    assert "per_pair_hdr_histograms" not in report  # a closed loop's only
    assert report["idle_connections"]["opened"] == 20


@pytest.mark.parametrize("client", ["node-ws", "bun"])
def test_closed_loop_pairs_each_report_their_own_histogram(client, shared_servers):
    """--pairs 2: one histogram per pair, counting exactly that pair's roundtrips, together the merged histogram;
    none with one pair or with --no-latency."""
    url = room_url(shared_servers, "node-ws")
    code, report, stderr = run_client(client, url, "--pairs", "2", *SHORT)
    assert code == 0, stderr
    per_pair = [histograms.merge([encoded]) for encoded in report["per_pair_hdr_histograms"]]
    assert [histogram.get_total_count() for histogram in per_pair] == report["per_pair_roundtrips"]
    assert all(count > 0 for count in report["per_pair_roundtrips"])
    assert histograms.recorded_values(histograms.merge(report["per_pair_hdr_histograms"])) == (
        histograms.recorded_values(histograms.merge([report["latency"]["hdr_histogram"]])))
    assert histogram_count(report) == report["roundtrips"] == sum(report["per_pair_roundtrips"])
    assert report["pauses"] == {"continued": 0, "latency_dropped": 0}
    for extra in ["--pairs", "1"], ["--pairs", "2", "--no-latency"]:
        code, report, stderr = run_client(client, url + "-" + extra[1], *extra, *SHORT)
        assert code == 0, stderr
        assert report["roundtrips"] > 0 and "per_pair_hdr_histograms" not in report
        assert report["pauses"] == {"continued": 0, "latency_dropped": 0}
    assert len(report["per_pair_roundtrips"]) == 2 and report["latency"]["hdr_histogram"] is None


PAUSED_RUN = ["--duration", "1.6", "--warmup", "0.1", "--stall-timeout", "5"]  # the pauses take 1.25 s of it


def run_paused(name: str, url: str, *extra: str) -> tuple[int, dict, str]:
    """Run a client; once its window opens, stop it PAUSES times: SIGSTOP, PAUSE_S, SIGCONT, 50 ms."""
    events_read, events_write = os.pipe()
    process = None
    try:
        process = subprocess.Popen(client_command(name) + ["--url", url, *extra, *PAUSED_RUN], cwd=ROOT,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   pass_fds=(events_write,), env={**os.environ, EVENTS_FD_ENV: str(events_write)})
        os.close(events_write)
        read_event(events_read, "window-start", 30, process)
        pause_by_hand(process.pid)
        out, err = process.communicate(timeout=RUN_TIMEOUT_S)  # the events pipe stays open until it ends
    finally:
        if process is not None:
            stop(process)
        os.close(events_read)
    lines = out.strip().splitlines()
    assert len(lines) == 1, (out, err)
    return process.returncode, json.loads(lines[0]), err


@pytest.mark.parametrize("client,server", [("node-ws", "node-ws"), ("bun", "node-ws"),
                                           ("raw-tcp-bun", "raw-tcp-node")])
def test_a_paused_window_leaves_the_paused_latencies_out(client, server, shared_servers):
    """Five 0.2 s pauses in the window (Node and Bun run the SIGCONT listener a loop turn or more late): 5 continues
    counted, 5 to 20 latencies dropped, those roundtrips still counted, and no latency of 0.2 s in the histogram."""
    code, report, stderr = run_paused(client, room_url(shared_servers, server))
    assert code == 0, stderr
    check_pauses(report, pairs=1, per_pause=DROPPED_PER_PAUSE["node"])


@pytest.mark.parametrize("client", ["node-ws", "bun"])
def test_each_pair_leaves_its_paused_latencies_out(client, shared_servers):
    """--pairs 2 paused five times: each pair drops 5 to 20 latencies, its histogram counts its roundtrips less
    those, and the pairs' drops add up to latency_dropped."""
    code, report, stderr = run_paused(client, room_url(shared_servers, "node-ws"), "--pairs", "2")
    assert code == 0, stderr
    dropped = check_pauses(report, pairs=2, per_pause=DROPPED_PER_PAUSE["node"])
    counts = [histograms.merge([encoded]).get_total_count() for encoded in report["per_pair_hdr_histograms"]]
    per_pair_dropped = [roundtrips - count for roundtrips, count in zip(report["per_pair_roundtrips"], counts)]
    most = DROPPED_PER_PAUSE["node"] * PAUSES
    assert all(PAUSES <= pair_dropped <= most for pair_dropped in per_pair_dropped), per_pair_dropped
    assert sum(per_pair_dropped) == dropped


def test_stalls_fail_open_loop_and_broadcast_runs_within_the_stall_timeout(shared_servers):
    """A server that stops relaying mid-run: open loop (pings unanswered) and broadcast fail as stalls, in time."""
    url = room_url_unverified(shared_servers, "faulty-hang-mid-run")
    started = time.monotonic()
    code, report, _ = run_client("node-ws", url, "--rate", "200", "--duration", "0.3", "--warmup", "0.1",
                                 "--stall-timeout", "1")
    assert code == 1 and report["error"].startswith("stall: no pong received for 1 s"), report["error"]
    code, report, _ = run_client("node-ws", url + "-b", "--workload", "broadcast", "--duration", "0.3", "--warmup",
                                 "0.1", "--stall-timeout", "1")
    assert code == 1 and report["error"].startswith("stall: no broadcast message completed for 1 s"), report["error"]
    assert time.monotonic() - started < 15


def test_open_loop_below_one_ping_per_stall_timeout_is_no_stall(shared_servers):
    """At 2 pings/s with a 0.3 s stall timeout the wait between answered pings is not a stall."""
    url = room_url(shared_servers, "node-ws")
    code, report, stderr = run_client("node-ws", url, "--rate", "2", "--duration", "1", "--warmup", "0",
                                      "--stall-timeout", "0.3")
    assert code == 0, stderr
    assert report["open_loop"]["sent"] == report["open_loop"]["answered"] == 2


@pytest.mark.parametrize("client", RAW_TCP_JS_CLIENTS)
def test_raw_tcp_floors_run_the_new_workloads(client, shared_servers):
    """The driver is shared: the raw-TCP floors broadcast, hold idle connections and run open loop too."""
    url = room_url(shared_servers, "raw-tcp-node")
    code, report, stderr = run_client(client, url, "--workload", "broadcast", "--receivers", "2", *SHORT)
    assert code == 0, stderr
    check_broadcast_sender(report, receivers=2)
    code, report, stderr = run_client(client, url + "-o", "--rate", "200", "--idle-connections", "10", *SHORT)
    assert code == 0, stderr
    check_open_loop(report, 200, pairs=1)
    assert report["idle_connections"]["opened"] == 10


REFUSED = [
    (["--workload", "broadcast", "--pairs", "2"], "--workload broadcast"),
    (["--workload", "broadcast", "--rate", "10"], "--workload broadcast"),
    (["--workload", "broadcast", "--idle-connections", "5"], "--workload broadcast"),
    (["--workload", "broadcast", "--ab-windows", "1"], "--workload broadcast"),
    (["--workload", "broadcast", "--broadcast-role", "receivers", "--ack-processes", "1"], "--ack-processes"),
    (["--workload", "broadcast", "--ack-processes", "2"], "PINGPONG_ACK_FD"),
    (["--workload", "broadcast", "--broadcast-role", "both"], "--broadcast-role"),
    (["--workload", "broadcast", "--receivers", "0"], "--receivers"),
    (["--receivers", "2"], "--receivers"),
    (["--rate", "10", "--workload", "handshake"], "--rate"),
    (["--rate", "10", "--ab-windows", "1"], "--rate"),
    (["--rate", "0"], "--rate"),
    (["--rate", "fast"], "--rate"),
    (["--idle-connections", "5", "--workload", "handshake"], "--idle-connections"),
    (["--idle-connections=-1"], "--idle-connections"),
    (["--ack-processes=-1", "--workload", "broadcast"], "--ack-processes"),
    (["--pairs", "0"], "--pairs"),
    (["--pairs", "0", "--idle-connections", "5", "--rate", "10"], "--pairs 0"),
]


@pytest.mark.parametrize("extra,named", REFUSED, ids=[" ".join(e) for e, _ in REFUSED])
def test_refused_combinations_are_usage_errors(extra, named):
    """Exit 2 with one line on stderr naming the flag, nothing on stdout, before connecting anywhere."""
    env = {k: v for k, v in os.environ.items() if k != ACK_FD_ENV}
    completed = subprocess.run(client_command("node-ws") + ["--url", "ws://127.0.0.1:1/x", *extra], cwd=ROOT,
                               capture_output=True, text=True, timeout=30, env=env)
    assert completed.returncode == 2 and completed.stdout == ""
    assert len(completed.stderr.strip().splitlines()) == 1 and named in completed.stderr, completed.stderr


def test_bun_refuses_as_node_does():
    """The same parser under Bun: a refused combination is a one-line usage error, exit 2."""
    completed = subprocess.run(client_command("bun") + ["--url", "ws://127.0.0.1:1/x", "--workload", "broadcast",
                                                        "--pairs", "2"],
                               cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert completed.returncode == 2 and completed.stdout == ""
    assert len(completed.stderr.strip().splitlines()) == 1 and "--workload broadcast" in completed.stderr
