"""--room-placement room: every worker of a --workers server also listens on a port of its own (--worker-ports), and
each client process connects to one worker's, so all of a room's members sit on one worker. Real servers, a real
Redis broker and real runs: where each connection landed is read back from /proc and from what the workers wrote."""

import json
import os
import socket
import subprocess
import sys
from dataclasses import replace

import psutil
import pytest
from websockets.sync.client import connect

from pingpong.contract import RAW_WINDOWS_ENV
from pingpong.harness.analysis import scaling
from pingpong.harness.commands.parser import build_parser
from pingpong.harness.measure import probe
from pingpong.harness.measure import server as server_module
from pingpong.harness.measure.local import run_attempt
from pingpong.harness.measure.attempt_plan import process_worker, server_command
from pingpong.harness.measure.server import (check_worker_ports, launch_server, stop_server, wait_for_workers,
                                             worker_counts)
from pingpong.harness.settings import cell
from pingpong.harness.settings.catalog import skip_reason
from pingpong.harness.settings.configuration import build_configuration, resolve_options
from pingpong.harness.settings.usage import UsageError
from pingpong.harness.system import processes
from tests.conftest import QUICK_RELAY_CHECK, ROOT, by_name, stopped_cleanly
from tests.test_cli_input import assert_one_line_error
from tests.test_run_bench import RAW_WINDOWS
from tests.test_workers import SETTINGS, WORKER_SERVERS, needs_broker, run_bench, server_side_owner

BY_ROOM = replace(SETTINGS, room_placement="room")
MESSAGES = 20  # each way, per pair


def resolved(*args):
    return resolve_options(build_parser().parse_args(["run", *args]))


def test_room_placement_is_a_dimension_and_forces_a_fresh_server():
    """kernel,room makes two points of one run (room_placement in each), a server per attempt; kernel alone is no
    dimension and changes nothing."""
    options = resolved("--workers", "2", "--room-placement", "kernel,room", "--pairs", "4", "--client-processes", "2")
    configuration = build_configuration(options, ["run_bench.py"], [], [], [])
    assert [p["room_placement"] for p in configuration.points] == ["kernel", "room"]
    assert configuration.settings_at(configuration.points[1]).room_placement == "room"
    one_worker = resolved("--room-placement", "room", "--pairs", "2", "--client-processes", "2")
    assert one_worker.rounds.fresh_server and "--room-placement room" in one_worker.rounds.fresh_server_reason
    plain = build_configuration(resolved(), ["run_bench.py"], [], [], [])
    assert "room_placement" not in plain.points[0] and plain.settings.room_placement == "kernel"


@pytest.mark.parametrize("args, fragment", [
    (["--workers", "1,2", "--room-placement", "room", "--pairs", "4"],
     "--workers 2 needs --client-processes 2 or more, and as many --pairs (got --client-processes 1, --pairs 4)"),
    (["--workers", "2", "--room-placement", "room", "--pairs", "1,4", "--client-processes", "2"],
     "(got --client-processes 2, --pairs 1)"),
    (["--workload", "broadcast", "--room-placement", "room"], "--room-placement room is for --workload pingpong"),
    (["--room-placement", "rooms"], "--room-placement 'rooms': choose from kernel, room"),
])
def test_room_placement_without_a_client_process_per_worker_is_refused(args, fragment):
    """Each worker takes whole client processes: fewer processes (or pairs) than workers, another workload or an
    unknown placement is a usage error naming what is needed."""
    with pytest.raises(UsageError) as raised:
        resolved(*args)
    assert fragment in str(raised.value)


def test_client_processes_take_the_workers_in_turn_and_the_server_is_told_to_open_its_ports():
    """Process j goes to worker j mod N; by room the server's command carries --worker-ports; a server without
    workers is skipped by room, saying why."""
    assert [process_worker(index, 2) for index in range(5)] == [0, 1, 0, 1, 0]
    server = by_name("server", "aiohttp-workers")
    assert server_command(server, BY_ROOM, ROOT, "127.0.0.1", 9000, "unix:///b", worker_ports=True)[-1] == \
        "--worker-ports"
    assert "--worker-ports" not in server_command(server, SETTINGS, ROOT, "127.0.0.1", 9000, "unix:///b")
    assert skip_reason(by_name("server", "websockets"), by_name("client", "websockets"),
                       replace(BY_ROOM, workers=1)) == ("server websockets runs one process: --room-placement room "
                                                        "needs workers or thread-ports (its manifest entry)")


