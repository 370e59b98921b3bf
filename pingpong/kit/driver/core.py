"""The core of the Python client drivers' measurement (pingpong.kit.driver): what every workload shares.

The CLI contract and its checks, Connection and MessageQueue, the start gate and the window events, progress and
the stall watchdog, opening and closing connections (pairs, rooms, in bulk), the report's parts (main.py builds
the report and hands the run to one workload module's measure()). node/driver/core.js is this module's twin.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import resource
import signal
import socket
import time
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

from pingpong.contract import (ACK_FD_ENV, ARMED_EVENT, BROADCAST_ROLES, COMPRESSION_MODES, DEFAULT_COMPRESSION,
                               DEFAULT_DURATION_S, DEFAULT_LOOP, DEFAULT_PAIRS, DEFAULT_PAYLOAD_KIND,
                               DEFAULT_PAYLOAD_SIZE, DEFAULT_STALL_TIMEOUT_S, DEFAULT_WARMUP_S, DEFAULT_WORKLOAD,
                               EVENTS_FD_ENV, GO_FD_ENV, GO_LINE, HISTOGRAM_HIGHEST_NS, HISTOGRAM_LOWEST_NS,
                               HISTOGRAM_SIGNIFICANT_DIGITS, LOOPS, PAYLOAD_KINDS, READY_EVENT, START_FD_ENV, WORKLOADS)
from pingpong.kit import allocator
from pingpong.versions import library_versions


class DriverError(Exception):
    """A failure the driver reports in its JSON (payload mismatch, stall, closed connection)."""


@dataclass
class Connection:
    """One open WebSocket connection as the measured loop sees it: two bound coroutines and a closer."""

    send: Callable[[Any], Awaitable[Any]]
    recv: Callable[[], Awaitable[Any]]
    close: Callable[[], Awaitable[Any]]
    details: dict[str, Any] = field(default_factory=dict)


OpenConnection = Callable[[str, argparse.Namespace], Awaitable[Connection]]


class MessageQueue:
    """Bridges a callback API (picows, asyncio Protocols) to the awaitable recv() the measured loop uses.

    deliver() hands a message to a waiting recv() directly, or queues it; fail() wakes a waiter with the error.
    """

    def __init__(self) -> None:
        self.messages: deque = deque()
        self.waiter: asyncio.Future | None = None
        self.error: Exception | None = None

    def deliver(self, message: Any) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            self.waiter = None
            waiter.set_result(message)
        else:
            self.messages.append(message)

    def fail(self, error: Exception) -> None:
        self.error = error
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(error)

    async def recv(self) -> Any:
        if self.messages:
            return self.messages.popleft()
        if self.error:
            raise self.error
        self.waiter = asyncio.get_running_loop().create_future()
        return await self.waiter


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="WebSocket ping-pong client driver (see docs/contract.md).")
    parser.add_argument("--url", required=True, help="ws://HOST:PORT/ROOM; both connections join ROOM")
    parser.add_argument("--duration", type=float, default=DEFAULT_DURATION_S, help="measured seconds (after warmup)")
    parser.add_argument("--warmup", type=float, default=DEFAULT_WARMUP_S, help="seconds of unmeasured ping-pong first")
    parser.add_argument("--loop", choices=LOOPS, default=DEFAULT_LOOP)
    parser.add_argument("--compression", choices=COMPRESSION_MODES, default=DEFAULT_COMPRESSION,
                        help="permessage-deflate: the library's default, forced off, or offered")
    parser.add_argument("--payload-size", type=int, default=DEFAULT_PAYLOAD_SIZE, help="bytes per message")
    parser.add_argument("--payload-kind", choices=PAYLOAD_KINDS, default=DEFAULT_PAYLOAD_KIND)
    parser.add_argument("--workload", choices=WORKLOADS, default=DEFAULT_WORKLOAD,
                        help="pingpong: roundtrips on open connections; handshake: open, one roundtrip, close, "
                             "in a loop")
    parser.add_argument("--tls-ca", help="PEM CA to trust for wss:// (the run's throwaway CA)")
    parser.add_argument("--pairs", type=int, default=DEFAULT_PAIRS,
                        help="independent pairs driven at once, pair i in room ROOM-p<i> (default 1: ROOM itself)")
    parser.add_argument("--stall-timeout", type=float, default=DEFAULT_STALL_TIMEOUT_S,
                        help="fail when no roundtrip completes for this many seconds")
    parser.add_argument("--no-latency", action="store_true",
                        help="do not record per-roundtrip latency (only for measuring the recording's cost)")
    parser.add_argument("--ab-windows", type=int, default=0, metavar="N",
                        help="benchmark of the recording's cost: 2N windows alternating recording on/off")
    parser.add_argument("--receivers", type=int, default=1, metavar="N",
                        help="broadcast: receiver connections this process opens")
    parser.add_argument("--broadcast-role", choices=BROADCAST_ROLES, default="sender",
                        help="broadcast: this process holds the sender connection (and receivers), or receivers only")
    parser.add_argument("--ack-processes", type=int, default=0, metavar="K",
                        help=f"broadcast sender: K receivers processes acknowledge every message on {ACK_FD_ENV}")
    parser.add_argument("--idle-connections", type=int, default=0, metavar="N",
                        help="pingpong: first open N connections to ROOM-idle and hold them, never sending")
    parser.add_argument("--rate", type=float, metavar="R",
                        help="pingpong open loop: R pings/s per pair on a fixed schedule, not waiting for replies")
    args = parser.parse_args(argv)
    args.malloc = allocator.settle()
    if args.duration <= 0 or args.warmup < 0 or args.payload_size < 1 or args.stall_timeout <= 0 or args.pairs < 0:
        parser.error("--duration and --stall-timeout must be > 0, --warmup >= 0, --payload-size and --pairs >= 1")
    if args.pairs == 0 and (args.idle_connections < 1 or args.workload != "pingpong" or args.rate is not None
                            or args.ab_windows):
        parser.error("--pairs 0 holds idle connections only: it needs --idle-connections, and no --workload other "
                     "than pingpong, --rate or --ab-windows")
    if args.pairs > 1 and args.ab_windows:
        parser.error("--ab-windows measures one pair; it cannot be combined with --pairs")
    if args.workload == "handshake" and (args.pairs > 1 or args.ab_windows):
        parser.error("--workload handshake runs one connection at a time; no --pairs or --ab-windows")
    problem = workload_flags_problem(args)
    if problem:
        parser.error(problem)
    return args


def workload_flags_problem(args: argparse.Namespace) -> str | None:
    """Why the broadcast, idle-connection and open-loop flags do not fit together, or None.

    Refused rather than ignored: a run asking for a combination no driver measures must not quietly measure
    something else under its name.
    """
    if args.receivers < 1 or args.ack_processes < 0 or args.idle_connections < 0:
        return "--receivers must be >= 1, --ack-processes and --idle-connections >= 0"
    if args.rate is not None and not (args.rate > 0 and math.isfinite(args.rate)):
        return "--rate must be a finite number of pings per second > 0"
    if args.workload == "broadcast":
        if args.pairs > 1 or args.rate is not None or args.idle_connections or args.ab_windows:
            return "--workload broadcast drives one sender: no --pairs, --rate, --idle-connections or --ab-windows"
        if args.broadcast_role == "receivers" and args.ack_processes:
            return "--ack-processes is for the broadcast sender; a receivers process writes acks, it reads none"
        return None
    if args.receivers != 1 or args.broadcast_role != "sender" or args.ack_processes:
        return "--receivers, --broadcast-role and --ack-processes are for --workload broadcast only"
    if args.rate is not None and (args.workload == "handshake" or args.ab_windows):
        return "--rate paces the pingpong workload: not with --workload handshake or --ab-windows"
    if args.idle_connections and args.workload == "handshake":
        return "--idle-connections sits beside ping-pong pairs: not with --workload handshake"
    return None


def raise_nofile_limit() -> tuple[int, int]:
    """Raise the soft limit on open files to the hard one; returns (soft, hard) as they are afterwards.

    Thousands of idle or receiver connections need a descriptor each, and the usual soft limit (1024) is far below
    what the hard limit allows an unprivileged process.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):  # a hard limit of "unlimited" can exceed the kernel's nr_open
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft, hard


