"""The compiled WebSocket servers and clients (Go, Rust, C++; manifest set "native"), run for real.

Relay, rooms, payload kinds, abuse, the start gate and barrier are tested for them where every implementation is
(test_matrix_pairs, test_rooms, test_reliability, test_spawn_ahead, test_start_barrier): those take the manifest's
entries. Here: what only the compiled programs need shown, the contract's flags they refuse, the permessage-deflate
negotiation they declare, TLS across runtimes, the reports they write, the compiled clients' --pairs N, and how
they (and the C floor's client) leave the orchestrator's pauses out of their latencies.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import time
import uuid

import pytest
from websockets.asyncio.client import connect

from pingpong import contract
from pingpong.harness.measure.judge import parse_client_report
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.results.histograms import encode_value_counts, merge, recorded_values
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import resolve_command
from pingpong.harness.system import processes
from tests.conftest import IMPLEMENTATIONS, QUICK_RELAY_CHECK, QUICK_RELAY_SILENCE_S, ROOT, by_name, client_report_of
from tests.test_run_bench import RAW_WINDOWS, run_bench

NATIVE = [i for i in IMPLEMENTATIONS if "native" in i.sets]
NATIVE_SERVERS = [i for i in NATIVE if i.role == "server"]
NATIVE_CLIENTS = [i for i in NATIVE if i.role == "client"]
LANGUAGES = {"go-gorilla": "go", "rust-tungstenite": "rust", "cpp-websocketpp": "c++", "cpp-cpprestsdk": "c++",
             "c-ws-floor": "c"}
PROTOCOL_FLOOR = "c-ws-floor"  # RFC 6455 with no library: no libraries to name, no TLS
LIBRARY_SERVERS = [i.name for i in NATIVE_SERVERS if i.name != PROTOCOL_FLOOR]
LIBRARY_CLIENTS = [i.name for i in NATIVE_CLIENTS if i.name != PROTOCOL_FLOOR]
PAIRS_CLIENTS = [i for i in NATIVE_CLIENTS if "pairs" in i.features]
SHORT = CellSettings(duration_s=0.3, warmup_s=0.1, loop="auto", compression="default", payload_size=4,
                     payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=True,
                     relay_silence_s=QUICK_RELAY_SILENCE_S)


def required_flags(implementation) -> list[str]:
    return (["--url", "ws://127.0.0.1:1/x", "--duration", "0.3"] if implementation.role == "client"
            else ["--host", "127.0.0.1", "--port", "0"])


def refused(implementation, extra: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(resolve_command(implementation, ROOT) + required_flags(implementation) + extra, cwd=ROOT,
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("implementation", NATIVE, ids=lambda i: f"{i.role}-{i.name}")
def test_a_native_program_refuses_what_it_does_not_offer_in_one_line_exit_2(implementation):
    """An unknown flag, a loop other than auto and a compression mode its manifest entry lacks: exit 2, one line
    on stderr naming the problem, nothing on stdout, before anything listens or connects. A client refuses the
    contract's workload flags too, since its entry declares closed-loop ping-pong only, and --pairs unless its entry
    declares pairs (then --pairs 0, the idle holder it is not)."""
    cases = [(["--not-in-the-contract", "1"], "--not-in-the-contract"), (["--loop", "uvloop"], "uvloop")]
    cases += [(["--compression", mode], mode) for mode in contract.COMPRESSION_MODES
              if mode not in implementation.compression]
    if implementation.role == "client":
        cases += [(["--workload", "handshake"], "--workload"), (["--rate", "100"], "--rate"),
                  (["--idle-connections", "10"], "--idle-connections"), (["--duration", "-1"], "duration"),
                  (["--pairs", "0"] if "pairs" in implementation.features else ["--pairs", "2"], "--pairs")]
        assert not {"handshake", *contract.WORKLOAD_FEATURES} & set(implementation.features)
    for extra, named in cases:
        completed = refused(implementation, extra)
        assert completed.returncode == 2, (extra, completed.returncode, completed.stderr)
        assert completed.stdout == "", extra
        assert named in completed.stderr, (extra, completed.stderr)


@pytest.mark.parametrize("client", NATIVE_CLIENTS, ids=lambda i: i.name)
def test_a_native_client_reports_its_language_library_and_offer(client, shared_servers):
    """Against the websockets server: the report names the client's language, its library's pinned version, the
    event loop, whether it offered permessage-deflate (the manifest says it does not by default), the real
    TCP_NODELAY of both sockets, and latencies as value counts that add up to the roundtrips."""
    attempt = run_attempt_on(shared_servers.get(by_name("server", "websockets"), SHORT), client, SHORT, repeat=1,
                             project_root=ROOT)
    assert attempt.status == "ok", attempt.reason
    report = attempt.client_report
    assert report["format_version"] == contract.CLIENT_REPORT_FORMAT_VERSION and report["role"] == "client"
    assert report["implementation"] == client.name and report["runtime"]["name"] == LANGUAGES[client.name]
    assert report["runtime"]["version"] and report["loop"]
    assert (report["libraries"] or client.name == PROTOCOL_FLOOR) and all(report["libraries"].values())
    assert report["settings"][contract.COMPRESSION_OFFERED_SETTING] is False
    assert report["settings"][contract.COMPRESSION_SETTING] == "default"
    assert report["workload"] == "pingpong" and report["pairs"] == 1
    assert all(isinstance(c["tcp_nodelay"], bool) for c in report["connections"])
    assert all(c["extensions"] is None for c in report["connections"])
    assert report["cpu"]["user_s"] + report["cpu"]["system_s"] > 0


@pytest.mark.parametrize("server", NATIVE_SERVERS, ids=lambda i: i.name)
def test_a_native_server_reports_itself_and_refuses_deflate_by_default(server, shared_servers):
    """The server report names its language and library; by default it refuses permessage-deflate even when the
    client offers it (the node-ws client does), as its manifest description says. A server that runs --workers N
    threads reports them: one here, without --workers, on the one CPU it is pinned to."""
    attempt = run_attempt_on(shared_servers.get(server, SHORT), by_name("client", "node-ws"), SHORT, repeat=1,
                             project_root=ROOT)
    assert attempt.status == "ok", attempt.reason
    info = attempt.server_info
    assert info["format_version"] == contract.SERVER_REPORT_FORMAT_VERSION and info["role"] == "server"
    assert info["implementation"] == server.name and info["runtime"]["name"] == LANGUAGES[server.name]
    assert (info["libraries"] or server.name == PROTOCOL_FLOOR) and all(info["libraries"].values()) and info["loop"]
    contract_settings = {"compression": "default", "compression_effective": False, "tls": False}
    threads = {"go-gorilla": {"gomaxprocs": 1}, "rust-tungstenite": {"worker_threads": 1},
               "cpp-websocketpp": {"io_threads": 1, "io_contexts": 1}}  # by room: one io_context per thread
    if server.name in threads:
        contract_settings |= {"workers": None, **threads[server.name]}
    assert (info["settings"] == contract_settings or server.name == PROTOCOL_FLOOR
            and contract_settings.items() <= info["settings"].items())
    assert attempt.client_report["settings"][contract.COMPRESSION_OFFERED_SETTING] is True
    assert all(c["extensions"] is None for c in attempt.client_report["connections"])


DEFLATE_SIDES = [(role, i.name) for i in NATIVE if "on" in i.compression for role in (i.role,)]


@pytest.mark.parametrize("role,name", DEFLATE_SIDES, ids=[f"{r}-{n}" for r, n in DEFLATE_SIDES])
def test_compression_on_negotiates_permessage_deflate_with_a_python_peer(role, name, shared_servers):
    """--compression on: a native side that supports permessage-deflate negotiates it with the websockets library
    (as each side reports) and the payloads still verify; with --compression off nothing is negotiated."""
    for mode, negotiated in (("on", True), ("off", False)):
        settings = CellSettings(**{**SHORT.__dict__, "compression": mode, "payload_size": 2000})
        server = by_name("server", name) if role == "server" else by_name("server", "websockets")
        client = by_name("client", name) if role == "client" else by_name("client", "websockets")
        attempt = run_attempt_on(shared_servers.get(server, settings), client, settings, repeat=1, project_root=ROOT)
        assert attempt.status == "ok", (mode, attempt.reason)
        extensions = [c["extensions"] for c in attempt.client_report["connections"]]
        assert all(("permessage-deflate" in (e or "")) == negotiated for e in extensions), (mode, extensions)
        assert attempt.client_report["settings"][contract.COMPRESSION_OFFERED_SETTING] is negotiated
        # what the server passes its library: a bool for the native servers, "deflate" or None for websockets
        effective = attempt.server_info["settings"][contract.COMPRESSION_EFFECTIVE_SETTING]
        assert bool(effective) is negotiated and (role != "server" or effective is negotiated), effective


@pytest.mark.timeout(660)
def test_native_servers_and_clients_speak_wss_with_each_other_and_python(tmp_path):
    """--tls: every native library's server with every native library's client and the websockets client, over
    wss:// trusting only the run's CA; each side says it spoke TLS."""
    completed = run_bench("--tls", "--servers", ",".join(LIBRARY_SERVERS), "--clients",
                          ",".join([*LIBRARY_CLIENTS, "websockets"]), "--duration", "0.2", "--warmup", "0.05",
                          "--repeat", "1", "--no-figures", "--jit-warmup", "0", *QUICK_RELAY_CHECK, "--results-dir",
                          str(tmp_path), "--format", "json", timeout=600)
    assert completed.returncode == 0, completed.stderr
    cells = json.loads(completed.stdout)["cells"]
    assert len(cells) == len(LIBRARY_SERVERS) * (len(LIBRARY_CLIENTS) + 1) == 15
    assert not any(cell["skipped"] for cell in cells)
    for cell in cells:
        attempt = cell["attempts"][0]
        assert attempt["status"] == "ok", (cell["server"], cell["client"], attempt["reason"])
        assert attempt["server_info"]["settings"]["tls"] is True
        assert attempt["client_report"]["settings"]["tls"] is True


