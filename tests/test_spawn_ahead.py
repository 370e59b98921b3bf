"""Clients started ahead of their turn: each driver loads, says armed and waits unconnected at its start gate; the
orchestrator starts a server's clients while the server gets ready (or the next one while the attempt before it
ends), and measures each as any other."""

import json
import os
import select
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from pingpong.contract import EVENTS_FD_ENV, GO_LINE, START_FD_ENV
from pingpong.harness.measure.clients_ahead import START_GATE_FEATURE, can_start_ahead, wait_until_armed
from pingpong.harness.measure.local import LocalMeasurer, run_attempt_on
from pingpong.harness.measure.server import start_server
from pingpong.harness.settings.cell import CellSettings, cpus_for, orchestrator_cpus
from pingpong.harness.settings.manifest import resolve_command
from pingpong.harness.system import kernel_signals, processes
from tests.conftest import ROOT, by_name

SETTINGS = CellSettings(duration_s=0.3, warmup_s=0.1, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=True)
# The Python driver, node/driver/ under Node.js and under Bun, the Go, Rust and C++ clients: every driver that
# honours the start gate.
GATED_CLIENTS = ["websockets", "node-ws", "bun", "raw-tcp-node", "go-gorilla", "rust-tungstenite", "cpp-websocketpp"]


def test_the_manifest_says_which_clients_honour_the_gate():
    """Every client but the C floor (which starts in a millisecond) declares the start gate."""
    gated = {name for name in ("websockets", "aiohttp", "picows", "node-ws", "node-builtin", "bun", "raw-tcp-python",
                               "raw-tcp-node", "raw-tcp-bun", "go-gorilla", "rust-tungstenite", "cpp-websocketpp")
             if START_GATE_FEATURE in by_name("client", name).features}
    assert len(gated) == 12 and START_GATE_FEATURE not in by_name("client", "raw-tcp-c").features
    assert can_start_ahead(by_name("client", "websockets"), SETTINGS)
    for other in (replace(SETTINGS, client_processes=2, pairs=2), replace(SETTINGS, idle_connections=5),
                  replace(SETTINGS, workload="broadcast")):
        assert not can_start_ahead(by_name("client", "websockets"), other)


