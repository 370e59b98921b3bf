"""Programs measured from outside (manifest measure = "outside"): the count from the kernel's counters against the
program's own, the plain programs against real servers, bad programs, and `run_bench.py measure -- CMD`."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from pingpong.harness.measure import judge
from pingpong.harness.measure.boundary import ClientFacts, ServerFacts, WindowSamples
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.system import processes
from tests.conftest import PLAIN_CLIENTS, QUICK_RELAY_CHECK, QUICK_RELAY_SILENCE_S, ROOT, WEBSOCKET_SERVERS, by_name
from tests.test_run_bench import NO_FIGURES

# The count test's window: long enough for a program's own count to pass the 200 roundtrips the test asks for.
WINDOW = CellSettings(duration_s=0.5, warmup_s=0.2, loop="auto", compression="default", payload_size=4,
                      payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=True,
                      relay_silence_s=QUICK_RELAY_SILENCE_S)
SHORT = replace(WINDOW, duration_s=0.3, warmup_s=0.2)
DEFAULT_WEBSOCKET_SERVERS = [s for s in WEBSOCKET_SERVERS if "default" in s.sets]
BOTH_MANIFESTS = ["--manifest", "manifest.toml", "--manifest", "tests/manifest.toml"]
# --ready-timeout is also the time a program has to open its two connections, waited out in full by one that never
# does: 2 s is still twice what a server's start or a healthy program's connections take on a slow host
QUICK = ["--duration", "0.3", "--warmup", "0.2", "--repeat", "1", "--ready-timeout", "2", *NO_FIGURES,
         *QUICK_RELAY_CHECK]


def self_counting(compression: str, record) -> Implementation:
    return Implementation(
        name=f"self-counting-{compression}", role="client", runtime="python", protocol="websocket",
        command=("{python}", "{root}/tests/implementations/self_counting_client.py", "{url}",
                 "--compression", compression, "--record", str(record)),
        requires=("python-module:websockets",), loops=("auto",), compression=("default", "on", "off"),
        measure="outside")


def run_bench(*args, timeout=300):
    return subprocess.run([sys.executable, "run_bench.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("server", ["websockets", "node-ws"])
@pytest.mark.parametrize("compression", ["off", "on"])
def test_outside_count_agrees_with_the_programs_own(server, compression, shared_servers, tmp_path):
    """The kernel's count of a program's roundtrips over the window agrees within 1% with the roundtrips the
    program itself completed between the window's edges, with permessage-deflate negotiated or not, on a Python and
    a Node.js server."""
    settings = replace(WINDOW, compression=compression)
    record = tmp_path / "completed.json"
    for attempt_number in (1, 2):
        attempt = run_attempt_on(shared_servers.get(by_name("server", server), settings),
                                 self_counting(compression, record), settings, repeat=attempt_number,
                                 project_root=ROOT)
        assert attempt.status == "ok", attempt.reason
        figures = attempt.workload_figures["outside"]
        recorded = json.loads(record.read_text())
        stamps = recorded["completed_ns"]
        began, ended = figures["counters"]["edges_wall_ns"]
        own = sum(1 for stamp in stamps if began <= stamp < ended)
        assert own > 200, (own, len(stamps))
        assert abs(attempt.roundtrips - own) <= 0.01 * own, (attempt.roundtrips, own, figures)
        assert attempt.latency_histogram is None  # nothing inside the program timed its roundtrips
        negotiated = [bool(extensions and "permessage-deflate" in extensions) for extensions in recorded["extensions"]]
        assert negotiated == [compression == "on"] * 2, recorded["extensions"]
        if compression == "off":  # 4-byte text: 6-byte frames from the server, 10 (masked) from the program
            assert abs(figures["bytes_per_message_received"] - 6) < 0.1, figures
            assert abs(figures["bytes_per_message_sent"] - 10) < 0.1, figures


@pytest.mark.parametrize("client", PLAIN_CLIENTS, ids=lambda c: c.name)
@pytest.mark.parametrize("server", ["websockets", "node-ws"])
def test_plain_programs_ping_pong_through_a_python_and_a_node_server(client, server, shared_servers):
    """Each plain program, run as written, is measured from outside: two connections, roundtrips counted, its CPU
    and page faults sampled like any client's, and nothing left running."""
    attempt = run_attempt_on(shared_servers.get(by_name("server", server), SHORT), client, SHORT, repeat=1,
                             project_root=ROOT)
    assert attempt.status == "ok", attempt.reason
    figures = attempt.workload_figures["outside"]
    assert figures["counters"]["connections"] == 2 and attempt.roundtrips > 50
    assert attempt.roundtrips == figures["messages_received"] // 2
    assert attempt.client_cpu_s > 0 and attempt.client_minor_faults is not None
    assert attempt.client_report is None
    assert processes.group_members(attempt.client_pid) == []


@pytest.mark.parametrize("server", DEFAULT_WEBSOCKET_SERVERS, ids=lambda s: s.name)
def test_the_plain_websockets_script_runs_on_every_default_server(server, shared_servers):
    """The plain websockets script works against every server of the default matrix."""
    attempt = run_attempt_on(shared_servers.get(server, SHORT), by_name("client", "websockets-plain"), SHORT,
                             repeat=1, project_root=ROOT)
    assert attempt.status == "ok", attempt.reason
    assert attempt.roundtrips > 50


