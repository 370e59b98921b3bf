"""The ping-pong measurement shared by the Python client drivers (clients/*.py).

A client driver only knows how to open one connection with its library; everything else (the CLI contract,
warmup, the measured window, payload verification, stall detection, the JSON report) lives here, so every
Python client measures exactly the same thing. node/driver.js is the Node.js twin of this module.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import math
import os
import platform
import resource
import socket
import sys
import time
from array import array
from collections import deque
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, AsyncIterator, Awaitable, Callable

from pingpong import contract
from pingpong.contract import (ACK_FD_ENV, ARMED_EVENT, BROADCAST_ROLES, CLIENT_REPORT_FORMAT_VERSION, COMPRESSION_MODES,
                               DEFAULT_COMPRESSION, DEFAULT_DURATION_S, DEFAULT_LOOP, DEFAULT_PAIRS,
                               DEFAULT_PAYLOAD_KIND, DEFAULT_PAYLOAD_SIZE, DEFAULT_STALL_TIMEOUT_S, DEFAULT_WARMUP_S,
                               DEFAULT_WORKLOAD, EVENTS_FD_ENV, GO_FD_ENV, GO_LINE, HISTOGRAM_HIGHEST_NS,
                               HISTOGRAM_LOWEST_NS, HISTOGRAM_SIGNIFICANT_DIGITS, LOOPS, PAYLOAD_KINDS, READY_EVENT,
                               START_FD_ENV, WINDOW_END_EVENT, WINDOW_START_EVENT, WORKLOADS)
from pingpong.kit import allocator
from pingpong.kit.payloads import PING, PONG, make_payload


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


def main(implementation: str, libraries: list[str], open_connection: OpenConnection,
         settings: Callable[[argparse.Namespace], dict[str, Any]],
         shutdown: Callable[[], Awaitable[Any]] | None = None) -> None:
    """Entry point of a Python client driver: run, print one JSON object on stdout, exit 0 or 1.

    shutdown, if given, runs on the loop after the measurement (e.g. to close a shared client session).
    """
    args = parse_args()
    report = {
        "format_version": CLIENT_REPORT_FORMAT_VERSION,
        "role": "client",
        "implementation": implementation,
        "runtime": {"name": platform.python_implementation().lower(), "version": platform.python_version()},
        "libraries": library_versions(libraries + (["uvloop"] if args.loop == "uvloop" else [])),
        "settings": {contract.COMPRESSION_SETTING: args.compression, contract.TLS_SETTING: bool(args.tls_ca),
                     contract.MALLOC_SETTING: args.malloc, **settings(args)},
        "payload": {"kind": args.payload_kind, "size": args.payload_size},
        "workload": args.workload,
        "error": None,
    }
    measurement = {"pingpong": measure, "handshake": measure_handshakes, "broadcast": measure_broadcast}[args.workload]
    if args.idle_connections or args.workload == "broadcast":
        raise_nofile_limit()

    async def run_then_shut_down():
        try:
            return await measurement(open_connection, args)
        finally:
            if shutdown is not None:
                await shutdown()

    importlib.import_module("hdrh.histogram")  # loaded before the gate, not after the window (encode_histogram)

    if not WindowEvents().armed_then_wait_for_start():
        return  # started ahead of its turn, and the orchestrator closed the gate: nothing to measure or report
    try:
        report.update(run_on_loop(args.loop, run_then_shut_down))
    except Exception as exc:  # every failure becomes a reported error, never a count
        report["error"] = f"{type(exc).__name__}: {exc}" if not isinstance(exc, DriverError) else str(exc)
    report["errors"] = 0 if report["error"] is None else 1
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    if report["error"]:
        print(f"{implementation} client: {report['error']}", file=sys.stderr)
    sys.stderr.flush()
    # Its connections are closed and its report is out: exit without the interpreter's finalization, which took
    # 20-35 ms here (the Python clients' exit came that long after their report), a wait the next attempt had too.
    os._exit(1 if report["error"] else 0)


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


def library_versions(names: list[str]) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


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


HOLD_MARGIN_S = 1.0  # a holder keeps its connections this long beyond warmup + duration (through the pair's window)


async def hold_idle_connections(open_connection: OpenConnection, args: argparse.Namespace) -> dict[str, Any]:
    """--pairs 0 --idle-connections N: a holder. It opens the idle connections, says ready, waits for the go,
    holds them through warmup + duration (+ HOLD_MARGIN_S) and reports them with zero roundtrips: the pair measured
    beside it, in another process, then pays nothing in its own process for the connections the server holds."""
    progress = Progress()
    async with _watched(progress, args.stall_timeout) as opened:
        idle = await _open_idle_connections(open_connection, args, opened, progress)
        WindowEvents().ready_then_wait_for_go()
        progress.phase = "holding"
        started = time.monotonic()
        deadline = started + args.warmup + args.duration + HOLD_MARGIN_S
        while time.monotonic() < deadline:  # in steps, each one progress for the stall watchdog
            await asyncio.sleep(min(0.25, deadline - time.monotonic()))
            progress.warmup_roundtrips += 1
    return {"roundtrips": 0, "elapsed_s": time.monotonic() - started, "roundtrips_per_s": 0, "pairs": 0,
            "holder": True, "latency": {"unit": "ns", "recorded": False, "hdr_histogram": None},
            "connections": [], "idle_connections": idle, "loop": running_loop_name()}


async def measure(open_connection: OpenConnection, args: argparse.Namespace) -> dict[str, Any]:
    if args.pairs == 0:
        return await hold_idle_connections(open_connection, args)
    ping = make_payload(args.payload_kind, args.payload_size, PING)
    pong = make_payload(args.payload_kind, args.payload_size, PONG)
    progress = Progress()
    idle = None
    async with _watched(progress, args.stall_timeout) as opened:
        if args.idle_connections:
            idle = await _open_idle_connections(open_connection, args, opened, progress)
        pairs = []
        for url in pair_urls(args.url, args.pairs):
            a = opened.connection(await open_connection(url, args))
            b = opened.connection(await open_connection(url, args))
            pairs.append((a, b))
        WindowEvents().ready_then_wait_for_go()
        if args.rate is not None:
            result = await _open_loop(pairs, ping, pong, args, progress, opened)
        elif len(pairs) == 1:
            result = await _ping_pong(a, b, ping, pong, args, progress)
        else:
            result = await _many_pairs(pairs, ping, pong, args, progress)
    if idle is not None:
        result["idle_connections"] = idle
    result["loop"] = running_loop_name()
    result["pairs"] = args.pairs
    result["connections"] = [dict(name=f"{'AB'[index % 2]}{index // 2 if args.pairs > 1 else ''}", **c.details)
                             for index, c in enumerate(opened.connections)]
    return result


async def measure_handshakes(open_connection: OpenConnection, args: argparse.Namespace) -> dict[str, Any]:
    """The handshake workload: a responder B stays in the room; A opens, sends one ping, gets the pong, closes.

    One "roundtrip" here is that whole cycle: TCP connect, opening handshake, one relayed exchange, closing
    handshake. Its rate is handshakes per second; its latency is the cycle's duration.
    """
    ping = make_payload(args.payload_kind, args.payload_size, PING)
    pong = make_payload(args.payload_kind, args.payload_size, PONG)
    progress = Progress()
    last_details: dict[str, Any] = {}
    clock = time.monotonic_ns
    events = WindowEvents()

    async def answer(responder: Connection) -> None:
        while True:
            received = await responder.recv()
            if received != ping:
                raise DriverError(_mismatch("B", ping, received))
            await responder.send(pong)

    async def cycle() -> None:
        connection = await open_connection(args.url, args)
        try:
            await connection.send(ping)
            received = await connection.recv()
            if received != pong:
                raise DriverError(_mismatch("A", pong, received))
            last_details.update(connection.details)
        finally:
            await connection.close()
        if answering.done():  # the responder failed: report its error, not a hang
            answering.result()

    async with _watched(progress, args.stall_timeout) as opened:
        responder = opened.connection(await open_connection(args.url, args))
        answering = opened.task(asyncio.create_task(answer(responder)))
        events.ready_then_wait_for_go()
        progress.phase = "warmup"
        warmup_start = clock()
        deadline = warmup_start + int(args.warmup * 1e9)
        while clock() < deadline:
            await cycle()
            progress.warmup_roundtrips += 1
        progress.phase = "measure"
        latencies = array("q")
        progress.window = latencies
        events.emit(WINDOW_START_EVENT)
        start = clock()
        deadline = start + int(args.duration * 1e9)
        cycle_start = start
        while True:
            await cycle()
            end = clock()
            latencies.append(end - cycle_start)
            cycle_start = end
            if end >= deadline:
                break
        events.emit(WINDOW_END_EVENT)
        progress.phase = "report"
    elapsed_s = (end - start) / 1e9
    return {
        "warmup": {"roundtrips": progress.warmup_roundtrips, "elapsed_s": (start - warmup_start) / 1e9},
        "roundtrips": len(latencies),
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": len(latencies) / elapsed_s,
        "handshakes": len(latencies),
        "latency": {"unit": "ns", "recorded": True, "hdr_histogram": encode_histogram(latencies)},
        "loop": running_loop_name(),
        "pairs": 1,
        "connections": [dict(name="B (responder)", **responder.details), dict(name="A (last opened)", **last_details)],
    }


class Opened:
    """What a measurement opened, for _watched to close: connections (in opening order) and helper tasks.

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
async def _watched(progress: Progress, stall_timeout: float) -> AsyncIterator[Opened]:
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