def client_ssl_context(args: argparse.Namespace):
    """The client's TLS context trusting --tls-ca, or None (plain ws://)."""
    if not args.tls_ca:
        return None
    from pingpong.kit.tls import client_context

    return client_context(args.tls_ca)


def run_on_loop(loop: str, coroutine_function: Callable[[], Awaitable[Any]]) -> Any:
    """Run on the requested event loop. 'auto' is what a plain asyncio program gets: the default loop."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coroutine_function())
    return asyncio.run(coroutine_function())


def running_loop_name() -> str:
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.startswith("uvloop") else "asyncio"


def socket_details(sock: socket.socket | None) -> dict[str, Any]:
    """What the kernel says about a connected socket: family, addresses, and TCP_NODELAY read back."""
    if sock is None:
        return {"tcp_nodelay": None, "family": None}
    family = {socket.AF_INET: "ipv4", socket.AF_INET6: "ipv6"}.get(sock.family, str(sock.family))
    return {
        "family": family,
        "local_address": _format_address(sock.getsockname()),
        "peer_address": _format_address(sock.getpeername()),
        "tcp_nodelay": bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)),
    }


def _format_address(address: Any) -> str:
    return f"[{address[0]}]:{address[1]}" if ":" in str(address[0]) else f"{address[0]}:{address[1]}"


class WindowEvents:
    """Tells the orchestrator (through an inherited pipe, if any) when the connections are open and when the
    measured window opens and closes, so it can sample both sides' CPU time at those instants; and waits at its
    start barrier, if it set one. Without the pipes this does nothing."""

    def __init__(self) -> None:
        fd = os.environ.get(EVENTS_FD_ENV)
        self.fd = int(fd) if fd else None

    def emit(self, name: str) -> None:
        if self.fd is not None:
            os.write(self.fd, f"{name}\n".encode())

    def ready_then_wait_for_go(self) -> None:
        """Say every connection is open; with a start barrier (GO_FD_ENV), block until the orchestrator says go.

        The whole process blocks, event loop included: nothing is sent before the go, and the clients started
        together all begin their warmup at the moment it comes.
        """
        self.emit(READY_EVENT)
        go_fd = os.environ.get(GO_FD_ENV)
        if not go_fd:
            return
        if not read_go_line(int(go_fd)):
            raise DriverError("start barrier: the orchestrator closed it without a go (another client process "
                              "failed or did not get ready)")


    def armed_then_wait_for_start(self) -> bool:
        """Started ahead of its turn (START_FD_ENV): say it is loaded, then block, before any connection, until the
        orchestrator says go. False when the gate closes without a go (the process is not needed)."""
        start_fd = os.environ.get(START_FD_ENV)
        if not start_fd:
            return True
        self.emit(ARMED_EVENT)
        return read_go_line(int(start_fd))


def read_go_line(fd: int) -> bool:
    """Block until a line arrives on fd, close it; True when the line is GO_LINE (False at end of file)."""
    received = b""
    while not received.endswith(b"\n"):
        chunk = os.read(fd, 64)
        if not chunk:
            break
        received += chunk
    os.close(fd)
    return received.strip() == GO_LINE.encode()


class Continues:
    """The SIGCONTs this process has received since count_continues(): each is the end of a pause, the measured cell
    kept off its CPU for a slice of the host sentinel (which takes the CPU, or stops the cell with SIGSTOP). A measured
    loop reads count once per roundtrip, to leave the latencies a pause touched out of its histogram."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


