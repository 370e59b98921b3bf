"""--workers N: multi-process servers whose rooms span their processes through a real Redis broker (redis-server,
started by the suite), with real processes: relay across workers, the broker's own count, what a run records, and
what is left after a run, a Ctrl-C and a kill -9 of the orchestrator."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from websockets.sync.client import connect

from pingpong import contract
from pingpong.harness.cluster.figures import broker_window
from pingpong.harness.cluster.host_agent import server_cpus_on_host
from pingpong.harness.commands.parser import build_parser
from pingpong.harness.measure import probe
from pingpong.harness.measure.server import launch_server, stop_server, wait_for_workers, worker_counts
from pingpong.harness.settings import cell
from pingpong.harness.settings.catalog import skip_reason
from pingpong.harness.settings.configuration import build_configuration, resolve_options
from pingpong.harness.system import broker, listeners, processes
from tests.conftest import (IMPLEMENTATIONS, QUICK_RELAY_CHECK, QUICK_RELAY_SILENCE_S, ROOT, CellSettings, by_name,
                            stopped_cleanly)
from tests.interactive import sigint_at_default
from tests.test_contract import node_exports
from tests.test_run_bench import run_bench

WORKER_SERVERS = [i for i in IMPLEMENTATIONS if i.role == "server" and "workers" in i.features]
NO_BROKER = broker.unavailable_reason()
needs_broker = pytest.mark.skipif(NO_BROKER is not None, reason=f"needs a Redis broker: {NO_BROKER}")
SETTINGS = CellSettings(duration_s=0.5, warmup_s=0.2, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=20.0, stall_timeout_s=5.0, pin=True, workers=2,
                        relay_silence_s=QUICK_RELAY_SILENCE_S)
MESSAGES = 50  # each way


def server_side_owner(server_pid: int, server_port: int, client_port: int) -> int | None:
    """The process of the server's tree holding the server's end of the connection from client_port, from /proc.
    Read up to five times: one read of /proc/net/tcp can miss a row while other sockets come and go."""
    wanted = f"0100007F:{server_port:04X}", f"0100007F:{client_port:04X}"
    for _ in range(5):
        inode = None
        with open("/proc/net/tcp") as table:
            next(table)
            for line in table:
                fields = line.split()
                if (fields[1], fields[2]) == wanted:
                    inode = int(fields[9])
        for pid in listeners.process_tree(server_pid):
            if inode is not None and inode in listeners.socket_inodes(pid):
                return pid
        time.sleep(0.02)
    return None


def test_the_servers_that_declare_workers_are_a_set_of_their_own():
    """Five servers declare workers, each in set workers only; the servers that declare neither workers nor threads
    refuse --workers N > 1 with the reason."""
    assert {s.name for s in WORKER_SERVERS} == {"sanic-workers", "blacksheep-workers", "aiohttp-workers",
                                                "node-ws-cluster", "bun-workers"}
    assert all(s.sets == ("workers",) for s in WORKER_SERVERS)
    reason = skip_reason(by_name("server", "sanic"), by_name("client", "websockets"), SETTINGS)
    assert reason == ("server sanic uses one CPU only: it declares neither workers nor threads (its manifest "
                      "entry)")
    assert skip_reason(by_name("server", "sanic"), by_name("client", "websockets"), replace(SETTINGS, workers=1)) \
        is None


def test_without_redis_server_a_cell_above_one_worker_is_skipped_with_the_reason(monkeypatch):
    """No redis-server on PATH: N > 1 is skipped saying so and how to install it; N = 1 needs no broker."""
    monkeypatch.setattr(broker, "redis_server_path", lambda: None)
    server, client = by_name("server", "sanic-workers"), by_name("client", "websockets")
    assert skip_reason(server, client, SETTINGS) == ("--workers 2 needs a Redis broker: redis-server not found on "
                                                     "PATH (apt-get install redis-server)")
    assert skip_reason(server, client, replace(SETTINGS, workers=1)) is None
    with pytest.raises(broker.BrokerNotReady, match="not found on PATH"):
        broker.start_broker(Path("/tmp"))


def test_workers_is_a_dimension_and_forces_a_fresh_server():
    """--workers 1,2 makes two points (workers outermost), a server per attempt; a bad value is refused."""
    options = build_parser().parse_args(["run", "--workers", "1,2", "--pairs", "1,4"])
    resolved = resolve_options(options)
    configuration = build_configuration(resolved, ["run_bench.py"], [], [], [])
    assert [(p["workers"], p["pairs"]) for p in configuration.points] == [(1, 1), (1, 4), (2, 1), (2, 4)]
    assert configuration.settings_at(configuration.points[2]).workers == 2
    assert resolved.rounds.fresh_server and "--workers" in resolved.rounds.fresh_server_reason
    plain = build_configuration(resolve_options(build_parser().parse_args(["run"])), ["run_bench.py"], [], [], [])
    assert "workers" not in plain.points[0] and not plain.rounds.fresh_server
    with pytest.raises(Exception, match="--workers values must be at least 1"):
        resolve_options(build_parser().parse_args(["run", "--workers", "0"]))


def test_a_cluster_server_host_gives_each_worker_a_cpu_and_its_broker_is_read_at_the_window_edges():
    """On a server host a pinned server gets one CPU per worker, all but the last (a client there takes it); the
    broker's samples, 0.1 s apart, give its publishes and CPU over the window by interpolation, none uncovered."""
    assert server_cpus_on_host([0, 1], 2) == [0] == server_cpus_on_host([0, 1], 1) == server_cpus_on_host([0], 4)
    assert server_cpus_on_host(list(range(8)), 4) == [0, 1, 2, 3]
    assert server_cpus_on_host(list(range(8)), 16) == list(range(7))
    samples = [(0, 0.0, {"publishes": 0}), (100, 0.01, {"publishes": 1000}), (200, 0.02, {"publishes": 2000})]
    window = broker_window(samples, 50, 150)
    assert window == {"publishes": 1000, "cpu_s": 0.01, "cpu_us_per_publish": 10.0, "cpu_includes_readings": False}
    # INFO's wall time past the CPU: the CPU with the readings in it, said so
    loaded = [(0, 0.0, {"publishes": 0, "cpu_us_with_readings": 0}),
              (100, -0.01, {"publishes": 1000, "cpu_us_with_readings": 20000})]
    assert broker_window(loaded, 0, 100) == {"publishes": 1000, "cpu_s": 0.02, "cpu_us_per_publish": 20.0,
                                             "cpu_includes_readings": True}
    assert broker_window(samples, 50, 250) is None and broker_window(samples[:1], 0, 10) is None


