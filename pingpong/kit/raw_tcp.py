"""The raw-TCP floor's wire format, shared by its Python server, client and the orchestrator's probes.

A frame is a 4-byte big-endian payload length followed by the payload. A connection's first frame names its
room (the path, as with WebSocket); the server answers it with an empty frame once the connection is in the room
(so a peer's first message cannot overtake the join); every later frame is relayed verbatim to the other members.
There are no message types: text payloads travel as their UTF-8 bytes.
"""

from __future__ import annotations

import socket
import struct

HEADER = struct.Struct("!I")
MAX_FRAME = 64 * 2**20


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


class FrameParser:
    """Incremental parser: feed bytes, get complete payloads."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        payloads = []
        while len(self.buffer) >= 4:
            (length,) = HEADER.unpack_from(self.buffer)
            if length > MAX_FRAME:
                raise ValueError(f"frame of {length} bytes exceeds the {MAX_FRAME} byte limit")
            if len(self.buffer) < 4 + length:
                break
            payloads.append(bytes(self.buffer[4:4 + length]))
            del self.buffer[:4 + length]
        return payloads


class BlockingConnection:
    """A blocking raw-TCP member of a room, for probes and tests."""

    def __init__(self, host: str, port: int, room: str, timeout: float = 3.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.parser = FrameParser()
        self.pending: list[bytes] = []
        self.send(room.encode())
        if self.recv(timeout) != b"":
            raise ConnectionError("the server did not acknowledge joining the room")

    def send(self, payload: bytes) -> None:
        self.sock.sendall(frame(payload))

    def recv(self, timeout: float) -> bytes | None:
        """The next payload, or None when nothing arrives within timeout."""
        self.sock.settimeout(timeout)
        while not self.pending:
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, TimeoutError):
                return None
            if not data:
                raise ConnectionError("connection closed by the server")
            self.pending += self.parser.feed(data)
        return self.pending.pop(0)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "BlockingConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