@pytest.mark.parametrize("client", GATED_CLIENTS)
def test_a_driver_waits_unconnected_at_its_gate(client, shared_servers, tmp_path):
    """Run by hand: the driver says armed and nothing else, holds no socket, and connects only after the go; with
    the gate closed instead it exits 0 at once, printing nothing and never connecting."""
    server = "raw-tcp-c" if client.startswith("raw-tcp") else "websockets"
    server_under_test = shared_servers.get(by_name("server", server), SETTINGS)
    for started in (True, False):
        events_read, events_write = os.pipe()
        gate_read, gate_write = os.pipe()
        argv = resolve_command(by_name("client", client), ROOT) + [
            "--url", f"{server_under_test.base_url}/gate-{started}", "--duration", "0.3", "--warmup", "0.1"]
        environment = {**os.environ, EVENTS_FD_ENV: str(events_write), START_FD_ENV: str(gate_read)}
        driver = subprocess.Popen(argv, cwd=ROOT, env=environment, pass_fds=(events_write, gate_read),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(events_write)
        os.close(gate_read)
        try:
            assert wait_until_armed(events_read, 20) is None
            assert select.select([events_read], [], [], 0.3)[0] == []  # nothing more while it waits
            assert kernel_signals.inspect_sockets([driver.pid], server_under_test.port, False)["sockets"] == 0
            if started:
                os.write(gate_write, f"{GO_LINE}\n".encode())
            os.close(gate_write)
            stdout, stderr = driver.communicate(timeout=30)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
        with os.fdopen(events_read, "rb") as events:
            rest = events.read()
        if started:
            assert driver.returncode == 0, stderr
            assert rest == b"ready\nwindow-start\nwindow-end\n"
            report = json.loads(stdout)
            assert report["roundtrips"] > 0 and report["errors"] == 0
        else:
            assert (driver.returncode, stdout, rest) == (0, "", b""), stderr


def test_a_servers_clients_all_start_while_it_gets_ready(tmp_path):
    """By default every client of a server's group starts with the server, off the CPU it will be measured on
    (same-cpu: beside the orchestrator; split: the client's CPU, and the server's once it is ready), and waits there
    loaded and unconnected, numbered by the turn it will take (the C floor's, which has no gate, starts at its turn
    and keeps its own turn's number); each attempt takes its own in order, measures and verifies as usual, with the
    warmup of its place (the Node.js client's jit warmup); the last leaves none."""
    settings = replace(SETTINGS, jit_warmup_s=0.3)
    clients = [by_name("client", name) for name in ("websockets", "raw-tcp-c", "node-ws", "bun")]
    server_cpus, client_cpus = cpus_for(settings)
    started = start_server(by_name("server", "websockets"), settings, ROOT, tmp_path, server_cpus,
                           [(client, settings, 1) for client in clients])
    try:
        assert started.problem is None
        waiting = list(started.waiting)
        assert [(w.client_name, w.number) for w in waiting] == [("websockets", 1), ("node-ws", 3), ("bun", 4)]
        for client in waiting:
            assert client.process.popen.poll() is None
            # split: loaded on the client's CPUs, and the server's too once it was ready; same-cpu (one pair's
            # default): beside the orchestrator, off the CPU the attempts measure on (it moves at its turn)
            loading = orchestrator_cpus(settings) or server_cpus | client_cpus
            assert os.sched_getaffinity(client.process.pid) == loading
            assert kernel_signals.inspect_sockets([client.process.pid], started.port, False)["sockets"] == 0
        attempts = [run_attempt_on(started, clients[0], settings, 1, ROOT)]
        assert all(w.armed for w in waiting)  # the first go came only once every waiting client had loaded
        assert started.waiting == waiting[1:]
        attempts += [run_attempt_on(started, client, settings, 1, ROOT) for client in clients[1:]]
        assert started.waiting == [] and started.upcoming == [] and started.turns == 4
        # the raw TCP client cannot talk to a WebSocket server: its attempt fails on its own, the others measure
        assert [attempt.status for attempt in attempts] != ["ok"] * 4
        measured = [attempts[0], attempts[2], attempts[3]]
        assert [attempt.status for attempt in measured] == ["ok"] * 3, [a.reason for a in measured]
        assert [attempt.client_pid for attempt in measured] == [w.process.pid for w in waiting]
        assert all(attempt.roundtrips > 0 for attempt in measured)
        assert all(a.client_report["payload"] == {"kind": "text-ascii", "size": 4} for a in measured)
        assert [a.client_report["warmup"]["elapsed_s"] >= w for a, w in zip(measured, (0.1, 0.3, 0.1))] == [True] * 3
    finally:
        started.discard_waiting()
        processes.stop(started.process)


def test_with_one_ahead_each_next_client_is_started_while_the_attempt_before_it_ends(tmp_path):
    """With one client ahead at a time, the first client is started with the server, each next one by the attempt
    before it (it is waiting, loaded and unconnected, when that attempt returns)."""
    clients = [by_name("client", name) for name in ("websockets", "node-ws", "bun")]
    server_cpus, _ = cpus_for(SETTINGS)
    started = start_server(by_name("server", "websockets"), SETTINGS, ROOT, tmp_path, server_cpus,
                           [(client, SETTINGS, 1) for client in clients], clients_ahead=1)
    try:
        assert started.problem is None and [w.client_name for w in started.waiting] == ["websockets"]
        waiting_pids = [started.waiting[0].process.pid]
        attempts = []
        for index, client in enumerate(clients):
            attempts.append(run_attempt_on(started, client, SETTINGS, 1, ROOT))
            if index < 2:
                assert [w.client_name for w in started.waiting] == [clients[index + 1].name]
                waiting = started.waiting[0]
                assert waiting.process.popen.poll() is None and waiting.number == index + 2
                assert kernel_signals.inspect_sockets([waiting.process.pid], started.port, False)["sockets"] == 0
                waiting_pids.append(waiting.process.pid)
        assert started.waiting == [] and started.upcoming == []
        assert [attempt.status for attempt in attempts] == ["ok"] * 3, [a.reason for a in attempts]
        assert [attempt.client_pid for attempt in attempts] == waiting_pids
    finally:
        started.discard_waiting()
        processes.stop(started.process)


def test_a_client_started_for_an_attempt_that_does_not_come_is_stopped(tmp_path):
    """The engine asks for another client than the one waiting: the waiting one is stopped and the attempt starts
    its own; discard_waiting stops one that is still waiting when the server stops."""
    clients = [by_name("client", name) for name in ("websockets", "node-ws")]
    server_cpus, _ = cpus_for(SETTINGS)
    started = start_server(by_name("server", "websockets"), SETTINGS, ROOT, tmp_path, server_cpus,
                           [(client, SETTINGS, 1) for client in clients])
    try:
        first, second = started.waiting
        attempt = run_attempt_on(started, clients[1], SETTINGS, 1, ROOT)  # not the one it expected
        assert attempt.status == "ok" and attempt.client_pid not in (first.process.pid, second.process.pid)
        assert first.process.popen.poll() is not None and second.process.popen.poll() is not None  # stopped
        assert started.waiting == [] and started.upcoming == []
        again = start_server(by_name("server", "websockets"), SETTINGS, ROOT, tmp_path / "again", server_cpus,
                             [(clients[0], SETTINGS, 2)])
        [waiting] = again.waiting
        LocalMeasurer().stop(again)
        assert waiting.process.popen.poll() is not None and again.waiting == []
    finally:
        started.discard_waiting()
        processes.stop(started.process)


def test_a_client_that_cannot_load_fails_its_attempt_with_the_reason(tmp_path):
    """A gated client whose program does not exist exits before it is armed: its attempt fails with its exit code
    and stderr, and the run goes on. Waiting for a later attempt, it is stopped when an earlier attempt checks that
    every waiting client has loaded; its own attempt then starts it at its turn, which fails the same way."""
    broken = replace(by_name("client", "websockets"), name="broken", command=("{python}", "-m", "clients.missing"))
    server_cpus, _ = cpus_for(SETTINGS)
    for group in ([broken], [by_name("client", "bun"), broken, by_name("client", "websockets")]):
        started = start_server(by_name("server", "websockets"), SETTINGS, ROOT, tmp_path / str(len(group)),
                               server_cpus, [(client, SETTINGS, 1) for client in group])
        try:
            waiting = list(started.waiting)
            assert [w.client_name for w in waiting] == [client.name for client in group]
            attempts = [run_attempt_on(started, client, SETTINGS, 1, ROOT) for client in group]
            failed = attempts[group.index(broken)]
            assert failed.status == "client-failed" and failed.client_exit_code == 1
            assert "clients.missing" in failed.client_stderr_tail
            assert [a.status for a in attempts if a is not failed] == ["ok"] * (len(group) - 1)
            assert all(w.process.popen.poll() is not None for w in waiting)
        finally:
            started.discard_waiting()
            processes.stop(started.process)


def test_the_engine_hands_each_server_its_clients_in_order_unless_told_not_to(tmp_path):
    """With spawn_ahead (the default) every server start gets the attempts to come, in the order they run; with
    --no-spawn-ahead none."""
    from pingpong.harness.settings.round_policy import RoundPolicy
    from tests.test_rounds import run_engine

    for spawn_ahead in (True, False):
        policy = RoundPolicy(min_rounds=2, max_rounds=2, precision=None, budget_s=None, seed=3,
                             spawn_ahead=spawn_ahead)
        run, measurer, _, _ = run_engine(tmp_path / str(spawn_ahead), policy, {})
        assert run.configuration["rounds"]["spawn_ahead"] is spawn_ahead
        assert len(measurer.upcoming) == 4  # two servers, two rounds
        for server, upcoming in measurer.upcoming:
            assert (upcoming is not None) is spawn_ahead
            if spawn_ahead:
                round_number = upcoming[0][2]
                ran = [client for r, s, client in measurer.order if (r, s) == (round_number, server)]
                assert [client.name for client, _, _ in upcoming] == ran
                assert {r for _, _, r in upcoming} == {round_number}


def test_a_client_waiting_for_a_server_that_fails_its_checks_is_stopped(tmp_path):
    """A server that echoes instead of relaying fails verification: the attempt says so, and the client started
    for it while it got ready is stopped, not left waiting (or reaped by no one)."""
    client = by_name("client", "websockets")
    server_cpus, _ = cpus_for(SETTINGS)
    started = start_server(by_name("server", "echo-to-sender"), SETTINGS, ROOT, tmp_path, server_cpus,
                           [(client, SETTINGS, 1)])
    try:
        [waiting] = started.waiting
        assert started.problem is not None
        attempt = run_attempt_on(started, client, SETTINGS, 1, ROOT)
        assert attempt.status == "verification-failed"
        assert waiting.process.popen.poll() is not None and (waiting.events_fd, waiting.gate_fd) == (None, None)
    finally:
        LocalMeasurer().stop(started)
