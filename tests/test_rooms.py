"""Room semantics of every server: relayed to the others in the room, never to the sender, never across rooms.

The tests of one server share it (conftest's shared_servers), each in rooms of its own: they test rooms, not the
server's lifecycle.
"""

import time

import pytest
from websockets.sync.client import connect

from pingpong.harness.settings.cell import CellSettings
from pingpong.kit.raw_tcp import BlockingConnection
from tests.conftest import QUICK_RELAY_SILENCE_S, RAW_TCP_SERVERS, WEBSOCKET_SERVERS

QUIET_S = 0.3
SERVER_SETTINGS = CellSettings(duration_s=1, warmup_s=0, loop="auto", compression="default", payload_size=4,
                               payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=False,
                               relay_silence_s=QUICK_RELAY_SILENCE_S)  # these tests watch rooms for strays themselves


def base_url(shared_servers, server) -> str:
    started = shared_servers.get(server, SERVER_SETTINGS)
    assert started.problem is None, started.problem
    return started.base_url


def receive_or_none(connection, timeout=QUIET_S):
    try:
        return connection.recv(timeout=timeout)
    except TimeoutError:
        return None


def quiet(*connections) -> list:
    """What each connection received within one QUIET_S shared by all of them (None: nothing), not one after another."""
    time.sleep(QUIET_S)  # a silence is waited for: nothing arrives to probe
    return [receive_or_none(connection, timeout=0) for connection in connections]


@pytest.mark.parametrize("server", WEBSOCKET_SERVERS, ids=lambda s: s.name)
def test_rooms_isolate_and_relay_to_all_others(server, shared_servers):
    """A message reaches both other members of its room with the same type and bytes, and nobody else."""
    base = base_url(shared_servers, server)
    with connect(f"{base}/room-one") as a, connect(f"{base}/room-one") as b, \
            connect(f"{base}/room-one?x=1") as c, connect(f"{base}/room-two") as d, connect(base) as e:
        a.send("from A \u00e9")
        assert b.recv(timeout=3) == "from A \u00e9"
        assert c.recv(timeout=3) == "from A \u00e9"
        payload = bytes(range(256))
        b.send(payload)
        assert a.recv(timeout=3) == payload
        assert c.recv(timeout=3) == payload
        stray_a, stray_b, stray_d, stray_e = quiet(a, b, d, e)
        assert stray_a is None, "sender A received something it should not"
        assert stray_b is None, "sender B received its own message"
        assert stray_d is None, "a connection in another room received a message"
        assert stray_e is None, "a connection in the default room received a message"
        e.send("default room")
        assert receive_or_none(a) is None


@pytest.mark.parametrize("server", WEBSOCKET_SERVERS, ids=lambda s: s.name)
def test_departed_member_does_not_break_the_room(server, shared_servers):
    """After one member leaves, the remaining members keep relaying to each other."""
    base = base_url(shared_servers, server)
    with connect(f"{base}/r") as a, connect(f"{base}/r") as b:
        with connect(f"{base}/r") as c:
            a.send("before")
            assert c.recv(timeout=3) == "before"
            assert b.recv(timeout=3) == "before"
        a.send("after")
        assert b.recv(timeout=3) == "after"


@pytest.mark.parametrize("server", RAW_TCP_SERVERS, ids=lambda s: s.name)
def test_raw_tcp_floor_rooms(server, shared_servers):
    """The raw-TCP floors relay frames byte-exact to the others in the room, never to the sender or other rooms."""
    base = base_url(shared_servers, server)
    host, port = base.removeprefix("tcp://").rsplit(":", 1)
    with BlockingConnection(host, int(port), "/one") as a, BlockingConnection(host, int(port), "/one") as b, \
            BlockingConnection(host, int(port), "/one") as c, BlockingConnection(host, int(port), "/two") as d:
        payload = bytes(range(256)) * 300  # 76,800 bytes: several reads on the way
        a.send(payload)
        assert b.recv(5) == payload and c.recv(5) == payload
        b.send(b"")
        assert a.recv(3) == b"" and c.recv(3) == b""
        time.sleep(QUIET_S)  # one silence for the three, as quiet() waits it
        assert a.recv(0.01) is None and b.recv(0.01) is None and d.recv(0.01) is None


@pytest.mark.parametrize("server", RAW_TCP_SERVERS, ids=lambda s: s.name)
def test_raw_tcp_floor_refuses_websocket_peers(server, shared_servers):
    """A WebSocket handshake against a raw-TCP floor fails cleanly, and the floor keeps serving."""
    base = base_url(shared_servers, server)
    host, port = base.removeprefix("tcp://").rsplit(":", 1)
    with pytest.raises(Exception):
        with connect(f"ws://{host}:{port}/x", open_timeout=2):
            pass
    with BlockingConnection(host, int(port), "/after") as a, BlockingConnection(host, int(port), "/after") as b:
        a.send(b"still serving")
        assert b.recv(3) == b"still serving"


def test_relay_check_catches_a_late_leak_into_another_room(tmp_path):
    """A copy that reaches another room 0.2 s after the relay fails verification, naming C and the message."""
    from pingpong.harness.measure import probe
    from pingpong.harness.settings.manifest import resolve_command
    from pingpong.harness.system import processes
    from tests.conftest import ROOT, by_name

    port = processes.free_port()
    server = processes.start("leaky", resolve_command(by_name("server", "leaks-across-rooms"), ROOT) + [
        "--port", str(port)], ROOT, tmp_path)
    try:
        probe.wait_until_ready(f"ws://127.0.0.1:{port}", server, 20)
        problem = probe.verify_relay(f"ws://127.0.0.1:{port}")
    finally:
        processes.stop(server)
    assert problem is not None and problem.startswith("relay verification: C, in another room received "), problem
