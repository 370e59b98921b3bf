"""The protocol's own floor (c-ws-floor: RFC 6455 in C with no library) against a peer written here on a plain
socket, so that each check of the handshake, the masking and the framing is seen to be made, on both sides.

Its relay, rooms and payload kinds are tested where every implementation's are (test_matrix_pairs, test_rooms),
its flags in test_contract and test_native_websocket.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import struct
import subprocess
import threading

import pytest

from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import resolve_command
from tests.conftest import QUICK_RELAY_SILENCE_S, ROOT, by_name

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CLOSE, PING, PONG = 1, 2, 8, 9, 10
TIMEOUT_S = 5


def accept_of(key: str) -> str:
    """Sec-WebSocket-Accept of a key, as RFC 6455 4.2.2 computes it."""
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def frame(opcode: int, payload: bytes, masked: bool = True, fin: bool = True) -> bytes:
    """One frame with the fewest length bytes; masked with a random key when masked."""
    length = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    bit = 0x80 if masked else 0
    if length < 126:
        head += bytes([bit | length])
    elif length <= 0xFFFF:
        head += bytes([bit | 126]) + struct.pack("!H", length)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", length)
    if not masked:
        return head + payload
    mask = os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def read_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def read_frame(sock: socket.socket) -> tuple[bool, int, bool, int, bytes]:
    """(fin, opcode, masked, length field (0-125, 126 or 127), payload unmasked)."""
    first, second = read_exact(sock, 2)
    field = second & 127
    length = (field if field < 126 else struct.unpack("!H", read_exact(sock, 2))[0] if field == 126
              else struct.unpack("!Q", read_exact(sock, 8))[0])
    mask = read_exact(sock, 4) if second & 0x80 else None
    payload = read_exact(sock, length)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bool(first & 0x80), first & 15, mask is not None, field, payload


def read_head(sock: socket.socket) -> str:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1)
        if not chunk:
            break
        data += chunk
    return data.decode()


def request(port: int, path: str = "/room", key: str | None = None, **overrides: str | None) -> str:
    key = key or base64.b64encode(os.urandom(16)).decode()
    headers = {"Host": f"127.0.0.1:{port}", "Upgrade": "websocket", "Connection": "keep-alive, Upgrade",
               "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13"}
    headers.update({name.replace("_", "-"): value for name, value in overrides.items()})
    method = headers.pop("method", None) or "GET"
    return f"{method} {path} HTTP/1.1\r\n" + "".join(f"{name}: {value}\r\n" for name, value in headers.items()
                                                     if value is not None) + "\r\n"


def connect(port: int, path: str = "/room", **overrides: str | None) -> tuple[socket.socket, str]:
    """A connection that sent the opening handshake; its response's head."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(request(port, path, **overrides).encode())
    return sock, read_head(sock)


def joined(port: int, path: str = "/room") -> socket.socket:
    key = base64.b64encode(os.urandom(16)).decode()
    sock, head = connect(port, path, key=key)
    assert head.startswith("HTTP/1.1 101 "), head
    assert f"\r\nSec-WebSocket-Accept: {accept_of(key)}\r\n" in head, head
    return sock


@pytest.fixture
def floor_port(shared_servers):
    """The floor's server, started as a run starts it (probed, relay verified), shared by the module."""
    settings = CellSettings(duration_s=0.3, warmup_s=0.1, loop="auto", compression="default", payload_size=4,
                            payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=True,
                            relay_silence_s=QUICK_RELAY_SILENCE_S)
    server = shared_servers.get(by_name("server", "c-ws-floor"), settings)
    assert server.problem is None, server.problem
    return server.port


def test_the_server_answers_a_handshake_with_the_keys_accept_and_no_extension(floor_port):
    """RFC 6455's own example key gets its example accept; an offered permessage-deflate is not taken."""
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    sock, head = connect(floor_port, "/r?x=1", key=key, Sec_WebSocket_Extensions="permessage-deflate")
    with sock:
        assert head.startswith("HTTP/1.1 101 Switching Protocols\r\n")
        assert "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" in head
        assert "Extensions" not in head