@pytest.mark.parametrize("command", [["{python}", "-m", "servers.aiohttp_server"], ["node", "node/ws_server.js"]],
                         ids=["python", "node"])
def test_a_server_without_workers_refuses_worker_ports(command):
    """--worker-ports is a flag of the workers servers only: the others exit 2, naming it."""
    argv = [sys.executable if part == "{python}" else part for part in command]
    completed = subprocess.run([*argv, "--port", "1", "--worker-ports"], cwd=ROOT, capture_output=True, text=True,
                               timeout=30)
    assert completed.returncode == 2 and "--worker-ports" in completed.stderr, completed.stderr


def serving_by_room(started) -> None:
    """Wait until a server launched by room serves, each of its workers has said so, and each own port answers."""
    try:
        probe.wait_until_ready(started.base_url, started.process, BY_ROOM.ready_timeout_s)
    except probe.NotReady as not_ready:  # why it did not start is in its log (sanic-workers exited -9 so, once)
        raise AssertionError(f"{not_ready}; stderr: {started.stderr_tail()}") from not_ready
    assert wait_for_workers(started, BY_ROOM.ready_timeout_s) is None, started.stderr_tail()
    assert check_worker_ports(started, BY_ROOM) is None, started.stderr_tail()


@needs_broker
@pytest.mark.parametrize("server", WORKER_SERVERS, ids=lambda s: s.name)
def test_each_worker_serves_its_own_port_and_keeps_its_rooms_to_itself(server, tmp_path):
    """With --worker-ports, worker i says it listens on PORT+1+i; a pair opened on each worker's own port is held
    by that worker alone (both server ends in its process, from /proc), the two ports by two workers; 20 messages
    each way cross each pair intact, none through the broker; the workers' final counts put each room's 2 members
    on one worker; nothing is left running."""
    started = launch_server(server, BY_ROOM, ROOT, tmp_path, {0})
    pairs = []
    try:
        serving_by_room(started)
        assert started.worker_ports == [started.port + 1, started.port + 2]
        owners = []
        for index, port in enumerate(started.worker_ports):
            pair = [connect(f"{started.worker_url(index)}/own-{index}") for _ in range(2)]
            pairs.append(pair)
            held_by = {server_side_owner(started.pid, port, member.socket.getsockname()[1]) for member in pair}
            assert len(held_by) == 1 and None not in held_by, held_by
            owners.append(held_by.pop())
            first, second = pair
            for number in range(MESSAGES):
                first.send(f"ping {number} é")
                assert second.recv(timeout=5) == f"ping {number} é"
                second.send(bytes([number, 255]) * 4)
                assert first.recv(timeout=5) == bytes([number, 255]) * 4
        assert owners[0] != owners[1]
        assert {record["own_port"]: record["pid"] for record in worker_counts(started)} == dict(
            zip(started.worker_ports, owners))
    finally:
        for member in (member for pair in pairs for member in pair):
            member.close()
        code = stop_server(started)
    assert stopped_cleanly(server.name, code, started.process.stderr_tail(40)), started.stderr_tail()
    counts = worker_counts(started)
    assert len(counts) == 2 and all(record["final"] for record in counts), counts
    for index, record in enumerate(sorted(counts, key=lambda record: record["own_port"])):
        assert record["joined_per_room"].get(f"/own-{index}") == 2, counts
        assert f"/own-{1 - index}" not in record["joined_per_room"], counts
    assert sum(record["delivered_from_broker"] for record in counts) == 0
    assert sum(record["relayed_local"] for record in counts) >= 2 * 2 * MESSAGES
    assert processes.group_members(started.pid) == [] and processes.group_members(started.broker.pid) == []