def test_the_server_gets_n_cpus_and_the_clients_the_others_or_both_all_when_none_is_left(monkeypatch):
    """On 2 CPUs N = 1 gives one each, N = 2 both sides both CPUs; on 8, N = 2 gives the server two and the clients
    the six others, N = 16 every CPU to both."""
    monkeypatch.setattr(cell, "our_cpus", lambda: (0, 1))
    assert cell.plan_cpus(True, 1) == ({0}, {1})
    assert cell.plan_cpus(True, 2) == ({0, 1}, {0, 1}) == cell.plan_cpus(True, 4)
    monkeypatch.setattr(cell, "our_cpus", lambda: tuple(range(8)))
    assert cell.plan_cpus(True, 1) == ({0}, set(range(1, 8)))
    assert cell.plan_cpus(True, 2) == ({0, 1}, set(range(2, 8)))
    assert cell.plan_cpus(True, 16) == (set(range(8)), set(range(8)))
    assert cell.plan_cpus(False, 2) == (None, None)


def test_the_javascript_workers_speak_the_contracts_broker_vocabulary():
    """node/server_support.js names the stats folder's variable and the broker's keys and channels as contract.py
    does."""
    support = node_exports("server_support.js")
    for name in ("WORKER_STATS_DIR_ENV", "BROKER_CHANNEL_PREFIX", "BROKER_WORKERS_KEY_PREFIX",
                 "BROKER_PRESENCE_CHANNEL", "BROKER_WORKER_CHANNEL_PREFIX"):
        assert support[name] == getattr(contract, name), name


