"""Readiness probing and relay verification of a server, with real WebSocket connections.

The WebSocket connections are websockets' asyncio client, each driven on a private event loop by one blocking
call at a time: one thread reads and writes the TLS state. The websockets sync client reads in a background thread
while the caller writes; over TLS that put two threads in one OpenSSL connection at once, and a read that woke for a
TLS 1.3 session ticket then blocked in the kernel: handshakes timed out, and closing waited forever on the reader
(benchmarks/tls_stress.py measures it).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import ExitStack

from websockets.asyncio.client import connect

from pingpong.harness.settings.cell import DEFAULT_RELAY_SILENCE_S
from pingpong.harness.system.processes import ManagedProcess
from pingpong.kit.raw_tcp import BlockingConnection
from pingpong.kit.tls import client_context

PROBE_INTERVAL_S = 0.02
VERIFY_TIMEOUT_S = 3.0
# Enough for a connection to read and parse what its socket already holds once the silence window is over (its own
# event loop runs only while it is read; a frame already in the kernel's buffer takes well under a millisecond).
BUFFERED_READ_S = 0.02


class NotReady(Exception):
    """The server never completed a WebSocket handshake (message says why)."""


def open_connection(base_url: str, path: str, timeout_s: float, tls_ca: str | None = None):
    """A blocking connection to a room, by the URL's scheme: ws:// or wss:// (WebSocket), tcp:// (raw TCP).

    tls_ca: the CA a wss:// server's certificate must chain to (the run's throwaway CA).
    """
    if base_url.startswith("tcp://"):
        host, port = base_url[len("tcp://"):].rsplit(":", 1)
        return BlockingRawConnection(host, int(port), path, timeout_s)
    context = client_context(tls_ca) if base_url.startswith("wss://") and tls_ca else None
    return BlockingWebSocket(f"{base_url}{path}", timeout_s, context)


class BlockingWebSocket:
    """A WebSocket connection with blocking send/recv(timeout), on an event loop of its own, in the caller's thread.

    The loop runs only inside a call, so nothing else ever touches the socket or its TLS state.
    """

    def __init__(self, url: str, timeout_s: float, ssl_context=None) -> None:
        self._loop = asyncio.new_event_loop()
        self._timeout_s = timeout_s
        try:
            self._connection = self._loop.run_until_complete(
                connect(url, open_timeout=timeout_s, close_timeout=timeout_s, compression=None, ping_interval=None,
                        ssl=ssl_context))
        except BaseException:
            self._loop.close()
            raise

    def send(self, message) -> None:
        self._loop.run_until_complete(asyncio.wait_for(self._connection.send(message), self._timeout_s))

    def recv(self, timeout: float | None = None):
        """The next message; TimeoutError when none comes within timeout seconds (cancelling recv is safe)."""
        return self._loop.run_until_complete(asyncio.wait_for(self._connection.recv(), timeout))

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self._connection.close())
        finally:
            self._loop.close()

    def __enter__(self) -> "BlockingWebSocket":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class BlockingRawConnection(BlockingConnection):
    """The raw-TCP connection with BlockingWebSocket's send/recv(timeout) shape (bytes only)."""

    def send(self, payload) -> None:
        super().send(payload.encode() if isinstance(payload, str) else payload)

    def recv(self, timeout: float | None = None):
        received = super().recv(VERIFY_TIMEOUT_S if timeout is None else timeout)
        if received is None:
            raise TimeoutError
        return received


def wait_until_ready(base_url: str, process: ManagedProcess, timeout_s: float, tls_ca: str | None = None) -> float:
    """Retry a handshake (WebSocket, or joining a room for raw TCP) until one succeeds; return seconds waited.

    Fails early when the server process exits, and after timeout_s otherwise.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    last_error = "no attempt made"
    while True:
        code = process.popen.poll()
        if code is not None:
            raise NotReady(f"server exited with code {code} before accepting a WebSocket connection")
        try:
            with open_connection(base_url, "/__readiness_probe__", min(2.0, timeout_s), tls_ca):
                return time.monotonic() - started
        except Exception as exc:  # refused, reset, bad handshake: the server is not ready yet
            last_error = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise NotReady(f"no WebSocket handshake within {timeout_s:g} s (last attempt: {last_error})")
        time.sleep(PROBE_INTERVAL_S)


def verify_relay(base_url: str, tls_ca: str | None = None, silence_s: float = DEFAULT_RELAY_SILENCE_S) -> str | None:
    """Check the relay contract on a live server; return None when it holds, else what was wrong.

    Three connections: A and B in one room, C in another. A text message from A must reach B unchanged,
    a binary message from B must reach A unchanged, and neither the sender nor C may receive anything while they
    are watched for silence_s: a copy the server sends later than that is not seen.
    """
    room = f"/verify-{uuid.uuid4().hex[:12]}"
    other_room = f"{room}-other"
    raw = base_url.startswith("tcp://")  # raw TCP has no message types: both messages travel as bytes
    text_message = "verify: text \u00e9\u20ac".encode() if raw else "verify: text \u00e9\u20ac"
    binary_message = bytes(range(256))[::-1]
    try:
        with ExitStack() as stack:
            def open_in(path: str):
                return stack.enter_context(open_connection(base_url, path, VERIFY_TIMEOUT_S, tls_ca))

            a, b, c = open_in(room), open_in(room), open_in(other_room)
            a.send(text_message)
            problem = _expect(b, text_message, "B (same room as the text's sender A)")
            if problem:
                if _receive_or_none(a, silence_s) == text_message:
                    return ("relay verification: the server sent A's message back to A (an echo) "
                            "instead of relaying it to B, the other connection in the room")
                return problem
            b.send(binary_message)
            problem = _expect(a, binary_message, "A (same room as the binary's sender B)")
            if problem:
                return problem
            # One silence window for the three: a stray message sent meanwhile waits in its socket's buffer, so
            # each connection is watched at least silence_s, the later ones a little longer.
            silence_ends = time.monotonic() + silence_s
            for connection, who in ((a, "A, the sender of the text message"),
                                    (b, "B, the sender of the binary message"),
                                    (c, "C, in another room")):
                stray = _receive_or_none(connection, max(BUFFERED_READ_S, silence_ends - time.monotonic()))
                if stray is not None:
                    return f"relay verification: {who} received {_short(stray)}; it must receive nothing"
    except Exception as exc:
        return f"relay verification: {type(exc).__name__}: {exc}"
    return None


def _expect(connection, expected, who: str) -> str | None:
    received = _receive_or_none(connection, VERIFY_TIMEOUT_S)
    if received is None:
        return f"relay verification: {who} received nothing within {VERIFY_TIMEOUT_S:g} s"
    if received == expected:
        return None
    if type(received) is not type(expected):
        kind = {str: "text", bytes: "binary"}
        return (f"relay verification: {who} received a {kind[type(received)]} frame, "
                f"expected {kind[type(expected)]}")
    return f"relay verification: {who} received {_short(received)}, expected {_short(expected)}"


def _receive_or_none(connection, timeout_s: float):
    try:
        return connection.recv(timeout=timeout_s)
    except TimeoutError:
        return None


def _short(message) -> str:
    return repr(message if len(message) <= 32 else message[:32]) + ("…" if len(message) > 32 else "")