def pair_urls(url: str, pairs: int) -> list[str]:
    """The room URL of each pair: the given room for one pair, ROOM-p0 .. ROOM-p<N-1> for N pairs."""
    if pairs == 1:
        return [url]
    base, _, query = url.partition("?")
    return [f"{base}-p{index}" + (f"?{query}" if query else "") for index in range(pairs)]


async def _many_pairs(pairs: list[tuple[Connection, Connection]], ping: Any, pong: Any, args: argparse.Namespace,
                      progress: Progress) -> dict[str, Any]:
    """N pairs at once, each its own ping-pong task: warmup together, then one shared measured window.

    Every pair's roundtrips count and its latencies join one histogram; the rate is the sum over pairs.
    """
    clock = time.monotonic_ns
    events = WindowEvents()
    progress.phase = "warmup"
    warmup_start = clock()
    warmup_deadline = warmup_start + int(args.warmup * 1e9)
    await asyncio.gather(*(_warm_up(a, b, ping, pong, warmup_deadline, progress) for a, b in pairs))
    progress.phase = "measure"
    duration_ns = int(args.duration * 1e9)
    events.emit(WINDOW_START_EVENT)
    windows = await asyncio.gather(*(_measured_window(a.send, a.recv, b.send, b.recv, ping, pong, duration_ns,
                                                      not args.no_latency, progress) for a, b in pairs))
    events.emit(WINDOW_END_EVENT)
    progress.phase = "report"
    count = sum(window[0] for window in windows)
    start = min(window[1] for window in windows)
    end = max(window[2] for window in windows)
    elapsed_s = (end - start) / 1e9
    recorded = [value for window in windows for value in window[3]]
    return {
        "warmup": {"roundtrips": progress.warmup_roundtrips, "elapsed_s": (start - warmup_start) / 1e9},
        "roundtrips": count,
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": count / elapsed_s,
        "per_pair_roundtrips": [window[0] for window in windows],
        "latency": {"unit": "ns", "recorded": not args.no_latency,
                    "hdr_histogram": encode_histogram(recorded) if not args.no_latency else None},
    }


