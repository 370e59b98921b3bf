"""glibc malloc's state in the Python programs, settled before anything is measured (docs/methodology.md).

asyncio's selector transports read with `sock.recv(256 KiB)`. CPython allocates the whole 256 KiB for each read and
shrinks the bytes object to what arrived. glibc serves a request that large with mmap until its *dynamic mmap
threshold* (128 KiB at start) is raised, which happens the first time a mapped block larger than the threshold is
freed whole (mallopt(3), M_MMAP_THRESHOLD). A shrunk read buffer never is, so until something else frees one, every
read costs mmap + mremap + munmap and two page faults. Whether something does (a read that found nothing, whose
buffer is freed whole; a large temporary object) depends on the timing of the process's first moments, so fresh
processes of the same program fell into a fast or a slow mode, 1.6-1.8x apart in CPU per roundtrip, for their
whole life.

"settled" makes the event that raises the threshold happen once, on purpose, at start: one non-blocking read of
asyncio's size on an empty socket, whose buffer is freed whole. A process reaches it by itself only if one of its
reads finds nothing or it frees a large block whole, which a steady ping-pong does not do: measured, plain scripts
kept the slow mode for a whole minute (docs/methodology.md). "as-is" leaves the allocator as the process finds it.
"""

from __future__ import annotations

import os
import socket
import sys

from pingpong.contract import DEFAULT_MALLOC, MALLOC_ENV, MALLOC_MODES

FALLBACK_READ_SIZE = 256 * 1024  # asyncio's selector transports' max_size since Python 3.4


def asyncio_read_size() -> int:
    """The bytes asyncio's selector transports ask recv() for on every read."""
    try:
        from asyncio.selector_events import _SelectorTransport
    except ImportError:  # not CPython's asyncio
        return FALLBACK_READ_SIZE
    return int(getattr(_SelectorTransport, "max_size", FALLBACK_READ_SIZE))


def empty_read(size: int) -> None:
    """One non-blocking recv(size) on a socket with nothing to read: CPython frees its size-byte buffer whole."""
    reader, writer = socket.socketpair()
    with reader, writer:
        reader.setblocking(False)
        try:
            reader.recv(size)
        except BlockingIOError:
            pass


def settle(environ=os.environ) -> str:
    """Apply the mode PINGPONG_MALLOC asks for (default settled) and return it, for the program's report."""
    mode = environ.get(MALLOC_ENV) or DEFAULT_MALLOC
    if mode not in MALLOC_MODES:
        sys.exit(f"{MALLOC_ENV}={mode!r}: expected one of {', '.join(MALLOC_MODES)}")
    if mode == "settled":
        empty_read(asyncio_read_size())
    return mode