CONTINUES = Continues()


def count_continues() -> None:
    """Count every SIGCONT into CONTINUES from now on (call it in the main thread, before the measured window).

    CPython runs the handler in the main thread between two bytecodes, on the asyncio and the uvloop loop alike; a
    late run only moves the count to the next roundtrip, which the ping-pong window allows for.
    """
    def continued(signum: int, frame: Any) -> None:
        CONTINUES.count += 1

    signal.signal(signal.SIGCONT, continued)


class Progress:
    """Read by the stall watchdog; written once per roundtrip during warmup and via len() in the window.

    connected counts the connections opened in bulk (idle ones, broadcast receivers): opening thousands takes a
    while, and a new one is progress too.
    """

    def __init__(self) -> None:
        self.phase = "connecting"
        self.warmup_roundtrips = 0
        self.window: array = array("q")
        self.window_roundtrips = 0
        self.connected = 0
        self.connecting_target = 0


class Opened:
    """What a measurement opened, for watched to close: connections (in opening order) and helper tasks.

    bulk holds the connections opened by the thousand (idle ones, broadcast receivers): they are closed all at
    once within BULK_CLOSE_S, where one by one with two seconds each could take minutes.
    """

    def __init__(self) -> None:
        self.connections: list[Connection] = []
        self.tasks: list[asyncio.Task] = []
        self.bulk: list[Connection] = []

    def connection(self, connection: Connection) -> Connection:
        self.connections.append(connection)
        return connection

    def task(self, task: asyncio.Task) -> asyncio.Task:
        self.tasks.append(task)
        return task