async def _warm_up(a: Connection, b: Connection, ping: Any, pong: Any, deadline_ns: int, progress: Progress) -> None:
    clock = time.monotonic_ns
    while clock() < deadline_ns:
        await a.send(ping)
        received = await b.recv()
        if received != ping:
            raise DriverError(_mismatch("B", ping, received))
        await b.send(pong)
        received = await a.recv()
        if received != pong:
            raise DriverError(_mismatch("A", pong, received))
        progress.warmup_roundtrips += 1


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


async def _ping_pong(a: Connection, b: Connection, ping: Any, pong: Any, args: argparse.Namespace,
                     progress: Progress) -> dict[str, Any]:
    send_a, recv_a, send_b, recv_b = a.send, a.recv, b.send, b.recv
    clock = time.monotonic_ns
    events = WindowEvents()

    progress.phase = "warmup"
    warmup_start = clock()
    await _warm_up(a, b, ping, pong, warmup_start + int(args.warmup * 1e9), progress)

    progress.phase = "measure"
    # Normally one window, recording as asked. --ab-windows N (a benchmark of the recording's own cost) runs 2N
    # windows on the same connections, recording on and off in ABBA order, and reports each window's rate.
    if args.ab_windows:
        plan = [(i % 4) in (0, 3) for i in range(2 * args.ab_windows)]
    else:
        plan = [not args.no_latency]
    duration_ns = int(args.duration * 1e9)
    events.emit(WINDOW_START_EVENT)
    usage_start = resource.getrusage(resource.RUSAGE_SELF)
    windows = []
    for record in plan:
        windows.append(await _measured_window(send_a, recv_a, send_b, recv_b, ping, pong, duration_ns, record,
                                              progress))
    usage_end = resource.getrusage(resource.RUSAGE_SELF)
    events.emit(WINDOW_END_EVENT)
    progress.phase = "report"

    count = sum(window[0] for window in windows)
    elapsed_s = sum(window[2] - window[1] for window in windows) / 1e9
    recorded = [value for window in windows for value in window[3]]
    result = {
        "warmup": {"roundtrips": progress.warmup_roundtrips, "elapsed_s": (windows[0][1] - warmup_start) / 1e9},
        "roundtrips": count,
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": count / elapsed_s,
        "latency": {
            "unit": "ns",
            "recorded": any(plan),
            "hdr_histogram": encode_histogram(recorded) if any(plan) else None,
        },
        "cpu": {
            "user_s": usage_end.ru_utime - usage_start.ru_utime,
            "system_s": usage_end.ru_stime - usage_start.ru_stime,
        },
    }
    if args.ab_windows:
        result["ab_windows"] = [
            {"recording": record, "roundtrips": window[0], "roundtrips_per_s": window[0] / (window[2] - window[1]) * 1e9}
            for record, window in zip(plan, windows)]
    return result


