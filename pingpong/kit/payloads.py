"""Deterministic ping and pong payloads, identical in every runtime (node/payloads.js mirrors this)."""

from __future__ import annotations

from pingpong.contract import PAYLOAD_KINDS

ASCII_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
# One character of each UTF-8 length (1, 2, 3 and 4 bytes), so text-utf8 exercises every decoder path.
UTF8_CYCLE = ("a", "\u00e9", "\u20ac", "\U0001f600")

PING = 0
PONG = 1


def make_payload(kind: str, size: int, which: int) -> str | bytes:
    """Return the ping (which=0) or pong (which=1) payload: exactly `size` bytes on the wire.

    Text kinds return str (sent as text frames), binary returns bytes. Ping and pong differ from their
    first byte on, so a server that echoes a message back to its sender is caught by the payload check.
    """
    if size < 1:
        raise ValueError(f"payload size must be at least 1 byte, got {size}")
    if which not in (PING, PONG):
        raise ValueError(f"which must be 0 (ping) or 1 (pong), got {which}")
    if kind == "text-ascii":
        n = len(ASCII_ALPHABET)
        return "".join(ASCII_ALPHABET[(i + which) % n] for i in range(size))
    if kind == "text-utf8":
        return _utf8_text(size, which)
    if kind == "binary":
        return bytes((i * 31 + 7 + which * 101) & 0xFF for i in range(size))
    raise ValueError(f"unknown payload kind {kind!r}; expected one of {', '.join(PAYLOAD_KINDS)}")


def _utf8_text(size: int, which: int) -> str:
    """Cycle through 1-4 byte characters; fill the last bytes that cannot hold the next one with ASCII."""
    chars: list[str] = []
    used = 0
    index = which
    while used < size:
        char = UTF8_CYCLE[index % len(UTF8_CYCLE)]
        width = len(char.encode("utf-8"))
        if used + width > size:
            char = ASCII_ALPHABET[(index + which) % len(ASCII_ALPHABET)]
            width = 1
        chars.append(char)
        used += width
        index += 1
    return "".join(chars)


def wire_bytes(payload: str | bytes) -> bytes:
    """The bytes a payload occupies in a frame (UTF-8 for text)."""
    return payload.encode("utf-8") if isinstance(payload, str) else payload