def test_the_native_set_runs_beside_the_default_one_with_its_floor_cost_split(tmp_path):
    """--servers native,raw-tcp-c --clients native,raw-tcp-c: the named set measures its 20 WebSocket cells plus
    the C floor, and each native side's WebSocket cost is split against the C floor (runtime native). The protocol
    floor's own pair is a row of that cost table (what RFC 6455 costs with no library), never a ranked pair."""
    completed = run_bench("--servers", "native,raw-tcp-c", "--clients", "native,raw-tcp-c", "--duration", "0.12",
                          "--warmup", "0.05", "--repeat", "1", "--no-figures", "--jit-warmup", "0", *QUICK_RELAY_CHECK,
                          "--results-dir", str(tmp_path), "--format", "json", timeout=600, env=RAW_WINDOWS)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    measured = {(c["server"], c["client"]) for c in result["cells"] if not c["skipped"]}
    assert measured == ({(s.name, c.name) for s in NATIVE_SERVERS for c in NATIVE_CLIENTS}
                        | {("raw-tcp-c", "raw-tcp-c")})
    assert len(measured) == 21
    # the C floor on both axes: the host's figure is measured before the rounds (other tests turn it off)
    assert result["host_wakeup"]["floor"] == "raw-tcp-c × raw-tcp-c", result["host_wakeup"]
    markdown = (tmp_path / "latest.md").read_text()
    assert "go-gorilla" in markdown and "WebSocket cost" in markdown
    assert f"| {PROTOCOL_FLOOR} | {PROTOCOL_FLOOR} | " in markdown.split("WebSocket cost per roundtrip")[1]
    terminal = run_bench("report", str(tmp_path / "latest.json"), "--format", "terminal", timeout=60)
    ranking = terminal.stdout.split("Fastest WebSocket pairs")[1].split("\n\n")[0]
    assert "cpp-websocketpp" in ranking and PROTOCOL_FLOOR not in ranking


