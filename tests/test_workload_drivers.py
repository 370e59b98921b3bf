"""The Python driver's broadcast, idle-connection and open-loop workloads, and its ping-pong's pauses, run for real.

Every test starts the real client programs (clients/*.py on pingpong/kit/driver/) against real servers (the
module's shared websockets and node-ws servers), each test in rooms of its own, and checks what the driver
reports against what must have happened: exact message counts across processes wired with a real ack pipe,
the kernel's count of established connections while idle connections are held, the offered rate achieved, the
latencies left out around real SIGSTOP/SIGCONT pauses.
"""

from __future__ import annotations

import os
import resource
import select
import socket
import subprocess
import threading
import time
import uuid

import pytest
from websockets.sync.client import connect

from pingpong.contract import ACK_FD_ENV, EVENTS_FD_ENV, READY_EVENT, WINDOW_END_EVENT, WINDOW_START_EVENT
from pingpong.harness.results.histograms import merge
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import resolve_command
from pingpong.kit.payloads import PING, make_payload
from tests.conftest import (DROPPED_PER_PAUSE, PAUSE_S, PAUSES, QUICK_RELAY_SILENCE_S, ROOT, by_name,
                            check_pauses,
                            client_report_of, pause_by_hand)

PYTHON_CLIENTS = ["websockets", "aiohttp", "picows"]
SERVER_SETTINGS = CellSettings(duration_s=1, warmup_s=0, loop="auto", compression="default", payload_size=4,
                               payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=False,
                               relay_silence_s=QUICK_RELAY_SILENCE_S)
SHORT = ["--duration", "0.3", "--warmup", "0.1", "--stall-timeout", "5"]
# a receivers process started before its sender waits for the sender's process to start and connect: beside the other
# test workers that took up to 4.8 s here (benchmarks/newcomer_wait.py), and a receivers process that gave up after 5 s
# failed a CI run of 2026-11-29 ("ack pipe: closed by every receivers process")
RECEIVERS_WAITING = ["--duration", "0.3", "--warmup", "0.1", "--stall-timeout", "30"]
TIMEOUT_S = 60


def room_url(shared_servers, server: str = "websockets") -> str:
    """A fresh room on the shared server: no other test's connections are in it."""
    started = shared_servers.get(by_name("server", server), SERVER_SETTINGS)
    assert started.problem is None, started.problem
    return f"{started.base_url}/{uuid.uuid4().hex[:12]}"


def server_port(shared_servers, server: str = "websockets") -> int:
    return shared_servers.get(by_name("server", server), SERVER_SETTINGS).port


def start_client(client: str, arguments: list[str], env: dict[str, str] | None = None,
                 pass_fds: tuple[int, ...] = (), preexec_fn=None) -> subprocess.Popen:
    return subprocess.Popen(resolve_command(by_name("client", client), ROOT) + arguments, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, pass_fds=pass_fds, preexec_fn=preexec_fn)


def finish(process: subprocess.Popen) -> tuple[int, dict, str]:
    """Wait for a client; its exit code, its one JSON report and its stderr. Killed if it outlives TIMEOUT_S."""
    return client_report_of(process, TIMEOUT_S)


def run_client(client: str, arguments: list[str], **options) -> tuple[int, dict, str]:
    return finish(start_client(client, arguments, **options))


class Events:
    """The read end of a PINGPONG_EVENTS_FD pipe: wait for a client's event lines, as the orchestrator does."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.buffer = b""

    @property
    def env(self) -> dict[str, str]:
        return {EVENTS_FD_ENV: str(self.write_fd)}

    def started(self) -> None:
        """The client has its copy of the write end: drop ours, so its exit shows as end of file."""
        os.close(self.write_fd)

    def wait_for(self, event: str, times: int = 1, timeout_s: float = 30) -> None:
        """Wait until the event's line has come times times (from one client, or from several sharing the pipe)."""
        deadline = time.monotonic() + timeout_s
        while self.buffer.split(b"\n").count(event.encode()) < times:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {event!r} within {timeout_s} s; got {self.buffer!r}"
            if select.select([self.read_fd], [], [], remaining)[0]:
                chunk = os.read(self.read_fd, 4096)
                assert chunk, f"the client ended before {event!r}; got {self.buffer!r}"
                self.buffer += chunk

    def close(self) -> None:
        os.close(self.read_fd)