def broker_client(started):
    """A redis-py client on the server's broker (its unix socket): the test reads the broker's own state."""
    import redis

    return redis.Redis(unix_socket_path=str(started.broker.socket_path))


def broker_rooms_state(client) -> tuple[list[bytes], list[bytes]]:
    """The broker's room sets (contract.BROKER_WORKERS_KEY_PREFIX) and the room channels someone subscribes."""
    return (sorted(client.keys(contract.BROKER_WORKERS_KEY_PREFIX + "*")),
            sorted(client.pubsub_channels(contract.BROKER_CHANNEL_PREFIX + "*")))


def wait_for_broker_rooms(client, rooms: list[bytes], channels: list[bytes], timeout_s: float = 5.0):
    """Wait until the broker holds exactly these room sets and subscribed room channels; return what it holds."""
    deadline = time.monotonic() + timeout_s
    while (state := broker_rooms_state(client)) != (sorted(rooms), sorted(channels)) and time.monotonic() < deadline:
        time.sleep(0.02)  # a member's leave reaches the broker a moment after its close
    return state


def owners_of(started, members) -> list[int | None]:
    return [server_side_owner(started.pid, started.port, member.socket.getsockname()[1]) for member in members]


def exchange(first, second, messages: int = MESSAGES) -> int:
    """messages text and binary messages each way, each checked exact and in order; the messages sent."""
    for index in range(messages):
        first.send(f"text {index} é")
        assert second.recv(timeout=5) == f"text {index} é"
        second.send(bytes([index, 0, 255]) * 3)
        assert first.recv(timeout=5) == bytes([index, 0, 255]) * 3
    return 2 * messages


@needs_broker
@pytest.mark.parametrize("server", WORKER_SERVERS, ids=lambda s: s.name)
def test_a_split_pair_publishes_to_its_two_workers_only_and_a_local_pair_publishes_nothing(server, tmp_path):
    """At N = 2, pairs are opened (with 0 or 1 silent connection in a room of its own between a pair's two members,
    so a round-robin primary places them both ways) until one pair is split over the two workers and one sits on
    one worker, read back from /proc (which worker holds the server's end). Both exchange 50 text and 50 binary
    messages each way, exact and in order, and nothing reaches another room's members. The broker counts exactly the
    split pair's messages as PUBLISHes; the workers' counts say each of them reached 2 subscribers (its two workers),
    came back to its own worker and was delivered by the other, and that the local pair published nothing (its room
    absent from published_per_room) and was relayed in-process. While they are open, the broker holds one set per
    room naming the workers with members there and a channel per room subscribed by them only; once all are closed
    it holds no room set and no room channel."""
    started = launch_server(server, SETTINGS, ROOT, tmp_path, {0})
    try:
        probe.wait_until_ready(started.base_url, started.process, SETTINGS.ready_timeout_s)
        assert wait_for_workers(started, SETTINGS.ready_timeout_s) is None, started.stderr_tail()
        assert started.broker is not None and started.broker.version
        opened, found = [], {}
        for attempt in range(40):
            first = connect(f"{started.base_url}/pair-{attempt}")
            fillers = [connect(f"{started.base_url}/filler-{attempt}") for _ in range(attempt % 2)]
            second = connect(f"{started.base_url}/pair-{attempt}")
            opened += [first, *fillers, second]
            owners = owners_of(started, [first, second])
            assert None not in owners, owners
            found.setdefault("local" if owners[0] == owners[1] else "split", (f"/pair-{attempt}", first, second))
            if len(found) == 2:
                break
        else:
            raise AssertionError(f"not both placements in 40 pairs: {sorted(found)}")
        client = broker_client(started)
        worker_ids = {pid: str(pid).encode() for pid in (r["pid"] for r in worker_counts(started))}
        assert set(owners_of(started, opened)) <= set(worker_ids), "a connection held outside the workers"
        expected_sets = {}
        for member in opened:
            room = member.request.path
            expected_sets.setdefault(room, set()).add(worker_ids[owners_of(started, [member])[0]])
        for room, workers in expected_sets.items():
            assert client.smembers(contract.BROKER_WORKERS_KEY_PREFIX + room) == workers, room
            assert client.pubsub_numsub(contract.BROKER_CHANNEL_PREFIX + room)[0][1] == len(workers), room
        split_room, *split_pair = found["split"]
        local_room, *local_pair = found["local"]
        before = started.broker.publish_calls()
        sent = exchange(*split_pair)
        sent_locally = exchange(*local_pair)
        deadline = time.monotonic() + 5
        while started.broker.publish_calls() - before < sent and time.monotonic() < deadline:
            time.sleep(0.01)  # the last PUBLISH may follow its delivery by a moment (Node.js does not await it)
        time.sleep(0.2)  # and a stray one would come as late
        assert started.broker.publish_calls() - before == sent
        for member in opened:
            if member not in (*split_pair, *local_pair):
                with pytest.raises(TimeoutError):
                    member.recv(timeout=0.01)  # another room's: nothing crossed over
        for member in opened:
            member.close()
        assert wait_for_broker_rooms(client, [], []) == ([], [])
        client.close()
    finally:
        code = stop_server(started)
    assert stopped_cleanly(server.name, code, started.process.stderr_tail(40)), (started.stderr_tail(),
                                                                             started.process.stdout_text()[-3000:])
    counts = worker_counts(started)
    assert len(counts) == 2 and all(record["final"] for record in counts), counts
    assert sum(record["published"] for record in counts) == sent
    assert sum(record["publish_deliveries"] for record in counts) == 2 * sent
    assert sum(record["delivered_from_broker"] for record in counts) == sent
    assert sum(record["own_from_broker"] for record in counts) == sent
    assert sum(record["relayed_local"] for record in counts) == sent_locally
    assert sum(record["ack_timeouts"] for record in counts) == 0
    assert {room for record in counts for room in record["published_per_room"]} == {split_room}
    assert sorted(record["joined_per_room"].get(split_room, 0) for record in counts) == [1, 1], counts
    assert sorted(record["joined_per_room"].get(local_room, 0) for record in counts) == [0, 2], counts
    assert processes.group_members(started.pid) == [] and processes.group_members(started.broker.pid) == []
    assert not started.broker.socket_path.parent.exists()