def test_no_native_server_is_left_running_after_a_port_clash(tmp_path):
    """A port already taken: each native server exits 1 with one line saying so, and leaves nothing behind."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for server in NATIVE_SERVERS:
            completed = subprocess.run(resolve_command(server, ROOT) + ["--host", "127.0.0.1", "--port", str(port)],
                                       cwd=ROOT, capture_output=True, text=True, timeout=30)
            assert completed.returncode == 1, (server.name, completed.returncode, completed.stderr)
            assert completed.stderr.strip() and completed.stdout == "", server.name
    assert processes.port_is_free(port)


PAIRS = 4
PAIRS_SETTINGS = CellSettings(**{**SHORT.__dict__, "pairs": PAIRS})


@pytest.mark.parametrize("server", ["node-ws", "go-gorilla"])
@pytest.mark.parametrize("client", PAIRS_CLIENTS, ids=lambda i: i.name)
def test_a_native_client_drives_pairs_at_once_each_counted_and_timed(client, server, shared_servers):
    """--pairs 4 through the attempt runner: eight sockets on each side, every pair completes roundtrips and they add
    up to the total; each pair's latencies, reported as value counts, become a histogram that counts its
    roundtrips less those the window's pauses touched, and the four together are the attempt's merged histogram."""
    attempt = run_attempt_on(shared_servers.get(by_name("server", server), PAIRS_SETTINGS), client, PAIRS_SETTINGS,
                             repeat=1, project_root=ROOT)
    assert attempt.status == "ok", attempt.reason
    report = attempt.client_report
    assert report["pairs"] == PAIRS and len(report["per_pair_roundtrips"]) == PAIRS
    assert all(count > 0 for count in report["per_pair_roundtrips"]), report["per_pair_roundtrips"]
    assert sum(report["per_pair_roundtrips"]) == report["roundtrips"] == attempt.roundtrips
    assert len(report["per_pair_hdr_histograms"]) == PAIRS and "per_pair_value_counts" not in report
    per_pair = [merge([encoded]) for encoded in report["per_pair_hdr_histograms"]]
    counts = [histogram.get_total_count() for histogram in per_pair]
    assert all(count <= roundtrips for count, roundtrips in zip(counts, report["per_pair_roundtrips"]))
    assert sum(counts) == report["roundtrips"] - report["pauses"]["latency_dropped"]
    assert recorded_values(merge(report["per_pair_hdr_histograms"])) == recorded_values(
        merge([attempt.latency_histogram]))
    assert [c["name"] for c in report["connections"]] == [f"{side}{i}" for i in range(PAIRS) for side in "AB"]
    assert attempt.sockets["client"]["sockets"] == 2 * PAIRS and attempt.sockets["server"]["sockets"] == 2 * PAIRS


async def _listen(url: str, into: list) -> None:
    async with connect(url, compression=None) as listener:
        async for message in listener:
            into.append(message)


async def _run_beside_listeners(command: list[str], base: str, rooms: list[str]) -> tuple[int, str, str, dict]:
    """Join a listener to each room, run the client to its end, then give each listener a moment to drain."""
    heard: dict[str, list] = {room: [] for room in rooms}
    listeners = [asyncio.create_task(_listen(f"{base}/{room}", heard[room])) for room in rooms]
    await asyncio.sleep(0.3)  # the listeners' handshakes; a listener that failed ends its task, checked below
    assert not any(task.done() for task in listeners), [task.exception() for task in listeners if task.done()]
    client = await asyncio.create_subprocess_exec(*command, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
                                                  stderr=asyncio.subprocess.PIPE)
    try:
        stdout, stderr = await asyncio.wait_for(client.communicate(), 60)
    finally:
        if client.returncode is None:
            client.kill()
            await client.wait()
    await asyncio.sleep(0.3)
    for task in listeners:
        task.cancel()
    await asyncio.gather(*listeners, return_exceptions=True)
    return client.returncode, stdout.decode(), stderr.decode(), heard


@pytest.mark.parametrize("client", PAIRS_CLIENTS, ids=lambda i: i.name)
def test_a_native_clients_pairs_each_ping_pong_in_a_room_of_their_own(client, shared_servers):
    """With --pairs 3 in room R, a listener in R-p1 (a third member, which the server relays to) hears exactly pair
    1's traffic: the ping and the pong in turn, with their bytes, at least twice its counted roundtrips; listeners
    in R itself and in R-p3 hear nothing."""
    started = shared_servers.get(by_name("server", "node-ws"), SHORT)
    assert started.problem is None, started.problem
    room = uuid.uuid4().hex[:12]
    command = resolve_command(client, ROOT) + ["--url", f"{started.base_url}/{room}?via=test", "--pairs", "3",
                                               "--duration", "0.3", "--warmup", "0.1", "--payload-size", "5"]
    code, stdout, stderr, heard = asyncio.run(
        _run_beside_listeners(command, started.base_url, [f"{room}-p1", room, f"{room}-p3"]))
    assert code == 0, stderr
    report, problem = parse_client_report(stdout)
    assert problem is None and report["error"] is None, (problem, stdout)
    pair_1 = heard[f"{room}-p1"]
    assert len(pair_1) >= 2 * report["per_pair_roundtrips"][1] > 0
    assert pair_1[:2] == ["abcde", "bcdef"] and set(pair_1[0::2]) == {"abcde"} and set(pair_1[1::2]) == {"bcdef"}
    assert heard[room] == [] and heard[f"{room}-p3"] == []


@pytest.mark.parametrize("client", PAIRS_CLIENTS, ids=lambda i: i.name)
def test_a_stall_on_one_of_a_native_clients_pairs_is_reported_as_a_stall(client, shared_servers):
    """A server that stops relaying in room R-p1 only, and relays R-p0 and R-p2 as ever: with --pairs 3 the client
    names that pair's stall in its one JSON line and exits 1, long before its 5 s window would end (a watchdog over
    all pairs together would see the others' roundtrips and never fire)."""
    started = shared_servers.get(by_name("server", "faulty-hang-room-p1-mid-run"), SHORT)
    assert started.problem is None, started.problem
    command = resolve_command(client, ROOT) + ["--url", f"{started.base_url}/{uuid.uuid4().hex[:12]}", "--pairs",
                                               "3", "--duration", "5", "--warmup", "0.5", "--stall-timeout", "1"]
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert completed.returncode == 1, completed.stderr
    report = json.loads(completed.stdout)
    assert report["error"].startswith("stall: no roundtrip completed for 1 s on pair 1"), report["error"]
    assert report["errors"] == 1