def established_on(port: int) -> int:
    """Kernel-visible ESTABLISHED TCP sockets whose local port is port: the server's side of its connections.

    Not a snapshot: the kernel hands the table out a page per read, resuming each by position, so sockets coming
    or going meanwhile (other connections' TIME_WAIT entries expiring) can shift a row into two pages or out of
    both. Rows are deduplicated by address pair, so a count is never too high; it can be too low.
    """
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            text = rows.read()
        for row in text.splitlines()[1:]:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                sockets.add((fields[1], fields[2]))
    return len(sockets)


class EstablishedSampler(threading.Thread):
    """Samples established_on(port) every 20 ms until stopped; keeps every distinct count seen."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.seen: list[int] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.02):
            self.seen.append(established_on(self.port))


# --- broadcast ---

def check_sender_report(report: dict, receivers: int) -> None:
    """What every sender report must hold: all messages counted, in order, every receiver's times after the send."""
    assert report["error"] is None and report["workload"] == "broadcast" and report["pairs"] == 1
    broadcast = report["broadcast"]
    sent = broadcast["send_ns"]
    assert broadcast["role"] == "sender" and broadcast["receivers"] == receivers
    assert broadcast["window_first"] == report["warmup"]["roundtrips"] > 0
    assert broadcast["window_count"] == report["roundtrips"] > 0
    assert len(sent) == broadcast["window_first"] + broadcast["window_count"]
    assert sent == sorted(sent) and len(set(sent)) == len(sent)
    check_receiver_times(broadcast, sent)
    assert report["latency"]["recorded"] is True
    assert merge([report["latency"]["hdr_histogram"]]).get_total_count() == report["roundtrips"]
    assert report["connections_total"] == receivers + 1
    assert [c["name"] for c in report["connections"]] == ["S"] + [f"R{i}" for i in range(min(receivers, 10))]


def check_receiver_times(broadcast: dict, sent: list[int]) -> None:
    """Every local receiver got exactly every message: message k after its send, and before message k+1 was sent
    (the sender waits for every receiver, here and in the other processes, before the next)."""
    first, last = broadcast["first_ns"], broadcast["last_ns"]
    assert len(first) == len(last) == len(sent)
    for k, (send, got_first, got_last) in enumerate(zip(sent, first, last)):
        assert send <= got_first <= got_last
        if k + 1 < len(sent):
            assert got_last <= sent[k + 1]


@pytest.mark.parametrize("client", PYTHON_CLIENTS)
@pytest.mark.parametrize("server", ["websockets", "node-ws"])
def test_broadcast_in_one_process_delivers_every_message_to_every_receiver(client, server, shared_servers):
    """--broadcast-role sender --receivers 3 alone: each of the three receivers gets every message, in order."""
    code, report, stderr = run_client(client, ["--url", room_url(shared_servers, server), "--workload", "broadcast",
                                               "--receivers", "3", *SHORT])
    assert code == 0, stderr
    check_sender_report(report, 3)
    assert report["broadcast"]["ack_processes"] == 0


def test_broadcast_across_processes_waits_for_every_ack(shared_servers):
    """Two receivers processes (aiohttp, picows) ack on one real pipe; the sender (websockets) reads both acks per
    message. Every receiver of every process gets exactly the sender's message count, warmup included, and each
    process has all of message k before the sender sends k+1."""
    url = room_url(shared_servers)
    ack_read, ack_write = os.pipe()
    events = Events()
    receivers_processes = []
    try:
        for client, count in (("aiohttp", 12), ("picows", 2)):
            receivers_processes.append(start_client(
                client, ["--url", url, "--workload", "broadcast", "--broadcast-role", "receivers", "--receivers",
                         str(count), *RECEIVERS_WAITING], env={ACK_FD_ENV: str(ack_write), **events.env},
                pass_fds=(ack_write, events.write_fd)))
        os.close(ack_write)
        events.started()
        events.wait_for(READY_EVENT, times=2)  # every receiver of both is in the room before the first message
        code, sender, stderr = run_client("websockets", ["--url", url, "--workload", "broadcast", "--receivers", "2",
                                                         "--ack-processes", "2", *SHORT],
                                          env={ACK_FD_ENV: str(ack_read)}, pass_fds=(ack_read,))
    finally:
        os.close(ack_read)
        events.close()
        outcomes = [finish(process) for process in receivers_processes]
    assert code == 0, stderr
    check_sender_report(sender, 2)
    assert sender["broadcast"]["ack_processes"] == 2
    sent = sender["broadcast"]["send_ns"]
    for (code, report, stderr), count in zip(outcomes, (12, 2)):
        assert code == 0, stderr
        broadcast = report["broadcast"]
        assert report["error"] is None and broadcast["role"] == "receivers" and broadcast["receivers"] == count
        assert report["roundtrips"] == len(sent)  # the end marker is not counted
        check_receiver_times(broadcast, sent)
        assert report["elapsed_s"] == pytest.approx((broadcast["last_ns"][-1] - broadcast["first_ns"][0]) / 1e9)
        assert report["latency"] == {"unit": "ns", "recorded": False, "hdr_histogram": None}
        assert report["connections_total"] == count
        assert [c["name"] for c in report["connections"]] == [f"R{i}" for i in range(min(count, 10))]