@needs_broker
def test_a_run_by_room_puts_every_pair_on_one_worker_and_leaves_nothing(tmp_path):
    """run --workers 1,2 --room-placement room with 4 pairs over 2 client processes, the five servers: every attempt
    records room placement and its workers' own ports (PORT+1..PORT+N), every pair's 2 members joined on one worker,
    every message of the window relayed in-process; at N = 2 the two processes' rooms on two workers. No worker or
    broker is left."""
    names = sorted(server.name for server in WORKER_SERVERS)
    completed = run_bench("--servers", ",".join(names), "--clients", "websockets", "--workers", "1,2",
                          "--room-placement", "room", "--pairs", "4", "--client-processes", "2", "--repeat", "1",
                          "--duration", "0.1", "--warmup", "0.05", "--jit-warmup", "0", "--no-figures",
                          *QUICK_RELAY_CHECK,
                          "--results-dir", str(tmp_path), timeout=600, env=RAW_WINDOWS)
    assert completed.returncode == 0, completed.stderr
    files = {path.name.split("Z-")[1]: path for path in tmp_path.glob("*Z-*.json")}
    for workers in (1, 2):
        run = json.loads(files[f"workers{workers}.json"].read_text())
        assert run["configuration"]["room_placement"] == "room"
        assert sorted(cell["server"] for cell in run["cells"]) == names
        for cell in run["cells"]:
            attempt = cell["attempts"][0]
            assert attempt["status"] == "ok", (cell["server"], attempt["reason"])
            record = attempt["workers"]
            assert record["room_placement"] == "room"
            assert record["worker_ports"] == [attempt["port"] + 1 + index for index in range(workers)]
            pairs = record["pairs"]
            assert len(pairs) == 4 and all(pair["placement"] == "local" and pair["workers"] == 1 for pair in pairs)
            # over the server's life, its relay check on the shared port included: the window's messages all local
            assert record["relayed_local"] >= 2 * attempt["roundtrips"], (cell["server"], record)
            rooms_of = [set(r["joined_per_room"]) for r in sorted(record["per_worker"], key=lambda r: r["own_port"])]
            for pair in pairs:  # client process j's rooms (-c<j>-) on worker j mod N
                process = int(pair["room"].split("-c")[1].split("-")[0])
                assert pair["room"] in rooms_of[process % workers], (pair, rooms_of)
            assert all(not psutil.pid_exists(worker["pid"]) for worker in record["per_worker"])
            if record["broker"] is not None:
                assert processes.group_members(record["broker"]["pid"]) == []


@needs_broker
def test_by_room_each_workers_own_port_speaks_wss_with_tls(tmp_path):
    """--tls --room-placement room at N = 2, the five servers: each worker's own port answers wss with the run's
    certificate (a plain listener there would fail the handshake), every pair sits on one worker, and client
    process j's rooms are on worker j."""
    names = sorted(server.name for server in WORKER_SERVERS)
    completed = run_bench("--servers", ",".join(names), "--clients", "websockets", "--workers", "2", "--tls",
                          "--room-placement", "room", "--pairs", "2", "--client-processes", "2", "--repeat", "1",
                          "--duration", "0.1", "--warmup", "0.05", "--jit-warmup", "0", "--no-figures",
                          *QUICK_RELAY_CHECK,
                          "--results-dir", str(tmp_path), "--format", "json", timeout=300,
                          env=RAW_WINDOWS)
    assert completed.returncode == 0, completed.stderr
    run = json.loads(completed.stdout)
    assert sorted(cell["server"] for cell in run["cells"]) == names
    for cell in run["cells"]:
        (attempt,) = cell["attempts"]
        assert attempt["status"] == "ok", (cell["server"], attempt["reason"])
        assert attempt["client_report"]["settings"]["tls"] is True
        record = attempt["workers"]
        assert record["worker_ports"] == [attempt["port"] + 1, attempt["port"] + 2]
        assert [pair["placement"] for pair in record["pairs"]] == ["local", "local"], record["pairs"]
        rooms_of = [set(r["joined_per_room"]) for r in sorted(record["per_worker"], key=lambda r: r["own_port"])]
        for pair in record["pairs"]:  # client process j's rooms (-c<j>-) on worker j
            process = int(pair["room"].split("-c")[1].split("-")[0])
            assert pair["roundtrips"] > 0 and pair["room"] in rooms_of[process], (pair, rooms_of)


