"""One CPU setting for every server (--workers N): how each server declares it uses N CPUs, how the CPUs are split
between the server and the clients, and, with real processes, N threads or N processes seen in /proc, the relay
still exact with several pairs at once on N threads, and nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from websockets.sync.client import connect

from pingpong import contract
from pingpong.harness.commands.parser import build_parser
from pingpong.harness.measure import probe
from pingpong.harness.measure.attempt_plan import server_command
from pingpong.harness.measure.server import launch_server, stop_server, wait_for_workers, worker_counts
from pingpong.harness.settings import cell
from pingpong.harness.settings.catalog import check_availability, cpu_use, skip_reason
from pingpong.harness.settings.configuration import build_configuration, resolve_options
from pingpong.harness.settings.manifest import resolve_command
from pingpong.harness.system import broker, listeners, processes
from tests.conftest import (IMPLEMENTATIONS, QUICK_RELAY_CHECK, QUICK_RELAY_SILENCE_S, ROOT, CellSettings, by_name,
                            stopped_cleanly)
from tests.test_run_bench import run_bench

SERVERS = [i for i in IMPLEMENTATIONS if i.role == "server"]
THREADED = [i for i in SERVERS if "threads" in i.features]
MULTI_PROCESS = [i for i in SERVERS if "workers" in i.features]
NO_BROKER = broker.unavailable_reason()
SETTINGS = CellSettings(duration_s=0.4, warmup_s=0.2, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=20.0, stall_timeout_s=5.0, pin=True,
                        relay_silence_s=QUICK_RELAY_SILENCE_S)
PAIRS = 4  # at once, each in a room of its own, on a server with N threads
MESSAGES = 40  # each way, per pair


def available(implementation) -> bool:
    return check_availability(implementation, ROOT).available


def test_each_server_declares_how_it_uses_n_cpus():
    """The three compiled servers run N threads, the five multi-process servers N processes, every other server one
    CPU; no client declares either."""
    assert {s.name for s in THREADED} == {"go-gorilla", "rust-tungstenite", "cpp-websocketpp"}
    assert {s.name for s in MULTI_PROCESS} == {"sanic-workers", "blacksheep-workers", "aiohttp-workers",
                                               "node-ws-cluster", "bun-workers"}
    assert {cpu_use(s) for s in THREADED} == {"threads"} and {cpu_use(s) for s in MULTI_PROCESS} == {"processes"}
    one_cpu = {s.name for s in SERVERS if cpu_use(s) is None}
    assert {"sanic", "aiohttp", "websockets", "node-ws", "bun", "picows", "raw-tcp-c", "c-ws-floor"} <= one_cpu
    assert all(not set(contract.CPU_FEATURES) & set(i.features) for i in IMPLEMENTATIONS if i.role == "client")


def test_list_says_per_server_how_it_uses_n_cpus():
    """run_bench.py --list: each server's row says N threads, N processes with a broker, or one CPU only; a
    client's says nothing of it; the table shows it under the server's description."""
    rows = {(r["role"], r["name"]): r for r in json.loads(run_bench("--list", "--format", "json").stdout)}
    assert "N threads in one process" in rows[("server", "go-gorilla")]["cpus"]
    assert "N processes on one port" in rows[("server", "node-ws-cluster")]["cpus"]
    assert rows[("server", "sanic")]["cpus"].startswith("one CPU only")
    assert rows[("server", "raw-tcp-c")]["cpus"].startswith("one CPU only")
    assert rows[("client", "go-gorilla")]["cpus"] is None
    table = run_bench("--list").stdout.splitlines()
    below = table[next(i for i, line in enumerate(table) if line.startswith("server  cpp-websocketpp")) + 2]
    assert below.strip() == ("CPUs: --workers N: N threads in one process, rooms in its memory; by room, a loop and "
                             "a port per thread")  # thread-ports


def test_a_threaded_server_needs_no_broker_and_gets_workers_without_broker(monkeypatch):
    """Above one worker a threaded server is measured without redis-server (a multi-process one is skipped), and
    its command has --workers N and no --broker; a one-CPU server is skipped saying so."""
    monkeypatch.setattr(broker, "redis_server_path", lambda: None)
    two = replace(SETTINGS, workers=2)
    client = by_name("client", "websockets")
    for server in THREADED:
        assert skip_reason(server, client, two) is None or "unavailable" in skip_reason(server, client, two)
    assert "needs a Redis broker" in skip_reason(by_name("server", "aiohttp-workers"), client, two)
    assert skip_reason(by_name("server", "aiohttp"), client, two) == (
        "server aiohttp uses one CPU only: it declares neither workers nor threads (its manifest entry)")
    argv = server_command(by_name("server", "rust-tungstenite"), two, ROOT, "127.0.0.1", 5000, None)
    assert argv[-2:] == ["--workers", "2"] and "--broker" not in argv
    argv = server_command(by_name("server", "aiohttp-workers"), two, ROOT, "127.0.0.1", 5000, "unix:///x")
    assert argv[-4:] == ["--workers", "2", "--broker", "unix:///x"]
    assert "--workers" not in server_command(by_name("server", "rust-tungstenite"), SETTINGS, ROOT, "127.0.0.1", 1)


def test_the_server_gets_n_cpus_the_clients_the_others_and_both_all_when_none_is_left(monkeypatch):
    """With N = 1 nothing changes: a serial cell shares one CPU, a cell of 8 pairs splits one and one on 2 CPUs. With
    N = 2 on 2 CPUs no CPU is left for the clients: both sides get both, recorded as placement shared. On 8 CPUs
    N = 2 is a split, the server two CPUs and the clients six."""
    monkeypatch.setattr(cell, "our_cpus", lambda: (0, 1))
    assert cell.placement_of(SETTINGS) == "same-cpu" and cell.cpus_for(SETTINGS) == ({1}, {1})
    eight = replace(SETTINGS, pairs=8)
    assert cell.placement_of(eight) == "split" and cell.cpus_for(eight) == ({0}, {1})
    for two in (replace(eight, workers=2), replace(SETTINGS, workers=2), replace(eight, workers=2, placement="split")):
        assert cell.placement_of(two) == cell.SHARED and cell.cpus_for(two) == ({0, 1}, {0, 1})
        assert cell.orchestrator_cpus(two) is None
    assert cell.placement_of(replace(eight, workers=2, placement="same-cpu")) == "same-cpu"
    assert cell.placement_of(replace(eight, workers=2, pin=False)) == "unpinned"
    monkeypatch.setattr(cell, "our_cpus", lambda: tuple(range(8)))
    two = cell.with_planned_cpus(replace(eight, workers=2))
    assert cell.placement_of(two) == "split" and cell.cpus_for(two) == ({0, 1}, set(range(2, 8)))


def test_each_point_of_a_workers_sweep_has_its_own_cpus(monkeypatch):
    """--workers 1,2 on 2 CPUs: the point N = 1 records the server on CPU 0 and the clients on CPU 1, the point
    N = 2 both sides on both; a run without --workers keeps one and one."""
    monkeypatch.setattr(cell, "our_cpus", lambda: (0, 1))
    configuration = build_configuration(resolve_options(build_parser().parse_args(["run", "--workers", "1,2"])),
                                        ["run_bench.py"], [], [], [])
    planned = [configuration.settings_at(point) for point in configuration.points]
    assert [(s.workers, s.server_cpus, s.client_cpus) for s in planned] == [(1, (0,), (1,)), (2, (0, 1), (0, 1))]
    recorded = configuration.recorded(planned[1])
    assert recorded["pinned"] and recorded["server_cpus"] == recorded["client_cpus"] == [0, 1]
    plain = build_configuration(resolve_options(build_parser().parse_args(["run"])), ["run_bench.py"], [], [], [])
    assert (plain.settings.server_cpus, plain.settings.client_cpus) == ((0,), (1,))


def task_names(pid: int) -> list[str]:
    """The name (comm) of every thread of a process, from /proc/PID/task."""
    names = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as comm:
                names.append(comm.read().strip())
        except OSError:
            continue  # a thread that ended in between
    return names


def allowed_cpus(pid: int) -> set[int]:
    return set(os.sched_getaffinity(pid))


def relay_pairs(base_url: str, pairs: int = PAIRS, messages: int = MESSAGES) -> list[str]:
    """pairs pairs at once, each in a room of its own on its own thread: messages text and binary messages each way,
    each checked exact and in order; the problems found (empty: none)."""
    problems: list[str] = []

    def one_pair(index: int) -> None:
        try:
            with connect(f"{base_url}/threads-{index}") as first, connect(f"{base_url}/threads-{index}") as second:
                for number in range(messages):
                    text = f"pair {index} message {number} é"
                    first.send(text)
                    if (got := second.recv(timeout=5)) != text:
                        problems.append(f"pair {index}: {got!r} for {text!r}")
                    data = bytes([index, number % 256, 0, 255]) * (1 + number % 7)
                    second.send(data)
                    if (got := first.recv(timeout=5)) != data:
                        problems.append(f"pair {index}: {got!r} for {data!r}")
                for member in (first, second):
                    with pytest.raises(TimeoutError):
                        member.recv(timeout=0.05)  # nothing more: no echo, no other room's messages
        except Exception as exc:  # noqa: BLE001 - reported with the others
            problems.append(f"pair {index}: {type(exc).__name__}: {exc}")

    runners = [threading.Thread(target=one_pair, args=(index,)) for index in range(pairs)]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join(60)
    return problems


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("server", THREADED, ids=lambda s: s.name)
def test_a_threaded_server_runs_n_threads_on_its_n_cpus_and_relays_several_pairs_exactly(server, workers,
                                                                                        tmp_path):
    """Started as a run starts it, on the CPUs planned for N (one CPU at N = 1; both at N = 2 here): /proc shows N
    runtime threads (tokio's workers beside the main thread; websocketpp's io_context threads, the main one
    included) and the server's CPUs as its affinity; Go reports GOMAXPROCS = N. Four pairs at once, each in its own
    room, exchange text and binary messages both ways, exact; once stopped, nothing of its process group is left."""
    if not available(server):
        pytest.skip(check_availability(server, ROOT).reason)
    settings = cell.with_planned_cpus(replace(SETTINGS, workers=workers, pairs=PAIRS))
    server_cpus = set(settings.server_cpus)
    started = launch_server(server, settings, ROOT, tmp_path, server_cpus)
    try:
        probe.wait_until_ready(started.base_url, started.process, settings.ready_timeout_s)
        assert started.broker is None and started.worker_stats_dir is None
        assert relay_pairs(started.base_url) == []
        info = json.loads(started.info_path.read_text())["settings"]
        names = task_names(started.pid)
        assert allowed_cpus(started.pid) == server_cpus and len(server_cpus) == workers
        assert listeners.process_tree(started.pid) == [started.pid]  # one process
        if server.name == "rust-tungstenite":
            assert names.count("tokio-rt-worker") == workers and len(names) == workers + 1, names
            assert info["worker_threads"] == workers
        elif server.name == "cpp-websocketpp":
            assert len(names) == workers, names
            assert info["io_threads"] == workers
        else:
            assert info["gomaxprocs"] == workers, info
        assert info["workers"] == (workers if workers > 1 else None)  # the run passes --workers above 1 only
    finally:
        code = stop_server(started)
    assert stopped_cleanly(server.name, code, started.process.stderr_tail(40)), started.stderr_tail()
    assert processes.group_members(started.pid) == []


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("server", MULTI_PROCESS, ids=lambda s: s.name)
def test_a_multi_process_server_runs_n_worker_processes_each_on_a_cpu_of_its_own(server, workers, tmp_path):
    """Started as a run starts it: N worker processes say they serve, each in the server's process tree in /proc
    and alive, pinned one per server CPU (both CPUs here at N = 2); a pair relays through it; once stopped, no
    worker and no broker is left."""
    if not available(server):
        pytest.skip(check_availability(server, ROOT).reason)
    if workers > 1 and NO_BROKER is not None:
        pytest.skip(f"needs a Redis broker: {NO_BROKER}")
    settings = cell.with_planned_cpus(replace(SETTINGS, workers=workers, pairs=PAIRS))
    server_cpus = set(settings.server_cpus)
    started = launch_server(server, settings, ROOT, tmp_path, server_cpus)
    try:
        probe.wait_until_ready(started.base_url, started.process, settings.ready_timeout_s)
        assert wait_for_workers(started, settings.ready_timeout_s) is None, started.stderr_tail()
        pids = [record["pid"] for record in worker_counts(started)]
        tree = listeners.process_tree(started.pid)
        assert len(set(pids)) == workers and set(pids) <= set(tree), (pids, tree)
        assert sorted(cpu for pid in pids for cpu in allowed_cpus(pid)) == sorted(server_cpus)
        assert relay_pairs(started.base_url, pairs=1, messages=10) == []
        assert (started.broker is not None) == (workers > 1)
    finally:
        code = stop_server(started)
    assert stopped_cleanly(server.name, code, started.process.stderr_tail(40)), started.stderr_tail()
    assert processes.group_members(started.pid) == [] and not any(Path(f"/proc/{pid}").exists() for pid in pids)
    if started.broker is not None:
        assert processes.group_members(started.broker.pid) == []


def test_a_sweep_of_a_threaded_server_records_where_each_side_ran(tmp_path):
    """run --workers 1,2 of go-gorilla with 4 pairs: at N = 1 the server on one CPU and the clients on the other
    (placement split), at N = 2 both on both (placement shared), each attempt saying so, and the server's report
    says GOMAXPROCS = N; no broker at either point, no process left."""
    server = by_name("server", "go-gorilla")
    if not available(server):
        pytest.skip(check_availability(server, ROOT).reason)
    if len(cell.our_cpus()) != 2:
        pytest.skip("the placements asserted are those of a 2-CPU host")
    completed = run_bench("--servers", "go-gorilla", "--clients", "websockets", "--workers", "1,2", "--pairs", "4",
                          "--repeat", "1", "--duration", "0.3", "--warmup", "0.1", "--no-figures", *QUICK_RELAY_CHECK,
                          "--results-dir", str(tmp_path))
    assert completed.returncode == 0, completed.stderr
    files = {path.name.split("Z-")[1]: path for path in tmp_path.glob("*Z-*.json")}
    expected = {1: ("split", [0], [1]), 2: ("shared", [0, 1], [0, 1])}
    for workers, (placement, server_cpus, client_cpus) in expected.items():
        run = json.loads(files[f"workers{workers}.json"].read_text())
        attempt = run["cells"][0]["attempts"][0]
        assert attempt["status"] == "ok", attempt["reason"]
        assert (attempt["cpu_placement"], attempt["server_cpus"], attempt["client_cpus"]) == (
            placement, server_cpus, client_cpus)
        assert run["configuration"]["server_cpus"] == server_cpus
        assert attempt["server_info"]["settings"]["gomaxprocs"] == workers
        assert attempt["workers"] is None or attempt["workers"].get("broker") is None
        assert processes.group_members(attempt["server_pid"]) == []


@pytest.mark.parametrize("server", THREADED, ids=lambda s: s.name)
def test_a_threaded_server_refuses_a_workers_count_below_one_in_one_line_exit_2(server):
    """--workers 0 or a word: exit 2 and one line on stderr naming --workers, before anything listens."""
    if not available(server):
        pytest.skip(check_availability(server, ROOT).reason)
    for value in ("0", "two"):
        completed = subprocess.run([*resolve_command(server, ROOT), "--host", "127.0.0.1", "--port", "0",
                                    "--workers", value], cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert completed.returncode == 2 and completed.stdout == "", (value, completed)
        assert "--workers" in completed.stderr and len(completed.stderr.strip().splitlines()) == 1, completed.stderr