@contextlib.asynccontextmanager
async def watched(progress: Progress, stall_timeout: float) -> AsyncIterator[Opened]:
    """Run a measurement under the stall watchdog, and close what it opened however it ends.

    A stall cancels the measuring task and surfaces here as a DriverError saying so. On the way out the watchdog
    and the helper tasks are cancelled and every connection gets two seconds to close (best effort).
    """
    opened = Opened()
    watchdog = asyncio.create_task(_stall_watchdog(progress, stall_timeout, asyncio.current_task()))
    try:
        yield opened
    except asyncio.CancelledError:
        if getattr(watchdog, "stalled", None):
            raise DriverError(watchdog.stalled) from None
        raise
    finally:
        watchdog.cancel()
        for task in opened.tasks:
            task.cancel()
        for connection in opened.connections:
            try:
                await asyncio.wait_for(connection.close(), 2)
            except Exception:
                pass
        await close_together(opened.bulk, BULK_CLOSE_S)


BULK_CLOSE_S = 3.0  # the bound on closing all bulk connections together; process exit closes what is left


async def close_together(connections: list[Connection], bound_s: float) -> None:
    """Close many connections concurrently, best effort, giving up on those still closing after bound_s."""
    if not connections:
        return
    closing = [asyncio.ensure_future(connection.close()) for connection in connections]
    done, pending = await asyncio.wait(closing, timeout=bound_s)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=1.0)
    for task in closing:  # retrieve every outcome, so none is logged as "never retrieved"
        if task.done() and not task.cancelled():
            task.exception()


async def _stall_watchdog(progress: Progress, stall_timeout: float, task: asyncio.Task) -> None:
    """Cancel the measurement when no roundtrip completes for stall_timeout seconds."""
    last = None
    last_change = time.monotonic()
    while True:
        await asyncio.sleep(min(1.0, stall_timeout / 4))
        now_state = (progress.phase, progress.warmup_roundtrips, len(progress.window), progress.window_roundtrips,
                     progress.connected)
        if now_state != last:
            last, last_change = now_state, time.monotonic()
        elif time.monotonic() - last_change >= stall_timeout:
            completed = progress.warmup_roundtrips + max(len(progress.window), progress.window_roundtrips)
            watchdog = asyncio.current_task()
            if progress.phase.endswith("-connecting"):
                watchdog.stalled = (f"stall: no new connection opened for {stall_timeout:g} s (phase {progress.phase}"
                                    f", {progress.connected} of {progress.connecting_target} opened)")
            else:
                watchdog.stalled = (f"stall: no roundtrip completed for {stall_timeout:g} s "
                                    f"(phase {progress.phase}, {completed} roundtrips completed before)")
            task.cancel()
            return


# --- Opening connections: in bulk (idle connections, broadcast receivers), and the ping-pong pairs ---

BULK_HANDSHAKES_IN_FLIGHT = 64  # opening handshakes in flight at once when opening connections in bulk


def room_url(url: str, suffix: str) -> str:
    """The URL of the room named like the URL's own plus suffix, with the same query string (ROOM -> ROOM-idle)."""
    base, _, query = url.partition("?")
    return f"{base}{suffix}" + (f"?{query}" if query else "")


async def open_in_bulk(open_connection: OpenConnection, url: str, args: argparse.Namespace, count: int,
                       into: list[Connection], progress: Progress) -> BaseException | None:
    """Open count connections to url, at most BULK_HANDSHAKES_IN_FLIGHT at once, appending each to into.

    Stops starting new ones at the first failure and returns it (None when all opened): the caller words the
    error, with how many did open. A server or kernel that stops accepting shows as a stall of this phase.
    """
    failures: list[BaseException] = []
    indexes = iter(range(count))
    progress.connecting_target = count

    async def opener() -> None:
        for _ in indexes:  # one iterator shared by every opener: each index is taken once
            if failures:
                return
            try:
                connection = await open_connection(url, args)
            except Exception as exc:
                failures.append(exc)
                return
            into.append(connection)
            progress.connected += 1

    await asyncio.gather(*(opener() for _ in range(min(BULK_HANDSHAKES_IN_FLIGHT, count))))
    return failures[0] if failures else None