def test_same_cpu_by_worker_plans_each_worker_beside_the_clients_of_its_rooms(monkeypatch):
    """--placement same-cpu at N = 2 by room: worker 0 and client process 0 (and 2, 4, ...) on our last CPU, as with
    one worker, worker 1 and client process 1 on the one before; the orchestrator has no CPU of its own left."""
    monkeypatch.setattr(cell, "our_cpus", lambda: (0, 1))
    settings = replace(BY_ROOM, placement="same-cpu", pairs=4, client_processes=4)
    assert cell.by_worker(settings) and cell.cpus_for(settings) == ({0, 1}, {0, 1})
    assert cell.orchestrator_cpus(settings) is None
    assert [cell.client_process_cpus(settings, process_worker(j, 2), {0, 1}) for j in range(4)] == [{1}, {0}] * 2
    one = replace(settings, workers=1)
    assert not cell.by_worker(one) and cell.cpus_for(one) == ({1}, {1}) and cell.orchestrator_cpus(one) == {0}
    monkeypatch.setattr(cell, "our_cpus", lambda: (0, 1, 2))
    assert cell.orchestrator_cpus(settings) == {0}  # workers on 2 and 1


def test_load_per_worker_gives_every_worker_the_same_pairs_and_client_processes_at_every_n():
    """--load-per-worker --pairs 4 --client-processes 1 over --workers 1,2: 4 pairs in 1 process at N = 1, 8 in 2 at
    N = 2 (so by room one process per worker, which a plain 1 process would refuse); recorded in the configuration,
    and a sweep's scaling series stays one series although pairs and processes differ between its points."""
    options = resolved("--workers", "1,2", "--room-placement", "room", "--load-per-worker", "--pairs", "4")
    configuration = build_configuration(options, ["run_bench.py"], [], [], [])
    at = [configuration.settings_at(point) for point in configuration.points]
    assert [(s.workers, s.pairs, s.client_processes) for s in at] == [(1, 4, 1), (2, 8, 2)]
    assert configuration.recorded(at[1])["load_per_worker"] is True
    with pytest.raises(UsageError):
        resolved("--workers", "1,2", "--room-placement", "room", "--pairs", "4")  # 1 process for 2 workers
    runs = [type("Run", (), {"configuration": {"load_per_worker": True, "workers": n, "pairs": p * n,
                                               "client_processes": n}}) for n in (1, 2) for p in (2, 4)]
    assert scaling.variants(runs) == ["pairs 2", "pairs 4"] * 2  # per worker: two series, each over N = 1 and 2
    assert scaling.variants(runs[1::2]) == ["", ""]
    with pytest.raises(UsageError) as raised:
        resolved("--workers", "1,2", "--load-per-worker", "--workload", "handshake")
    assert "--load-per-worker multiplies the pairs and client processes of --workload pingpong" in str(raised.value)
    runs = [type("Run", (), {"configuration": {"pairs": 4 * n, "client_processes": n}}) for n in (1, 2)]
    assert scaling.variants(runs) == ["pairs 4, client-processes 1", "pairs 8, client-processes 2"]


def test_same_cpu_with_workers_by_the_kernels_placement_is_refused():
    with pytest.raises(UsageError) as raised:
        resolved("--workers", "1,2", "--placement", "same-cpu", "--pairs", "2", "--client-processes", "2")
    assert "it needs --room-placement room" in str(raised.value)
    assert resolved("--workers", "1,2", "--placement", "same-cpu", "--room-placement", "room", "--pairs", "2",
                    "--client-processes", "2").placements == ("same-cpu",)


@needs_broker
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="placement by worker needs two CPUs of ours")
def test_a_same_cpu_attempt_by_worker_runs_each_worker_and_its_clients_on_one_cpu(monkeypatch):
    """A real attempt (node-ws-cluster, 2 workers, 2 client processes by room, placement same-cpu): every thread of
    worker i (its own port PORT+1+i) and of client process i is on one CPU, a different one for each i, read from
    /proc while they run; every pair stays on its worker and the attempt records same-cpu on both CPUs."""
    affinities: dict[str, set[frozenset[int]]] = {}
    real_start, real_pin = processes.start, processes.pin_threads

    def threads_cpus(pid: int) -> set[frozenset[int]]:
        return {frozenset(os.sched_getaffinity(int(tid))) for tid in os.listdir(f"/proc/{pid}/task")}

    def start(name, *args, **kwargs):
        process = real_start(name, *args, **kwargs)
        if name != "server":
            affinities[f"client {name}"] = threads_cpus(process.pid)
        return process

    def pin_threads(pid, cpus):
        real_pin(pid, cpus)
        affinities[f"worker pid {pid}"] = threads_cpus(pid)

    monkeypatch.setattr(processes, "start", start)
    monkeypatch.setattr(processes, "pin_threads", pin_threads)
    # where each thread runs is the subject, not the host's pace: a paced window of this cell (two workers, two client
    # processes, stopped from here) once got no slice with three tests at a time (RAW_WINDOWS, test_run_bench.py)
    monkeypatch.setenv(RAW_WINDOWS_ENV, "1")
    settings = replace(BY_ROOM, placement="same-cpu", pairs=2, client_processes=2)
    attempt = run_attempt(by_name("server", "node-ws-cluster"), by_name("client", "node-ws"), settings, 1, ROOT)
    assert attempt.ok, attempt.reason
    ours = sorted(os.sched_getaffinity(0))
    assert (attempt.cpu_placement, attempt.server_cpus) == ("same-cpu", ours[-2:])
    by_port = {record["own_port"]: record["pid"] for record in attempt.workers["per_worker"]}
    for index in range(2):
        cpu = frozenset({ours[-1 - index]})
        assert affinities[f"worker pid {by_port[attempt.port + 1 + index]}"] == {cpu}, affinities
        assert affinities[f"client client{index}"] == {cpu}, affinities
    assert [pair["placement"] for pair in attempt.workers["pairs"]] == ["local", "local"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="placement by worker needs two CPUs of ours")