def test_broadcast_sender_needs_the_ack_fd_it_was_promised(shared_servers):
    """--ack-processes 1 without PINGPONG_ACK_FD: reported as an error, exit 1."""
    env = {key: value for key, value in os.environ.items() if key != ACK_FD_ENV}
    process = subprocess.Popen(resolve_command(by_name("client", "websockets"), ROOT)
                               + ["--url", room_url(shared_servers), "--workload", "broadcast", "--ack-processes",
                                  "1", *SHORT], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    code, report, _ = finish(process)
    assert code == 1 and ACK_FD_ENV in report["error"] and "--ack-processes 1" in report["error"]


def test_broadcast_sender_fails_when_the_ack_pipe_closes(shared_servers):
    """No receivers process holds the pipe's write end: the sender fails at once instead of stalling."""
    ack_read, ack_write = os.pipe()
    os.close(ack_write)
    try:
        started = time.monotonic()
        code, report, _ = run_client("picows", ["--url", room_url(shared_servers), "--workload", "broadcast",
                                                "--ack-processes", "1", *SHORT], env={ACK_FD_ENV: str(ack_read)},
                                     pass_fds=(ack_read,))
    finally:
        os.close(ack_read)
    assert code == 1 and report["error"] == "broadcast: the ack pipe closed (every receivers process has ended)"
    assert time.monotonic() - started < 4  # well before the 5 s stall timeout


def run_with_an_intruder(client: str, url: str, arguments: list[str]) -> tuple[int, dict]:
    """Run the client in url's room; once it is ready, a foreign connection sends "zzzz" there. (exit code, report)"""
    events = Events()
    process = start_client(client, ["--url", url, *arguments], env=events.env, pass_fds=(events.write_fd,))
    try:
        events.started()
        events.wait_for(READY_EVENT)
        with connect(url) as intruder:
            intruder.send("zzzz")
    finally:
        events.close()
        code, report, _ = finish(process)
    return code, report


@pytest.mark.parametrize("client", PYTHON_CLIENTS)
def test_broadcast_receiver_rejects_a_foreign_message(client, shared_servers):
    """A message that is neither the ping nor the end marker fails a receivers process, naming the receiver."""
    url = room_url(shared_servers)
    code, report = run_with_an_intruder(client, url, ["--workload", "broadcast", "--broadcast-role", "receivers",
                                                      "--receivers", "3", *SHORT])
    assert code == 1
    assert report["error"].startswith("payload mismatch: connection R")
    assert report["error"].endswith("expected text of 4 bytes 'abcd', received text of 4 bytes 'zzzz'")


def test_broadcast_sender_rejects_a_message_on_the_sender_connection(shared_servers):
    """Anything arriving on S (here another member's copy of the ping itself) fails the sender."""
    url = room_url(shared_servers)
    events = Events()
    process = start_client("aiohttp", ["--url", url, "--workload", "broadcast", "--receivers", "2", "--duration",
                                       "1", "--warmup", "0.1", "--stall-timeout", "5"], env=events.env,
                           pass_fds=(events.write_fd,))
    try:
        events.started()
        events.wait_for(READY_EVENT)
        with connect(url) as intruder:
            intruder.send(make_payload("text-ascii", 4, PING))
    finally:
        events.close()
        code, report, _ = finish(process)
    assert code == 1
    assert report["error"] == "payload mismatch: the sender received a message (the server echoed it back)"


# --- idle connections ---

@pytest.mark.parametrize("client", PYTHON_CLIENTS)
@pytest.mark.parametrize("server", ["websockets", "node-ws"])
def test_idle_connections_are_held_open_while_the_pair_runs(client, server, shared_servers):
    """--idle-connections 100: the server's kernel sees 100 + 2 established connections, never more, from the
    client's ready to its window's end, and the measured pair still runs and verifies its payloads."""
    port = server_port(shared_servers, server)
    url = room_url(shared_servers, server)
    deadline = time.monotonic() + 5
    while established_on(port) and time.monotonic() < deadline:  # earlier tests' connections still closing
        time.sleep(0.05)
    assert established_on(port) == 0
    sampler = EstablishedSampler(port)
    events = Events()
    process = start_client(client, ["--url", url, "--idle-connections", "100", "--duration", "1", "--warmup", "0.1"],
                           env=events.env, pass_fds=(events.write_fd,))
    try:
        events.started()
        events.wait_for(READY_EVENT)
        sampler.start()
        events.wait_for(WINDOW_END_EVENT)
    finally:
        sampler.stopping.set()
        events.close()
        code, report, stderr = finish(process)
    sampler.join()
    assert code == 0, stderr
    assert report["error"] is None and report["roundtrips"] > 0 and report["pairs"] == 1
    idle = report["idle_connections"]
    assert idle["requested"] == idle["opened"] == 100 and idle["open_s"] > 0
    assert len(idle["nofile_limit"]) == 2 and idle["nofile_limit"][0] == idle["nofile_limit"][1]
    assert [c["name"] for c in report["connections"]] == ["A", "B"]
    assert sampler.seen and max(sampler.seen) == 102, sampler.seen  # below only when a sample missed rows
    assert report["pauses"] == {"continued": 0, "latency_dropped": 0}  # nothing paused it: every latency recorded
    assert merge([report["latency"]["hdr_histogram"]]).get_total_count() == report["roundtrips"]


def test_idle_connections_raise_the_open_files_limit_and_report_a_shortfall(shared_servers):
    """The driver raises its soft RLIMIT_NOFILE to the hard one; past the hard one, it says how many it opened."""
    def limit_open_files(soft: int, hard: int):
        return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    url = room_url(shared_servers)
    code, report, stderr = run_client("websockets", ["--url", url, "--idle-connections", "300", *SHORT],
                                      preexec_fn=limit_open_files(64, 1024))
    assert code == 0, stderr
    assert report["idle_connections"]["nofile_limit"] == [1024, 1024]
    code, report, _ = run_client("aiohttp", ["--url", url, "--idle-connections", "300", *SHORT],
                                 preexec_fn=limit_open_files(200, 200))
    assert code == 1
    assert report["error"].startswith("idle connections: opened ")
    opened = int(report["error"].split()[3])
    assert 100 < opened < 200 and "Too many open files" in report["error"]


def test_a_server_that_stops_accepting_stalls_the_idle_phase():
    """Handshakes that never complete (a socket that listens but never answers) end the run as a stall of the
    idle phase, saying how many opened, within the stall timeout instead of hanging."""
    with socket.create_server(("127.0.0.1", 0), backlog=128) as listener:
        url = f"ws://127.0.0.1:{listener.getsockname()[1]}/x"
        started = time.monotonic()
        code, report, _ = run_client("websockets", ["--url", url, "--idle-connections", "10", "--stall-timeout", "1"])
    assert code == 1 and time.monotonic() - started < 10
    assert report["error"] == "stall: no new connection opened for 1 s (phase idle-connecting, 0 of 10 opened)"


# --- pauses: the orchestrator stops the measured cell with SIGSTOP and continues it with SIGCONT ---

PAUSED_RUN = ["--duration", "1.6", "--warmup", "0.1", "--stall-timeout", "5"]  # the pauses take 1.25 s of it


def run_paused(client: str, arguments: list[str]) -> tuple[int, dict, str]:
    """Run a client; once its window opens, stop it PAUSES times: SIGSTOP, PAUSE_S, SIGCONT, 50 ms."""
    events = Events()
    process = start_client(client, arguments, env=events.env, pass_fds=(events.write_fd,))
    try:
        events.started()
        events.wait_for(WINDOW_START_EVENT)
        pause_by_hand(process.pid)
        events.wait_for(WINDOW_END_EVENT)  # the client writes it: the pipe must still be open
    finally:
        events.close()
        outcome = finish(process)
    return outcome


@pytest.mark.parametrize("client,loop", [("websockets", "asyncio"), ("aiohttp", "uvloop")])
def test_a_paused_window_leaves_the_paused_latencies_out(client, loop, shared_servers):
    """Five 0.2 s pauses in the window (the SIGCONT handler runs on asyncio and uvloop alike): 5 continues counted,
    5 to 10 latencies dropped, those roundtrips still counted, and no latency of 0.2 s in the histogram."""
    code, report, stderr = run_paused(client, ["--url", room_url(shared_servers), "--loop", loop, *PAUSED_RUN])
    assert code == 0, stderr
    assert report["loop"] == loop
    check_pauses(report, pairs=1, per_pause=DROPPED_PER_PAUSE["python"])


def test_each_pair_leaves_its_paused_latencies_out(shared_servers):
    """--pairs 2 paused five times: each pair drops 5 to 10 latencies, its histogram counts its roundtrips less
    those, and the pairs' drops add up to latency_dropped."""
    code, report, stderr = run_paused("picows", ["--url", room_url(shared_servers), "--pairs", "2", *PAUSED_RUN])
    assert code == 0, stderr
    dropped = check_pauses(report, pairs=2, per_pause=DROPPED_PER_PAUSE["python"])
    counts = [merge([encoded]).get_total_count() for encoded in report["per_pair_hdr_histograms"]]
    per_pair_dropped = [roundtrips - count for roundtrips, count in zip(report["per_pair_roundtrips"], counts)]
    most = DROPPED_PER_PAUSE["python"] * PAUSES
    assert all(PAUSES <= pair_dropped <= most for pair_dropped in per_pair_dropped), per_pair_dropped
    assert sum(per_pair_dropped) == dropped


# --- open loop ---

@pytest.mark.parametrize("client", PYTHON_CLIENTS)
@pytest.mark.parametrize("server", ["websockets", "node-ws"])
def test_open_loop_achieves_a_low_offered_rate(client, server, shared_servers):
    """--rate 200 --pairs 2 for 0.5 s: 100 window pings per pair sent on schedule, all answered, latencies recorded."""
    code, report, stderr = run_client(client, ["--url", room_url(shared_servers, server), "--rate", "200", "--pairs",
                                               "2", "--duration", "0.5", "--warmup", "0.1"])
    assert code == 0, stderr
    loop = report["open_loop"]
    assert loop["rate_per_pair"] == 200 and loop["offered_per_s"] == 400
    assert loop["sent"] == loop["answered"] == report["roundtrips"] == 200
    assert report["warmup"]["roundtrips"] == 40
    assert loop["answered_in_window"] >= 195  # only the last few pongs may arrive after the last window ping
    assert loop["achieved_per_s"] == pytest.approx(400, rel=0.025)
    assert 0 <= loop["send_lag_mean_ns"] <= loop["send_lag_max_ns"] < 50_000_000
    assert 0.49 < report["elapsed_s"] < 0.6
    assert report["roundtrips_per_s"] == pytest.approx(report["roundtrips"] / report["elapsed_s"])
    histogram = merge([report["latency"]["hdr_histogram"]])
    assert report["latency"]["recorded"] is True and histogram.get_total_count() == 200
    assert histogram.get_min_value() > 0
    assert [c["name"] for c in report["connections"]] == ["A0", "B0", "A1", "B1"]


def test_open_loop_verifies_payloads(shared_servers):
    """A foreign message in the pair's room fails the open-loop run as a payload mismatch (B checks pings)."""
    url = room_url(shared_servers)
    code, report = run_with_an_intruder("picows", url, ["--rate", "100", "--duration", "3", "--warmup", "0.1"])
    assert code == 1
    assert report["error"].startswith("payload mismatch: connection ")
    assert report["error"].endswith("received text of 4 bytes 'zzzz'")


# --- usage errors ---

@pytest.mark.parametrize("arguments", [
    ["--workload", "broadcast", "--pairs", "2"],
    ["--workload", "broadcast", "--rate", "10"],
    ["--workload", "broadcast", "--idle-connections", "5"],
    ["--workload", "broadcast", "--ab-windows", "1"],
    ["--workload", "broadcast", "--broadcast-role", "receivers", "--ack-processes", "1"],
    ["--workload", "broadcast", "--receivers", "0"],
    ["--receivers", "2"],
    ["--rate", "10", "--workload", "handshake"],
    ["--rate", "10", "--ab-windows", "1"],
    ["--rate", "0"],
    ["--rate", "nan"],
    ["--idle-connections", "5", "--workload", "handshake"],
    ["--idle-connections", "-1"],
    ["--pairs", "0"],
    ["--pairs", "0", "--idle-connections", "5", "--rate", "10"],
], ids=" ".join)
def test_workload_flags_that_do_not_fit_are_usage_errors(arguments):
    completed = subprocess.run(resolve_command(by_name("client", "websockets"), ROOT)
                               + ["--url", "ws://127.0.0.1:1/x", *arguments], cwd=ROOT, capture_output=True,
                               text=True, timeout=TIMEOUT_S)
    assert completed.returncode == 2 and completed.stdout == ""
    assert "error: --" in completed.stderr.splitlines()[-1]