@needs_broker
@pytest.mark.parametrize("server", WORKER_SERVERS, ids=lambda s: s.name)
def test_each_publish_reaches_exactly_the_workers_with_members_in_the_room(server, tmp_path):
    """At N = 3, three members of one room, wherever they land (read back from /proc): each member's message
    reaches the other two, exact; it is published once when the members sit on two or three workers, never when
    on one, and each PUBLISH reaches exactly as many subscribers as there are workers with members."""
    settings = replace(SETTINGS, workers=3)
    started = launch_server(server, settings, ROOT, tmp_path, {0})
    try:
        probe.wait_until_ready(started.base_url, started.process, settings.ready_timeout_s)
        assert wait_for_workers(started, settings.ready_timeout_s) is None, started.stderr_tail()
        members = [connect(f"{started.base_url}/three") for _ in range(3)]
        workers = len(set(owners_of(started, members)))
        before = started.broker.publish_calls()
        for round_index in range(10):
            for index, sender in enumerate(members):
                sender.send(f"{round_index} from {index}")
                for receiver in members:
                    if receiver is not sender:
                        assert receiver.recv(timeout=5) == f"{round_index} from {index}"
        sent = 30
        deadline = time.monotonic() + 5
        while started.broker.publish_calls() - before < (sent if workers > 1 else 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        assert started.broker.publish_calls() - before == (sent if workers > 1 else 0)
        for member in members:
            member.close()
    finally:
        code = stop_server(started)
    assert stopped_cleanly(server.name, code, started.process.stderr_tail(40)), started.stderr_tail()
    counts = worker_counts(started)
    assert len(counts) == 3 and all(record["final"] for record in counts), counts
    published = sum(record["published"] for record in counts)
    assert published == (sent if workers > 1 else 0)
    assert sum(record["publish_deliveries"] for record in counts) == workers * published
    assert sum(record["delivered_from_broker"] for record in counts) + sum(
        record["relayed_local"] for record in counts) == 2 * sent
    assert sum(1 for record in counts if record["joined_per_room"].get("/three")) == workers
    assert processes.group_members(started.pid) == [] and processes.group_members(started.broker.pid) == []


def next_notice_for(presence, room: bytes, timeout: float):
    """The next notice on the presence channel about `room`, or None after `timeout` s. Notices about other rooms
    are passed over: the readiness probe's room, joined and left before the test subscribed, may still have its
    leave notice on the way (one CI run read it in place of the join notice)."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        notice = presence.get_message(timeout=left)
        if notice is not None and notice["data"].split(b":", 3)[-1] == room:  # kind:worker:nonce:room
            return notice
    return None


@needs_broker
@pytest.mark.parametrize("server", WORKER_SERVERS, ids=lambda s: s.name)
def test_a_members_handshake_waits_until_the_workers_with_members_in_its_room_acknowledge_it(server, tmp_path):
    """The test plays a worker with members in a room (its id, 999999, in the room's set): a client's handshake to
    that room is not answered while the test, which read the joiner's notice on the presence channel, holds back
    its acknowledgement; once acknowledged on the joiner's channel, it is answered. The new member's message is then
    published once (the joiner knows of the test's worker), reaching the one subscriber there is (the joiner's
    worker), and its close is said on the presence channel and leaves the test's id alone in the set."""
    started = launch_server(server, SETTINGS, ROOT, tmp_path, {0})
    opened: list = []
    try:
        probe.wait_until_ready(started.base_url, started.process, SETTINGS.ready_timeout_s)
        assert wait_for_workers(started, SETTINGS.ready_timeout_s) is None, started.stderr_tail()
        client = broker_client(started)
        presence = client.pubsub()
        presence.subscribe(contract.BROKER_PRESENCE_CHANNEL)
        confirmed = presence.get_message(timeout=5)  # Redis has taken the SUBSCRIBE: what is said after it reaches us
        assert confirmed is not None and confirmed["type"] == "subscribe", confirmed
        presence.ignore_subscribe_messages = True
        assert next_notice_for(presence, b"/acknowledged", timeout=0.1) is None  # nothing said about the room yet
        key = contract.BROKER_WORKERS_KEY_PREFIX + "/acknowledged"
        client.sadd(key, b"999999")
        connecting = threading.Thread(target=lambda: opened.append(connect(f"{started.base_url}/acknowledged")))
        connecting.start()
        notice = next_notice_for(presence, b"/acknowledged", timeout=5)
        assert notice is not None, "no join notice"
        kind, joiner, nonce, room = notice["data"].split(b":", 3)
        assert (kind, room) == (b"j", b"/acknowledged") and int(joiner) in {r["pid"] for r in worker_counts(started)}
        connecting.join(0.5)
        assert connecting.is_alive() and not opened, "the handshake was answered before the acknowledgement"
        client.publish(contract.BROKER_WORKER_CHANNEL_PREFIX + joiner.decode(), b"999999:" + nonce + b":" + room)
        connecting.join(5)
        assert opened, "the handshake was not answered after the acknowledgement"
        assert client.smembers(key) == {b"999999", joiner}
        before = started.broker.publish_calls()
        opened[0].send("to the other worker")
        deadline = time.monotonic() + 5
        while started.broker.publish_calls() == before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert started.broker.publish_calls() - before == 1
        opened[0].close()
        notice = next_notice_for(presence, b"/acknowledged", timeout=5)
        assert notice is not None and notice["data"] == b"l:" + joiner + b"::/acknowledged"
        assert wait_for_broker_rooms(client, [key.encode()], []) == ([key.encode()], [])
        assert client.smembers(key) == {b"999999"}
        presence.close()
        client.close()
    finally:
        for member in opened:
            member.close()
        code = stop_server(started)
    assert stopped_cleanly(server.name, code, started.process.stderr_tail(40)), started.stderr_tail()
    counts = {record["pid"]: record for record in worker_counts(started)}
    joined = counts[int(joiner)]
    assert (joined["published"], joined["publish_deliveries"], joined["ack_timeouts"]) == (1, 1, 0), joined


@needs_broker
def test_a_run_over_workers_records_the_broker_and_leaves_nothing(tmp_path):
    """run --workers 1,2 with 4 pairs over 2 client processes: both points measured, one file each; at N = 2 every
    attempt records the broker's version, its PUBLISH calls (2 per roundtrip of a split pair, none of a local
    pair's: local_pair_publishes 0) and CPU per message, the subscribers each PUBLISH reached (the split pairs' two
    workers), and the workers' counts, and each of the 4 pairs its roundtrips and its placement (one worker or two;
    at N = 1 all on one); at N = 1 no broker. No redis-server or worker is left.

    Where each connection lands is the kernel's draw (or Node.js cluster's), which the run does not choose: all 4
    pairs may sit on one worker each. So the workers' counts are held to the placement the attempt recorded: every
    message of a split pair is delivered from the broker, every message of a local pair within its worker (over the
    server's life, warmup and checks included: at least the window's). That a split pair's messages do cross the
    broker is checked on a pair made split on purpose, above
    (test_a_room_whose_members_sit_on_two_workers_relays_every_message_through_redis)."""
    completed = run_bench("--servers", "node-ws-cluster,aiohttp-workers,sanic", "--clients", "websockets",
                          "--workers", "1,2", "--pairs", "4", "--client-processes", "2", "--repeat", "1",
                          "--duration", "0.4", "--warmup", "0.2", "--no-figures", "--jit-warmup", "0",
                          *QUICK_RELAY_CHECK,
                          "--results-dir", str(tmp_path))
    assert completed.returncode == 0, completed.stderr
    files = {path.name.split("Z-")[1]: path for path in tmp_path.glob("*Z-*.json")}
    assert {"workers1.json", "workers2.json", "sweep.json"} <= set(files)
    for workers in (1, 2):
        run = json.loads(files[f"workers{workers}.json"].read_text())
        assert run["configuration"]["workers"] == workers
        cells = {c["server"]: c for c in run["cells"]}
        if workers == 2:
            assert cells["sanic"]["skipped"] == ("server sanic uses one CPU only: it declares neither workers nor "
                                                 "threads (its manifest entry)")
        for name in ("node-ws-cluster", "aiohttp-workers"):
            attempt = cells[name]["attempts"][0]
            assert attempt["status"] == "ok", attempt["reason"]
            record = attempt["workers"]
            assert record["count"] == record["reported"] == workers
            pairs = record["pairs"]
            assert len(pairs) == 4 and sum(pair["roundtrips"] for pair in pairs) == attempt["roundtrips"], pairs
            assert all(pair["members"] == 2 and pair["workers"] == (1 if pair["placement"] == "local" else 2)
                       for pair in pairs), pairs
            assert {pair["placement"] for pair in pairs} <= ({"local"} if workers == 1 else {"local", "split"})
            if workers == 1:
                assert record["broker"] is None and record["delivered_from_broker"] == 0
                assert record["relayed_local"] >= 2 * attempt["roundtrips"]
                continue
            window = record["broker"]["window"]
            assert record["broker"]["version"] == broker.redis_version()
            split = sum(pair["roundtrips"] for pair in pairs if pair["placement"] == "split")
            local = sum(pair["roundtrips"] for pair in pairs if pair["placement"] == "local")
            # only a split pair's messages are published: 2 per roundtrip of theirs, none of a local pair's
            expected = 2 * split / (split + local)
            assert expected - 0.1 <= window["publishes_per_roundtrip"] <= expected + 0.1, (window, pairs)
            assert record["local_pair_publishes"] == 0, pairs
            assert all(pair["publishes"] >= 2 * pair["roundtrips"] for pair in pairs if pair["placement"] == "split")
            if split:
                assert window["cpu_us_per_publish"] > 0
                assert 1.99 <= record["deliveries_per_publish"] <= 2.0, record  # the pair's two workers
            assert record["delivered_from_broker"] >= 2 * split and record["relayed_local"] >= 2 * local, record
            assert processes.group_members(record["broker"]["pid"]) == []
            assert all(not psutil.pid_exists(w["pid"]) for w in record["per_worker"])


def start_run_in_background(tmp_path: Path) -> subprocess.Popen:
    with open(tmp_path / "run_bench.stderr", "w") as stderr:
        return subprocess.Popen([sys.executable, str(ROOT / "run_bench.py"), "--servers", "sanic-workers",
                                 "--clients", "websockets", "--workers", "2", "--repeat", "6", "--duration", "2",
                                 "--warmup", "0.2", "--results-dir", str(tmp_path / "results")], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=sigint_at_default)


def wait_for_broker_and_workers(process: subprocess.Popen) -> list[int]:
    """The pids of the run's redis-server, server and its workers and client, once all of them run."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        tree = []
        for child in psutil.Process(process.pid).children(recursive=True):
            try:
                tree.append((child.pid, " ".join(child.cmdline())))
            except psutil.Error:
                continue
        lines = [line for _, line in tree]
        workers = [line for line in lines if "multiprocessing.spawn" in line]  # Sanic's, started by its manager
        if all(any(name in line for line in lines) for name in ("redis-server", "sanic_workers_server",
                                                                "websockets_client")) and len(workers) >= 2:
            return [pid for pid, line in tree if "pingpong.harness.system.guardian" not in line]
        time.sleep(0.05)
    raise AssertionError(f"no broker, workers and client within 120 s: {(process.poll(), tree)}")


def assert_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in pids if psutil.pid_exists(pid)
                 and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.05)
    assert not alive, f"processes still running: {alive}"


@needs_broker
@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_ctrl_c_or_kill_9_of_the_orchestrator_leaves_no_redis_server_or_worker(tmp_path, how):
    """Mid-run, with the broker, the server's manager and both its workers and a client running: a SIGINT ends the
    run (exit 130) after stopping them all; a SIGKILL reaches no handler, and the guardian ends their groups."""
    process = start_run_in_background(tmp_path)
    try:
        pids = wait_for_broker_and_workers(process)
        process.send_signal(getattr(signal, how))
        code = process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert code == (130 if how == "SIGINT" else -signal.SIGKILL), (tmp_path / "run_bench.stderr").read_text()
    assert_gone(pids)


@needs_broker
def test_a_run_without_redis_server_on_its_path_skips_the_cells_above_one_worker(tmp_path):
    """PATH without redis-server: the N = 2 cell is skipped with the reason in the results, the N = 1 cell runs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "node").symlink_to("/usr/bin/node")
    environment = {**os.environ, "PATH": f"{bin_dir}:{Path(sys.executable).parent}"}
    completed = run_bench("--servers", "aiohttp-workers", "--clients", "websockets", "--workers", "1,2",
                          "--repeat", "1", "--duration", "0.3", "--warmup", "0.1", "--no-figures", *QUICK_RELAY_CHECK,
                          "--results-dir", str(tmp_path / "results"), env=environment)
    assert completed.returncode == 0, completed.stderr
    runs = {path.name.split("Z-")[1]: json.loads(path.read_text())
            for path in (tmp_path / "results").glob("*Z-workers*.json")}
    assert runs["workers1.json"]["cells"][0]["attempts"][0]["status"] == "ok"
    assert runs["workers2.json"]["cells"][0]["skipped"] == ("--workers 2 needs a Redis broker: redis-server not found "
                                                            "on PATH (apt-get install redis-server)")


def test_the_brokers_window_cpu_leaves_its_readings_out_unless_their_wall_time_exceeds_it():
    """INFO's usec is wall time: a reading preempted midway can count more than the broker's CPU; then the window's
    CPU keeps the readings in (an upper bound) and says so, never a negative figure."""
    before = broker.BrokerSample(publish_calls=10, cpu_ns=1_000_000, info_us=100)
    usual = broker.window_figures(before, broker.BrokerSample(110, 3_000_000, 600))
    assert usual == {"publishes": 100, "cpu_s": 0.0015, "cpu_us_per_publish": 15.0, "cpu_includes_readings": False}
    loaded = broker.window_figures(before, broker.BrokerSample(110, 3_000_000, 5_000))
    assert loaded == {"publishes": 100, "cpu_s": 0.002, "cpu_us_per_publish": 20.0, "cpu_includes_readings": True}