def test_bad_programs_fail_their_cells_with_a_reason_and_the_run_goes_on(tmp_path):
    """A program that opens no connection, one, three, never sends or exits early gets a one-line reason in its
    cell and in the run's summary; the healthy program's cell is measured; nothing is left running."""
    faults = ["no-connection", "one-connection", "three-connections", "silent", "exits-early"]
    completed = run_bench(*BOTH_MANIFESTS, "--servers", "websockets", "--clients",
                          ",".join(f"misbehaving-{f}" for f in faults) + ",websockets-plain", *QUICK,
                          "--results-dir", str(tmp_path), "--format", "json")
    assert completed.returncode == 1, completed.stderr
    cells = {c["client"].removeprefix("misbehaving-"): c for c in json.loads(completed.stdout)["cells"]}
    expected = {
        "no-connection": "opened no connection to the server within 2 s",
        "one-connection": "opened 1 of its 2 connections to the server within 2 s",
        "three-connections": "opened 3 connections; it must open exactly 2",
        "silent": "no message crossed its 2 connections",
        "exits-early": "exited with code 3 during its warmup: misbehaving program: leaving early on purpose",
    }
    for fault, reason in expected.items():
        attempt = cells[fault]["attempts"][0]
        assert attempt["status"] == "client-failed" and reason in attempt["reason"], (fault, attempt["reason"])
        assert "\n" not in attempt["reason"]
        assert processes.group_members(attempt["client_pid"]) == []
    assert cells["websockets-plain"]["status"] == "ok"
    summary = (tmp_path / "latest.md").read_text()
    assert "opened no connection to the server" in summary and "never sent, or stalled" in summary


def test_measure_runs_your_own_program_and_prints_its_row(tmp_path):
    """`run_bench.py measure -- CMD {url}` measures a command against the servers chosen and prints its row."""
    completed = run_bench("measure", "--servers", "websockets,node-ws", *QUICK, "--results-dir", str(tmp_path),
                          "--name", "mine", "--format", "json", "--",
                          "{python}", "clients/plain/websockets_pingpong.py", "{url}")
    assert completed.returncode == 0, completed.stderr
    run = json.loads(completed.stdout)
    assert {(c["server"], c["client"], c["status"]) for c in run["cells"]} == {
        ("websockets", "mine", "ok"), ("node-ws", "mine", "ok")}
    terminal = run_bench("report", str(tmp_path / "latest.json"), "--format", "terminal")
    assert "mine" in terminal.stdout and "node-ws" in terminal.stdout


@pytest.mark.parametrize("argv,message", [
    ([], "measure needs the program's command after --"),
    (["--", "python", "my_client.py"], "measure: command has no {url}"),
])
def test_measure_refuses_a_command_it_cannot_run_in_one_line(argv, message):
    completed = run_bench("measure", "--servers", "websockets", *argv)
    assert completed.returncode == 2
    assert completed.stderr.strip().count("\n") == 0 and message in completed.stderr


def test_a_program_that_closes_a_connection_during_its_warmup_is_told_so():
    outcome = judge.outside_not_started("closed-one", 1, 20.0, ClientFacts(), ServerFacts())
    assert outcome.status == "client-failed"
    assert outcome.reason == "program measured from outside closed a connection during its warmup (1 of its 2 open)"


def test_the_judge_refuses_messages_that_may_span_segments():
    """Above 16 KiB per segment a message may be written in parts, so the outside count is refused, not guessed."""
    counters = {"data_segs_in": 200, "data_segs_out": 200, "bytes_received": 200 * 20_000, "bytes_acked": 0,
                "connections": 2, "snd_mss": 65_483, "wall_s": 1.0}
    outcome = judge.judge_outside(WindowSamples(connection_counters=counters), None, ClientFacts(), ServerFacts())
    assert outcome.status == "client-failed" and "may span segments" in outcome.reason
    outcome = judge.judge_outside(WindowSamples(connection_counters=counters | {"bytes_received": 200 * 6}), None,
                                  ClientFacts(), ServerFacts())
    assert outcome.ok and outcome.measured.roundtrips == 100 and outcome.measured.roundtrips_per_s == 100.0


def test_a_run_shows_each_plain_program_beside_its_driver(tmp_path):
    """A run with a plain program and its driver twin shows their paired ratio and page faults in the Markdown, the
    terminal and the HTML page; the plain cell has a rate and no latency."""
    completed = run_bench("--servers", "node-ws", "--clients", "websockets,websockets-plain", "--duration", "0.3",
                          "--warmup", "0.2", "--repeat", "2", "--jit-warmup", "0", *QUICK_RELAY_CHECK, *NO_FIGURES,
                          "--results-dir", str(tmp_path), "--format", "terminal")
    assert completed.returncode == 0, completed.stderr
    assert "Plain programs" in completed.stdout and "websockets-plain" in completed.stdout
    markdown = (tmp_path / "latest.md").read_text()
    row = next(line for line in markdown.splitlines() if line.startswith("| node-ws | websockets-plain / websockets"))
    assert "×" in row and row.count("|") == 7, row
    assert "Plain programs beside the drivers" in (tmp_path / "latest.html").read_text()
    run = json.loads((tmp_path / "latest.json").read_text())
    plain = next(c for c in run["cells"] if c["client"] == "websockets-plain")
    assert all(a["status"] == "ok" and a["latency_histogram"] is None for a in plain["attempts"])
    assert run["implementations"]["client"]["websockets-plain"]["twin"] == "websockets"