@pytest.mark.parametrize("overrides,status", [
    ({"method": "POST"}, "400"),
    ({"Upgrade": None}, "400"),
    ({"Upgrade": "h2c"}, "400"),
    ({"Connection": "keep-alive"}, "400"),
    ({"Host": None}, "400"),
    ({"Sec_WebSocket_Key": None}, "400"),
    ({"Sec_WebSocket_Key": "c2hvcnQ="}, "400"),
    ({"Sec_WebSocket_Version": "8"}, "426"),
], ids=["post", "no-upgrade", "other-upgrade", "no-connection-upgrade", "no-host", "no-key", "short-key",
        "version-8"])
def test_the_server_refuses_a_bad_handshake_and_closes(floor_port, overrides, status):
    """Every required part of the request is checked: a refusal (426 naming version 13) and the connection closed."""
    sock, head = connect(floor_port, **overrides)
    with sock:
        assert head.startswith(f"HTTP/1.1 {status} "), head
        assert status != "426" or "Sec-WebSocket-Version: 13\r\n" in head
        body = sock.recv(1024)
        assert sock.recv(1024) == b"" or body == b""  # then closed


def test_the_server_relays_whole_messages_of_every_length_to_the_room_only(floor_port):
    """Fragments are joined into one unmasked frame of the same type, with 7-, 16- and 64-bit lengths; a ping
    between fragments is answered with its payload; the sender and another room get nothing."""
    a, b, other = joined(floor_port, "/relay"), joined(floor_port, "/relay?q"), joined(floor_port, "/elsewhere")
    with a, b, other:
        a.sendall(frame(TEXT, "é€".encode(), fin=False) + frame(PING, b"hi") + frame(0, b"-x", fin=False)
                  + frame(0, "😀".encode()))
        assert read_frame(a) == (True, PONG, False, 2, b"hi")
        assert read_frame(b) == (True, TEXT, False, len("é€-x😀".encode()), "é€-x😀".encode())
        for size, field in ((125, 125), (126, 126), (65535, 126), (65536, 127), (200_000, 127)):
            payload = os.urandom(size)
            a.sendall(frame(BINARY, payload))
            assert read_frame(b) == (True, BINARY, False, field, payload)
        b.sendall(frame(TEXT, b"back"))
        assert read_frame(a) == (True, TEXT, False, 4, b"back")
        for sock in (a, other):
            sock.settimeout(0.2)
            with pytest.raises(socket.timeout):
                sock.recv(1)


@pytest.mark.parametrize("data,code", [
    (frame(TEXT, b"plain", masked=False), 1002),
    (bytes([0x81 | 0x40, 0x80 | 1]) + b"\0\0\0\0x", 1002),  # RSV1 without an extension
    (frame(3, b"x"), 1002),  # a reserved opcode
    (frame(PING, b"x", fin=False), 1002),
    (frame(PING, b"x" * 126), 1002),
    (bytes([0x82, 0x80 | 126, 0, 5]) + b"\0\0\0\0" + b"x" * 5, 1002),  # a 16-bit length below 126
    (bytes([0x82, 0x80 | 127]) + struct.pack("!Q", 200) + b"\0\0\0\0" + b"x" * 200, 1002),
    (frame(0, b"x"), 1002),  # a continuation with nothing to continue
    (frame(TEXT, b"a", fin=False) + frame(TEXT, b"b"), 1002),
    (frame(TEXT, b"\xff\xfe"), 1007),
    (frame(TEXT, b"\xed\xa0\x80"), 1007),  # a surrogate
    (frame(CLOSE, b"\x03"), 1002),
], ids=["unmasked", "rsv1", "opcode-3", "fragmented-ping", "long-ping", "short-16-bit-length",
        "short-64-bit-length", "lone-continuation", "new-message-inside-one", "invalid-utf8", "utf8-surrogate",
        "one-byte-close"])
def test_the_server_fails_a_connection_on_a_bad_frame_and_relays_none_of_it(floor_port, data, code):
    """A frame RFC 6455 does not allow is answered with a close frame of the code it calls for, then the
    connection is closed; the other member gets nothing."""
    a, b = joined(floor_port, "/bad"), joined(floor_port, "/bad")
    with a, b:
        a.sendall(data)
        fin, opcode, masked, _, payload = read_frame(a)
        assert (fin, opcode, masked, struct.unpack("!H", payload[:2])[0]) == (True, CLOSE, False, code)
        assert a.recv(1) == b""
        b.settimeout(0.2)
        with pytest.raises(socket.timeout):
            b.recv(1)