async def open_idle_connections(open_connection: OpenConnection, args: argparse.Namespace, opened: Opened,
                                progress: Progress) -> dict[str, Any]:
    """Open --idle-connections connections to ROOM-idle and keep them (in opened.bulk) until the end.

    They sit in a room of their own, so the server relays nothing to them: what they cost the measured pair is
    the server holding them (memory, a larger poll set), not traffic.
    """
    requested = args.idle_connections
    progress.phase = "idle-connecting"
    started = time.monotonic()
    failure = await open_in_bulk(open_connection, room_url(args.url, "-idle"), args, requested, opened.bulk,
                                 progress)
    open_s = time.monotonic() - started
    if failure is not None:
        raise DriverError(f"idle connections: opened {len(opened.bulk)} of {requested}: {one_line(failure)}")
    progress.phase = "connecting"
    return {"requested": requested, "opened": len(opened.bulk), "open_s": open_s,
            "nofile_limit": list(resource.getrlimit(resource.RLIMIT_NOFILE))}


def pair_urls(url: str, pairs: int) -> list[str]:
    """The room URL of each pair: the given room for one pair, ROOM-p0 .. ROOM-p<N-1> for N pairs."""
    if pairs == 1:
        return [url]
    base, _, query = url.partition("?")
    return [f"{base}-p{index}" + (f"?{query}" if query else "") for index in range(pairs)]


async def open_pairs(open_connection: OpenConnection, args: argparse.Namespace, opened: Opened,
                     progress: Progress) -> tuple[list[tuple[Connection, Connection]], dict[str, Any] | None]:
    """The ping-pong workloads' connections (closed and open loop): the idle ones asked for, then every pair's A and
    B, pair i in room ROOM-p<i> with --pairs. Returns the pairs and the idle connections' report (None without)."""
    idle = None
    if args.idle_connections:
        idle = await open_idle_connections(open_connection, args, opened, progress)
    pairs = []
    for url in pair_urls(args.url, args.pairs):
        a = opened.connection(await open_connection(url, args))
        b = opened.connection(await open_connection(url, args))
        pairs.append((a, b))
    return pairs, idle


def pairs_report(result: dict[str, Any], args: argparse.Namespace, opened: Opened,
                 idle: dict[str, Any] | None) -> dict[str, Any]:
    """A ping-pong report (closed or open loop) completed with the idle connections, the loop, the pairs and every
    connection opened (A, B; or A0, B0, A1, B1, ... with --pairs)."""
    if idle is not None:
        result["idle_connections"] = idle
    result["loop"] = running_loop_name()
    result["pairs"] = args.pairs
    result["connections"] = [dict(name=f"{'AB'[index % 2]}{index // 2 if args.pairs > 1 else ''}", **c.details)
                             for index, c in enumerate(opened.connections)]
    return result


def one_line(exc: BaseException) -> str:
    """An exception as one line, "Type: message", for a report's error."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def mismatch(receiver: str, expected: Any, received: Any) -> str:
    return (f"payload mismatch: connection {receiver} expected {_describe(expected)}, "
            f"received {_describe(received)}")


def _describe(payload: Any) -> str:
    if isinstance(payload, str):
        return f"text of {len(payload.encode())} bytes {payload[:24]!r}"
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return f"binary of {len(payload)} bytes {bytes(payload[:24])!r}"
    return repr(payload)[:80]


def encode_histogram(latencies_ns) -> str:
    """Fold the window's raw durations into an HdrHistogram (after the window, so it costs nothing inside it)."""
    from hdrh.histogram import HdrHistogram

    histogram = HdrHistogram(HISTOGRAM_LOWEST_NS, HISTOGRAM_HIGHEST_NS, HISTOGRAM_SIGNIFICANT_DIGITS)
    record = histogram.record_value
    for value in latencies_ns:
        record(min(max(value, HISTOGRAM_LOWEST_NS), HISTOGRAM_HIGHEST_NS))
    return histogram.encode().decode("ascii")