def test_a_threads_server_by_room_runs_each_thread_on_its_own_port_and_cpu(monkeypatch):
    """cpp-websocketpp (thread-ports) at N = 2 by room, placement same-cpu: each thread writes its counts with its
    thread id and its own port PORT+1+i, the run pins that thread (and only it) to worker i's CPU, read from /proc
    while it runs; every pair sits on one thread, the window's messages relayed in-process, and there is no broker."""
    pinned: dict[int, set[int]] = {}
    real_pin_worker = server_module.pin_worker

    def pin_worker(record, cpus):
        real_pin_worker(record, cpus)
        pinned[record["tid"]] = os.sched_getaffinity(record["tid"])
        pinned[record["pid"]] = os.sched_getaffinity(record["pid"])  # the thread that is the process itself

    monkeypatch.setattr(server_module, "pin_worker", pin_worker)
    settings = replace(BY_ROOM, placement="same-cpu", pairs=2, client_processes=2)
    attempt = run_attempt(by_name("server", "cpp-websocketpp"), by_name("client", "node-ws"), settings, 1, ROOT)
    assert attempt.ok, attempt.reason
    ours = sorted(os.sched_getaffinity(0))
    record = attempt.workers
    assert record["broker"] is None and record["worker_ports"] == [attempt.port + 1, attempt.port + 2]
    threads = sorted(record["per_worker"], key=lambda worker: worker["own_port"])
    assert len({worker["pid"] for worker in threads}) == 1 and len({worker["tid"] for worker in threads}) == 2
    for index, worker in enumerate(threads):
        assert worker["own_port"] == attempt.port + 1 + index
        assert pinned[worker["tid"]] == {ours[-1 - index]}, pinned
    assert [pair["placement"] for pair in record["pairs"]] == ["local", "local"], record["pairs"]
    assert record["relayed_local"] >= 2 * attempt.roundtrips


def test_room_placement_with_too_few_client_processes_is_one_line_and_exit_2(tmp_path):
    completed = run_bench("--servers", "workers", "--workers", "2", "--room-placement", "room", "--pairs", "4",
                          "--results-dir", str(tmp_path))
    assert_one_line_error(completed, "--workers 2 needs --client-processes 2 or more")
    assert list(tmp_path.iterdir()) == []


def test_room_placement_with_only_servers_without_workers_is_one_line_and_exit_2(tmp_path):
    completed = run_bench("--servers", "websockets", "--clients", "websockets", "--room-placement", "room",
                          "--results-dir", str(tmp_path))
    assert_one_line_error(completed, "nothing to measure", "--room-placement room needs workers")
    assert list(tmp_path.iterdir()) == []