# The clients that time their own roundtrips in C, Go, Rust and C++: each counts SIGCONTs and leaves out the latency
# of a roundtrip a pause touched (native/pauses.h), and the server each is run against here. A pause of 200 ms, as the
# drivers' (tests/conftest.py PAUSE_S): a roundtrip of this host, busy, has taken 17 ms unpaused, and a test running
# beside this one can take the CPU for longer than the 50 ms these pauses were.
PAUSED_CLIENTS = [(by_name("client", "raw-tcp-c"), "raw-tcp-c"), *((c, "c-ws-floor") for c in NATIVE_CLIENTS)]
PAUSES, PAUSE_S, BETWEEN_PAUSES_S = 5, 0.2, 0.1


def run_paused(client, url: str, duration_s: float, pauses: int) -> dict:
    """Run the client; once its window has opened (its window-start event), pauses times: wait BETWEEN_PAUSES_S,
    stop it, wait PAUSE_S, continue it. Its report, once it exits 0."""
    events_read, events_write = os.pipe()
    command = resolve_command(client, ROOT) + ["--url", url, "--duration", str(duration_s), "--warmup", "0.2",
                                               "--stall-timeout", "5"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, contract.EVENTS_FD_ENV: str(events_write)}, pass_fds=(events_write,))
    os.close(events_write)
    try:
        events = b""
        while f"{contract.WINDOW_START_EVENT}\n".encode() not in events:
            assert select.select([events_read], [], [], 30)[0], f"no window-start within 30 s; got {events!r}"
            chunk = os.read(events_read, 4096)
            assert chunk, f"the client ended before its window opened; got {events!r}"
            events += chunk
        for _ in range(pauses):
            time.sleep(BETWEEN_PAUSES_S)
            os.kill(process.pid, signal.SIGSTOP)
            time.sleep(PAUSE_S)
            os.kill(process.pid, signal.SIGCONT)
        code, report, stderr = client_report_of(process, 30)
    finally:
        os.close(events_read)
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert code == 0 and report["error"] is None, stderr
    return report