async def _measured_window(send_a, recv_a, send_b, recv_b, ping: Any, pong: Any, duration_ns: int, record: bool,
                           progress: Progress) -> tuple[int, int, int, array]:
    """The measured loop: (roundtrips, start ns, end ns, latencies ns). Recording is one array append."""
    clock = time.monotonic_ns
    latencies = array("q")
    progress.window = latencies
    start = clock()
    deadline = start + duration_ns
    roundtrip_start = start
    if record:
        append = latencies.append
        while True:
            await send_a(ping)
            received = await recv_b()
            if received != ping:
                raise DriverError(_mismatch("B", ping, received))
            await send_b(pong)
            received = await recv_a()
            if received != pong:
                raise DriverError(_mismatch("A", pong, received))
            end = clock()
            append(end - roundtrip_start)
            roundtrip_start = end
            if end >= deadline:
                return len(latencies), start, end, latencies
    count = 0
    while True:
        await send_a(ping)
        received = await recv_b()
        if received != ping:
            raise DriverError(_mismatch("B", ping, received))
        await send_b(pong)
        received = await recv_a()
        if received != pong:
            raise DriverError(_mismatch("A", pong, received))
        count += 1
        progress.window_roundtrips = count
        end = clock()
        if end >= deadline:
            return count, start, end, latencies


# --- Idle connections: many open connections nobody uses, beside the measured pair(s) ---

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