def test_a_threads_servers_room_reaches_its_members_on_every_thread_and_its_own_only(tmp_path):
    """cpp-websocketpp by room keeps each thread's members to itself (no lock for a room on one thread), yet a room
    whose members sit on both threads' ports still reaches all of them: with one member on thread 0 and two on
    thread 1, each member's messages reach the other two, exact, and nothing reaches another room's members; once
    thread 1's two have left, a newcomer there is in the room again, both ways; each thread counts its own joins."""
    server = by_name("server", "cpp-websocketpp")
    started = launch_server(server, BY_ROOM, ROOT, tmp_path, {0})
    members = []
    try:
        serving_by_room(started)
        first = connect(f"{started.worker_url(0)}/spans")
        second, third = (connect(f"{started.worker_url(1)}/spans") for _ in range(2))
        alone = [connect(f"{started.worker_url(1)}/aside") for _ in range(2)]
        members += [first, second, third, *alone]
        room = [first, second, third]
        for number in range(MESSAGES):
            for sender in room:
                message = f"{number} from {room.index(sender)} é"
                sender.send(message)
                for receiver in room:
                    if receiver is not sender:
                        assert receiver.recv(timeout=5) == message
        for member in alone:
            with pytest.raises(TimeoutError):
                member.recv(timeout=0.05)
        second.close()
        third.close()
        newcomer = connect(f"{started.worker_url(1)}/spans")  # thread 1 emptied the room, and fills it again
        members.append(newcomer)
        first.send(b"\x00still here\xff")
        assert newcomer.recv(timeout=5) == b"\x00still here\xff"
        newcomer.send("back")
        assert first.recv(timeout=5) == "back"
    finally:
        for member in members:
            member.close()
        code = stop_server(started)
    assert stopped_cleanly(server.name, code, started.process.stderr_tail(40)), started.stderr_tail()
    counts = sorted(worker_counts(started), key=lambda record: record["own_port"])
    assert [record["joined_per_room"].get("/spans") for record in counts] == [1, 3], counts
    assert [record["joined_per_room"].get("/aside") for record in counts] == [None, 2], counts
    assert processes.group_members(started.pid) == []


def test_a_servers_port_range_lies_below_the_ephemeral_ports_and_is_free(monkeypatch):
    """PORT..PORT+N for a server by room: all free, and below the kernel's ephemeral range, where no connect() can
    take one before the workers bind them; with no room below it, a free range the kernel's bind(0) gives."""
    low, _ = processes.ephemeral_port_range()
    if low < server_module.FIRST_RANGE_PORT + 100:
        pytest.skip(f"this host's ephemeral ports start at {low}: no room below them")
    for _ in range(20):
        port = server_module.free_port_checked(ports=3)
        assert server_module.FIRST_RANGE_PORT <= port and port + 2 < low
        assert all(processes.port_is_free(port + offset) for offset in range(3))
    monkeypatch.setattr(processes, "ephemeral_port_range", lambda: (server_module.FIRST_RANGE_PORT + 2, 60999))
    port = server_module.free_port_checked(ports=3)
    assert port >= server_module.FIRST_RANGE_PORT + 2
    assert all(processes.port_is_free(port + offset) for offset in range(3))


@pytest.mark.parametrize("taken", [0, 2], ids=["shared-port", "thread-1s-port"])
def test_a_threads_server_by_room_whose_port_is_taken_exits_1_and_says_which(taken):
    """Each thread makes its own endpoints and says whether it listens; when one cannot (here the shared port, on
    thread 0, or thread 1's own), no thread serves and the server exits 1 naming the port, at once."""
    binary = ROOT / "build" / "cpp_ws_server"
    if not binary.exists():
        pytest.skip("build/cpp_ws_server is not built (sh native/cpp/build.sh)")
    port = server_module.free_port_checked(ports=3)
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port + taken))
        holder.listen()
        done = subprocess.run([str(binary), "--host", "127.0.0.1", "--port", str(port), "--workers", "2",
                               "--worker-ports"], capture_output=True, text=True, timeout=20)
    assert done.returncode == 1, done
    assert f"cannot listen on 127.0.0.1:{port + taken}" in done.stderr, done.stderr
    assert done.stdout == ""


def test_a_port_on_an_ipv6_host_is_checked_in_its_own_family():
    """port_is_free and free_port bind in the host's family: on ::1, a port a listener holds is taken and a free
    one is free (an IPv4 probe socket could not bind ::1 at all, so every port looked taken)."""
    try:
        holder = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        holder.bind(("::1", 0))
    except OSError as error:
        pytest.skip(f"no IPv6 loopback here: {error}")
    with holder:
        holder.listen()
        taken = holder.getsockname()[1]
        assert not processes.port_is_free(taken, "::1")
        free = processes.free_port("::1")
        assert free != taken and processes.port_is_free(free, "::1")