@pytest.mark.parametrize("client,server", PAUSED_CLIENTS, ids=[c.name for c, _ in PAUSED_CLIENTS])
def test_a_compiled_client_counts_its_windows_pauses_and_records_no_paused_roundtrip(
        client, server, shared_servers):
    """Five 200 ms SIGSTOP/SIGCONT pauses in its window (they end 1.5 s into its 2 s): the client counts five, still
    counts every roundtrip, and leaves out of its histogram the latency of each paused roundtrip (and of at most one
    neighbour each; none for Go's client, which drops the slowest roundtrip it holds per pause), so none of 200 ms or
    more is recorded; unpaused, it counts none and drops none."""
    started = shared_servers.get(by_name("server", server), SHORT)
    assert started.problem is None, started.problem
    for pauses, duration_s in ((0, 0.3), (PAUSES, 2)):
        report = run_paused(client, f"{started.base_url}/{uuid.uuid4().hex[:12]}", duration_s, pauses)
        dropped = report["pauses"]["latency_dropped"]
        assert report["pauses"]["continued"] == pauses, report["pauses"]
        most = 1 if client.name == "go-gorilla" else 2  # native/go/client/main.go's pauseFilter: the slowest per pause
        assert (dropped == 0) if pauses == 0 else (pauses <= dropped <= most * pauses), report["pauses"]
        histogram = merge([encode_value_counts(report["latency"]["value_counts"])])
        assert histogram.get_total_count() == report["roundtrips"] - dropped > 0
        assert histogram.get_max_value() < PAUSE_S * 1e9, (pauses, histogram.get_max_value())
