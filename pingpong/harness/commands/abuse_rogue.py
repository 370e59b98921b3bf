"""A rogue client's own process: `python -m pingpong.harness.commands.abuse_rogue ABUSE --port P [--flood S]`.

The abuses of `run_bench.py abuse` (abuse.py), each bounded in time and bytes and only ever aimed at 127.0.0.1.
Standard library only, so that a rogue starts at once: it runs during a phase that counts a pair's roundtrips.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import struct
import sys
import time

FLOOD_S = 2.0
FLOOD_MAX_BYTES = 64 * 2**20
FLOOD_FRAME_BYTES = 64 * 1024


def handshake(port: int, path: str) -> socket.socket:
    """A raw TCP connection that has completed a WebSocket opening handshake (no library in the way)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    response = b""
    while b"\r\n\r\n" not in response:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("connection closed during the handshake")
        response += chunk
    if not response.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(f"handshake refused: {response.splitlines()[0]!r}")
    return sock


def frame_header(opcode: int, length: int, masked: bool = True, fin: bool = True) -> bytes:
    first = (0x80 if fin else 0) | opcode
    mask_bit = 0x80 if masked else 0
    if length < 126:
        header = struct.pack("!BB", first, mask_bit | length)
    elif length < 2**16:
        header = struct.pack("!BBH", first, mask_bit | 126, length)
    else:
        header = struct.pack("!BBQ", first, mask_bit | 127, length)
    return header + (b"\x00\x00\x00\x00" if masked else b"")  # a zero mask leaves the payload as is


def _close_abruptly(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, no FIN
    sock.close()


def abuse_disconnect_mid_frame(port: int) -> None:
    sock = handshake(port, "/rogue")
    sock.sendall(frame_header(0x1, 1000) + b"x" * 10)
    _close_abruptly(sock)


def abuse_bad_opcode(port: int) -> None:
    with handshake(port, "/rogue") as sock:
        sock.sendall(frame_header(0x3, 4) + b"oops")
        _drain(sock, 1.0)


def abuse_unmasked_frame(port: int) -> None:
    with handshake(port, "/rogue") as sock:
        sock.sendall(frame_header(0x1, 5, masked=False) + b"hello")
        _drain(sock, 1.0)


def abuse_oversized_length(port: int) -> None:
    with handshake(port, "/rogue") as sock:
        sock.sendall(frame_header(0x2, 2**63 - 1) + b"\x00" * 1024)
        _drain(sock, 1.0)


def abuse_flood_without_reading(port: int, seconds: float = FLOOD_S) -> None:
    """Two rogue members of one room; one sends 64 KiB frames as fast as it can for `seconds`, neither ever reads."""
    sender, silent = handshake(port, "/rogue-flood"), handshake(port, "/rogue-flood")
    frame = frame_header(0x2, FLOOD_FRAME_BYTES) + b"\xab" * FLOOD_FRAME_BYTES
    sender.settimeout(0.2)
    sent = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and sent < FLOOD_MAX_BYTES:
            try:
                sent += sender.send(frame)
            except socket.timeout:
                continue  # the server stopped reading from us: keep the pressure on until the deadline
            except OSError:
                break
    finally:
        _close_abruptly(sender)
        _close_abruptly(silent)
    print(f"sent {sent / 2**20:.1f} MiB in {seconds:g} s")


def _drain(sock: socket.socket, seconds: float) -> None:
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass


ABUSES = {
    "disconnect-mid-frame": abuse_disconnect_mid_frame,
    "bad-opcode": abuse_bad_opcode,
    "unmasked-frame": abuse_unmasked_frame,
    "oversized-length": abuse_oversized_length,
    "flood-without-reading": abuse_flood_without_reading,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("abuse", choices=list(ABUSES))
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--flood", type=float, default=FLOOD_S, help="how long the flood sends (the others ignore it)")
    args = parser.parse_args(argv)
    if args.abuse == "flood-without-reading":  # the flood alone has a length
        abuse_flood_without_reading(args.port, args.flood)
    else:
        ABUSES[args.abuse](args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