async def _open_idle_connections(open_connection: OpenConnection, args: argparse.Namespace, opened: Opened,
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
        raise DriverError(f"idle connections: opened {len(opened.bulk)} of {requested}: {_one_line(failure)}")
    progress.phase = "connecting"
    return {"requested": requested, "opened": len(opened.bulk), "open_s": open_s,
            "nofile_limit": list(resource.getrlimit(resource.RLIMIT_NOFILE))}


def _one_line(exc: BaseException) -> str:
    """An exception as one line, "Type: message", for a report's error."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())


# --- Open loop: pings sent on a fixed schedule, latency measured from when each was due ---

@dataclass(frozen=True)
class Schedule:
    """Ping i is due at start_ns + i/rate. Pure arithmetic, so the sender and the receiver of a pair agree on
    every due time without sharing state, and a latency is measured from when a ping was due, not from when a
    late sender got round to it (no coordinated omission)."""

    start_ns: int
    rate: float

    def due(self, index: int) -> int:
        return self.start_ns + int(index * 1e9 / self.rate)

    def first_due_at_or_after(self, time_ns: int) -> int:
        """The index of the first ping due at or after time_ns (pings before it are due earlier)."""
        index = max(0, math.ceil((time_ns - self.start_ns) * self.rate / 1e9) - 2)
        while self.due(index) < time_ns:
            index += 1
        return index


async def _send_on_schedule(send: Callable[[Any], Awaitable[Any]], ping: Any, schedule: Schedule, count: int,
                            sent_ns: array) -> int:
    """Send pings 0..count-1 each at its due time, never waiting for a reply; returns when the last was sent.

    Behind schedule (a slow send, a late timer), every ping already due goes out at once: none is skipped, so
    the offered load stays the offered load. sent_ns gets each ping's actual send time.
    """
    clock = time.monotonic_ns
    due = schedule.due
    for index in range(count):
        when = due(index)
        now = clock()
        while now < when:
            await asyncio.sleep((when - now) / 1e9)
            now = clock()
        sent_ns.append(now)
        await send(ping)
    return clock()


async def _receive_on_schedule(recv: Callable[[], Awaitable[Any]], pong: Any, count: int, first_window: int,
                               received_ns: array, progress: Progress) -> None:
    """Receive the pongs of pings 0..count-1 in order (the j-th pong answers the j-th ping), timing each."""
    clock = time.monotonic_ns
    append = received_ns.append
    for index in range(count):
        received = await recv()
        if received != pong:
            raise DriverError(_mismatch("A", pong, received))
        append(clock())
        if index < first_window:
            progress.warmup_roundtrips += 1
        else:
            progress.window_roundtrips += 1


async def _answer_pings(connection: Connection, ping: Any, pong: Any) -> None:
    """B of an open-loop pair: answer every ping with a pong at once, until cancelled."""
    recv, send = connection.recv, connection.send
    while True:
        received = await recv()
        if received != ping:
            raise DriverError(_mismatch("B", ping, received))
        await send(pong)


async def _until_done(wanted: list[asyncio.Future], watched: list[asyncio.Future],
                      timeout_s: float | None = None) -> bool:
    """Wait until every wanted task is done; raise at once when any wanted or watched task fails.

    Returns False when timeout_s passed first. A responder failing (a payload mismatch on B) thus ends the run
    with its own error at once, instead of as a stall while A keeps waiting for pongs that will not come.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    pending = set(wanted) | set(watched)
    while not all(task.done() for task in wanted):
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        done, pending = await asyncio.wait(pending, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()
    return True


async def _open_loop(pairs: list[tuple[Connection, Connection]], ping: Any, pong: Any, args: argparse.Namespace,
                     progress: Progress, opened: Opened) -> dict[str, Any]:
    """--rate R: every pair's A sends R pings/s on schedule from the warmup's start, B answers each at once.

    Pings due in the warmup are warmup; those due in [warmup end, warmup end + duration) are the window. After
    the last window ping is sent, sending stops and the window's pongs are awaited (at most --stall-timeout).
    """
    clock = time.monotonic_ns
    events = WindowEvents()
    warmup_ns, duration_ns = int(args.warmup * 1e9), int(args.duration * 1e9)
    progress.phase = "warmup"
    schedule = Schedule(clock(), args.rate)
    window_start_ns = schedule.start_ns + warmup_ns
    first = schedule.first_due_at_or_after(window_start_ns)
    total = schedule.first_due_at_or_after(window_start_ns + duration_ns)
    sent = [array("q") for _ in pairs]
    received = [array("q") for _ in pairs]
    responders = [opened.task(asyncio.create_task(_answer_pings(b, ping, pong))) for _, b in pairs]
    receivers = [opened.task(asyncio.create_task(_receive_on_schedule(a.recv, pong, total, first, received[i],
                                                                      progress)))
                 for i, (a, _) in enumerate(pairs)]
    senders = [opened.task(asyncio.create_task(_send_on_schedule(a.send, ping, schedule, total, sent[i])))
               for i, (a, _) in enumerate(pairs)]
    everything = responders + receivers + senders
    window_opens = asyncio.create_task(asyncio.sleep(max(0, window_start_ns - clock()) / 1e9))
    opened.task(window_opens)
    await _until_done([window_opens], everything)
    progress.phase = "measure"
    events.emit(WINDOW_START_EVENT)
    await _until_done(senders, everything)
    window_end_ns = max(sender.result() for sender in senders)
    events.emit(WINDOW_END_EVENT)
    progress.phase = "drain"
    if not await _until_done(receivers, everything, args.stall_timeout):
        answered = sum(len(r) for r in received) - first * len(pairs)
        raise DriverError(f"stall: {answered} of {(total - first) * len(pairs)} window pings answered within "
                          f"{args.stall_timeout:g} s after the window (phase drain)")
    progress.phase = "report"
    return open_loop_report(schedule, first, total, sent, received, window_end_ns, args)


def open_loop_report(schedule: Schedule, first: int, total: int, sent: list[array], received: list[array],
                     window_end_ns: int, args: argparse.Namespace) -> dict[str, Any]:
    """The open-loop report from the raw times: latencies from due times, send lag, what was answered in time."""
    due = schedule.due
    window_start_ns = schedule.start_ns + int(args.warmup * 1e9)
    window = range(first, total)
    latencies = [times[j] - due(j) for times in received for j in window]
    lags = [times[j] - due(j) for times in sent for j in window]
    answered = len(latencies)
    in_window = sum(1 for times in received for j in window if times[j] <= window_end_ns)
    last_pong_ns = max((times[-1] for times in received if len(times) > first), default=None)
    elapsed_s = (last_pong_ns - window_start_ns) / 1e9 if last_pong_ns is not None else args.duration
    pairs = len(received)
    return {
        "warmup": {"roundtrips": first * pairs, "elapsed_s": (window_start_ns - schedule.start_ns) / 1e9},
        "roundtrips": answered,
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": answered / elapsed_s,
        "latency": {"unit": "ns", "recorded": True, "hdr_histogram": encode_histogram(latencies)},
        "open_loop": {
            "rate_per_pair": schedule.rate,
            "offered_per_s": schedule.rate * pairs,
            "sent": len(lags),
            "answered": answered,
            "answered_in_window": in_window,
            "achieved_per_s": in_window / args.duration,
            "send_lag_max_ns": max(lags, default=0),
            "send_lag_mean_ns": sum(lags) / len(lags) if lags else 0,
        },
    }


# --- Broadcast: one sender, its every message relayed to many receivers, acknowledged before the next ---

ECHO_TO_SENDER = "payload mismatch: the sender received a message (the server echoed it back)"
ACK_BYTE = b"a"


class BroadcastTally:
    """This process's receivers: per message k, when the first and the last of them got it; and the wait for
    "every local receiver has message k and K ack bytes per message arrived" (sender) or "all saw the end".

    Each receiver gets the messages in order, so the first receiver to get k already had k-1: first_ns and
    last_ns grow in message order by appending, and complete is how many messages every receiver has.
    """

    def __init__(self, receivers: int, ack_processes: int, on_complete: Callable[[], None] | None) -> None:
        self.receivers = receivers
        self.ack_processes = ack_processes
        self.on_complete = on_complete
        self.counts = [0] * receivers
        self.arrived = array("l")
        self.first_ns = array("q")
        self.last_ns = array("q")
        self.complete = 0
        self.ended = 0
        self.acks = 0
        self.target = 0
        self.error: BaseException | None = None
        self.waiter: asyncio.Future | None = None
        self.condition: Callable[[], bool] | None = None

    def got(self, receiver: int, now_ns: int) -> None:
        index = self.counts[receiver]
        self.counts[receiver] = index + 1
        if index == len(self.arrived):
            self.arrived.append(1)
            self.first_ns.append(now_ns)
        else:
            self.arrived[index] += 1
        if self.arrived[index] == self.receivers:
            self.last_ns.append(now_ns)
            self.complete = index + 1
            if self.on_complete is not None:
                self.on_complete()
            self.wake()

    def end(self, receiver: int) -> None:
        self.ended += 1
        if self.ended == self.receivers and len(set(self.counts)) > 1:
            self.fail(DriverError(f"broadcast: the receivers got different numbers of messages before the end "
                                  f"marker (from {min(self.counts)} to {max(self.counts)})"))
        self.wake()

    def acked(self, count: int) -> None:
        self.acks += count
        self.wake()

    def fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(error)

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done() and self.condition():
            waiter.set_result(None)

    def delivered(self) -> bool:
        """Message target-1 reached every local receiver and every receivers process acknowledged it."""
        return self.complete >= self.target and self.acks >= self.ack_processes * self.target

    def all_ended(self) -> bool:
        return self.ended == self.receivers

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait until condition holds, or raise the first error a receiver (or the ack pipe) reported."""
        if self.error is not None:
            raise self.error
        if condition():
            return
        self.condition = condition
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None
            self.condition = None

    async def delivered_until(self, messages: int) -> None:
        self.target = messages
        await self.until(self.delivered)


async def _receive_broadcast(index: int, connection: Connection, ping: Any, pong: Any, tally: BroadcastTally) -> None:
    """One receiver: every ping is the next message, the pong ends the run; anything else fails it."""
    recv, clock, got = connection.recv, time.monotonic_ns, tally.got
    try:
        while True:
            received = await recv()
            if received == ping:
                got(index, clock())
            elif received == pong:
                tally.end(index)
                return
            else:
                raise DriverError(_mismatch(f"R{index}", ping, received))
    except Exception as exc:  # handed to whoever waits on the tally: a task's own exception nobody would read
        tally.fail(exc)


async def _expect_silence(sender: Connection, tally: BroadcastTally) -> None:
    """The sender connection must receive nothing: the server relays to every other member, never back."""
    try:
        await sender.recv()
    except Exception as exc:
        tally.fail(exc)
        return
    tally.fail(DriverError(ECHO_TO_SENDER))


def ack_fd_from_environment(args: argparse.Namespace) -> int | None:
    """The ack pipe's end this process uses (sender: read end, receivers process: write end), or None."""
    value = os.environ.get(ACK_FD_ENV)
    if args.broadcast_role == "sender" and args.ack_processes and not value:
        raise DriverError(f"broadcast: --ack-processes {args.ack_processes} needs {ACK_FD_ENV} (the ack pipe's "
                          f"read end)")
    if not value or (args.broadcast_role == "sender" and not args.ack_processes):
        return None
    try:
        return int(value)
    except ValueError:
        raise DriverError(f"broadcast: {ACK_FD_ENV} is not a file descriptor: {value!r}") from None


def _read_acks(fd: int, tally: BroadcastTally) -> None:
    """Reader callback on the ack pipe: count the bytes; end of file means every receivers process has ended."""
    try:
        data = os.read(fd, 4096)
    except BlockingIOError:
        return
    except OSError as exc:
        data = b""
        tally.fail(DriverError(f"broadcast: reading the ack pipe failed: {_one_line(exc)}"))
    if not data:
        asyncio.get_running_loop().remove_reader(fd)
        tally.fail(DriverError("broadcast: the ack pipe closed (every receivers process has ended)"))
        return
    tally.acked(len(data))


LISTED_RECEIVERS = 10  # a report lists the details of the first receivers only (all are alike), and the total


def broadcast_connections(sender: Connection | None, receivers: list[Connection]) -> list[dict[str, Any]]:
    """The report's "connections": S (in the sender process), then the first LISTED_RECEIVERS receivers."""
    listed = [] if sender is None else [dict(name="S", **sender.details)]
    return listed + [dict(name=f"R{index}", **receiver.details)
                     for index, receiver in enumerate(receivers[:LISTED_RECEIVERS])]


async def measure_broadcast(open_connection: OpenConnection, args: argparse.Namespace) -> dict[str, Any]:
    """--workload broadcast: a sender S and receivers all in the URL's room; the server relays S's every message
    to all of them. S sends message k once every receiver (local, and in the other processes, by their acks)
    has message k-1. A receivers process only receives, acknowledges, and ends at the end marker (the pong).
    """
    ping = make_payload(args.payload_kind, args.payload_size, PING)
    pong = make_payload(args.payload_kind, args.payload_size, PONG)
    sending = args.broadcast_role == "sender"
    ack_fd = ack_fd_from_environment(args)
    progress = Progress()

    def acknowledge() -> None:
        progress.window_roundtrips += 1
        if ack_fd is not None:
            os.write(ack_fd, ACK_BYTE)  # one byte: a pipe write this small is atomic among the processes

    tally = BroadcastTally(args.receivers, args.ack_processes, None if sending else acknowledge)
    loop = asyncio.get_running_loop()
    async with _watched(progress, args.stall_timeout) as opened:
        sender = opened.connection(await open_connection(args.url, args)) if sending else None
        progress.phase = "receivers-connecting"
        failure = await open_in_bulk(open_connection, args.url, args, args.receivers, opened.bulk, progress)
        if failure is not None:
            raise DriverError(f"broadcast receivers: opened {len(opened.bulk)} of {args.receivers}: "
                              f"{_one_line(failure)}")
        progress.phase = "connecting"
        receivers = list(opened.bulk)
        for index, receiver in enumerate(receivers):
            opened.task(asyncio.create_task(_receive_broadcast(index, receiver, ping, pong, tally)))
        if sender is not None:
            opened.task(asyncio.create_task(_expect_silence(sender, tally)))
        if sending and ack_fd is not None:
            os.set_blocking(ack_fd, False)
            loop.add_reader(ack_fd, _read_acks, ack_fd, tally)
        try:
            WindowEvents().ready_then_wait_for_go()
            if sending:
                result = await _broadcast_send(sender, ping, pong, tally, args, progress)
            else:
                progress.phase = "receiving"
                await tally.until(tally.all_ended)
                if tally.error is not None:
                    raise tally.error
                progress.phase = "report"
                result = _receivers_report(tally, args)
        finally:
            if sending and ack_fd is not None:
                loop.remove_reader(ack_fd)
    result["connections"] = broadcast_connections(sender, receivers)
    result["connections_total"] = len(receivers) + (sender is not None)
    result["loop"] = running_loop_name()
    return result


async def _broadcast_send(sender: Connection, ping: Any, pong: Any, tally: BroadcastTally, args: argparse.Namespace,
                          progress: Progress) -> dict[str, Any]:
    """The sender's loop: warmup, then the window (the cycles of messages sent in it), then one end marker."""
    clock = time.monotonic_ns
    events = WindowEvents()
    send, delivered_until = sender.send, tally.delivered_until
    send_ns = array("q")
    cycles = array("q")
    progress.phase = "warmup"
    warmup_start = clock()
    deadline = warmup_start + int(args.warmup * 1e9)
    while clock() < deadline:
        send_ns.append(clock())
        await send(ping)
        await delivered_until(len(send_ns))
        progress.warmup_roundtrips += 1
    window_first = len(send_ns)
    progress.phase = "measure"
    progress.window = cycles
    events.emit(WINDOW_START_EVENT)
    start = clock()
    deadline = start + int(args.duration * 1e9)
    while True:
        began = clock()
        send_ns.append(began)
        await send(ping)
        await delivered_until(len(send_ns))
        end = clock()
        cycles.append(end - began)
        if end >= deadline:
            break
    events.emit(WINDOW_END_EVENT)
    progress.phase = "report"
    await send(pong)  # the end marker: receivers processes report and exit when all their receivers have it
    elapsed_s = (end - start) / 1e9
    return {
        "warmup": {"roundtrips": window_first, "elapsed_s": (start - warmup_start) / 1e9},
        "roundtrips": len(cycles),
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": len(cycles) / elapsed_s,
        "pairs": 1,
        "latency": {"unit": "ns", "recorded": not args.no_latency,
                    "hdr_histogram": None if args.no_latency else encode_histogram(cycles)},
        "broadcast": {"role": "sender", "receivers": args.receivers, "ack_processes": args.ack_processes,
                      "send_ns": send_ns.tolist(), "window_first": window_first, "window_count": len(cycles),
                      "first_ns": tally.first_ns.tolist(), "last_ns": tally.last_ns.tolist()},
    }


def _receivers_report(tally: BroadcastTally, args: argparse.Namespace) -> dict[str, Any]:
    """A receivers process's report: how many messages all its receivers got, over the time they spanned."""
    messages = tally.complete
    spanned_ns = tally.last_ns[-1] - tally.first_ns[0] if messages else 0
    elapsed_s = max(spanned_ns / 1e9, 1e-9)
    return {
        "roundtrips": messages,
        "elapsed_s": elapsed_s,
        "roundtrips_per_s": messages / elapsed_s,
        "latency": {"unit": "ns", "recorded": False, "hdr_histogram": None},
        "broadcast": {"role": "receivers", "receivers": args.receivers, "first_ns": tally.first_ns.tolist(),
                      "last_ns": tally.last_ns.tolist()},
    }


def _mismatch(receiver: str, expected: Any, received: Any) -> str:
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