def test_the_server_answers_a_close_with_its_code_and_closes(floor_port):
    a = joined(floor_port, "/close")
    with a:
        a.sendall(frame(CLOSE, struct.pack("!H", 1000) + b"bye"))
        assert read_frame(a) == (True, CLOSE, False, 2, struct.pack("!H", 1000))
        assert a.recv(1) == b""


class FakeServer:
    """A WebSocket server for the floor's client, one thread per connection: it checks each frame the client
    sends is masked, and answers the handshake (or breaks it) as told."""

    def __init__(self, accept=accept_of, masked_reply=False):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accept, self.masked_reply = accept, masked_reply
        self.members: list[socket.socket] = []
        self.frames: list[tuple[bool, int, bool, int, bytes]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        for _ in range(2):
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            head = read_head(sock)
            key = next(line.split(":", 1)[1].strip() for line in head.split("\r\n")
                       if line.lower().startswith("sec-websocket-key:"))
            with self.lock:  # a member before its reply: the client sends as soon as it has it, and A's relay
                self.members.append(sock)  # would otherwise find no B to forward to (seen under load)
            sock.sendall(f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         f"Sec-WebSocket-Accept: {self.accept(key)}\r\n\r\n".encode())
            threading.Thread(target=self.relay, args=(sock,), daemon=True).start()

    def relay(self, sock):
        try:
            while True:
                received = read_frame(sock)
                with self.lock:
                    self.frames.append(received)
                    others = [m for m in self.members if m is not sock]
                fin, opcode, _, _, payload = received
                if opcode == CLOSE:
                    sock.sendall(frame(CLOSE, payload[:2], masked=False))
                    return
                for other in others:
                    other.sendall(frame(opcode, payload, masked=self.masked_reply))
        except (OSError, EOFError):
            return

    def close(self):
        self.listener.close()
        for sock in self.members:
            sock.close()


def run_floor_client(port: int, *extra: str) -> tuple[int, dict]:
    completed = subprocess.run(resolve_command(by_name("client", "c-ws-floor"), ROOT)
                               + ["--url", f"ws://127.0.0.1:{port}/fake", "--duration", "0.2", "--warmup", "0.05",
                                  "--stall-timeout", "3", *extra], capture_output=True, text=True, timeout=30)
    return completed.returncode, json.loads(completed.stdout)


def test_the_client_masks_every_frame_and_closes_with_1000():
    """Against a server that checks: every frame the client sends is masked, a whole message, the payload's bytes;
    the run ends with a close frame of code 1000 on each connection."""
    server = FakeServer()
    try:
        code, report = run_floor_client(server.port, "--payload-kind", "binary", "--payload-size", "300")
    finally:
        server.close()
    assert code == 0 and report["error"] is None and report["roundtrips"] > 0
    data = [f for f in server.frames if f[1] != CLOSE]
    assert len(data) >= 2 * report["roundtrips"]
    assert all(fin and opcode == BINARY and masked and field == 126 and len(payload) == 300
               for fin, opcode, masked, field, payload in data)
    closes = [f for f in server.frames if f[1] == CLOSE]
    assert len(closes) == 2 and all(f[2] and f[4] == struct.pack("!H", 1000) for f in closes)


@pytest.mark.parametrize("server,problem", [
    (lambda: FakeServer(accept=lambda key: accept_of(key + "x")), "Sec-WebSocket-Accept is not the key's"),
    (lambda: FakeServer(masked_reply=True), "masked frame from a server"),
], ids=["wrong-accept-key", "masked-server-frame"])
def test_the_client_refuses_a_wrong_accept_key_and_a_masked_frame(server, problem):
    """A handshake whose accept is not its key's, or a frame from the server with the mask bit set, fails the run:
    exit 1 and a report naming the problem."""
    fake = server()
    try:
        code, report = run_floor_client(fake.port)
    finally:
        fake.close()
    assert code == 1 and report["errors"] == 1 and problem in report["error"], report["error"]
