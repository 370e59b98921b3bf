"""The ping-pong measurement shared by the Python client drivers (clients/*.py).

A client driver only knows how to open one connection with its library; everything else (the CLI contract,
warmup, the measured window, payload verification, stall detection, the JSON report) lives here, so every
Python client measures exactly the same thing. node/driver.js is the Node.js twin of this module.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
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
from pingpong.contract import (CLIENT_REPORT_FORMAT_VERSION, COMPRESSION_MODES, DEFAULT_COMPRESSION, DEFAULT_DURATION_S,
                               DEFAULT_LOOP, DEFAULT_PAIRS, DEFAULT_PAYLOAD_KIND, DEFAULT_PAYLOAD_SIZE,
                               DEFAULT_STALL_TIMEOUT_S, DEFAULT_WARMUP_S, DEFAULT_WORKLOAD, EVENTS_FD_ENV,
                               GO_FD_ENV, GO_LINE, HISTOGRAM_HIGHEST_NS, HISTOGRAM_LOWEST_NS,
                               HISTOGRAM_SIGNIFICANT_DIGITS, LOOPS, PAYLOAD_KINDS, READY_EVENT, WINDOW_END_EVENT,
                               WINDOW_START_EVENT, WORKLOADS)
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
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.warmup < 0 or args.payload_size < 1 or args.stall_timeout <= 0 or args.pairs < 1:
        parser.error("--duration and --stall-timeout must be > 0, --warmup >= 0, --payload-size and --pairs >= 1")
    if args.pairs > 1 and args.ab_windows:
        parser.error("--ab-windows measures one pair; it cannot be combined with --pairs")
    if args.workload == "handshake" and (args.pairs > 1 or args.ab_windows):
        parser.error("--workload handshake runs one connection at a time; no --pairs or --ab-windows")
    return args


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
                     **settings(args)},
        "payload": {"kind": args.payload_kind, "size": args.payload_size},
        "workload": args.workload,
        "error": None,
    }
    measurement = measure if args.workload == "pingpong" else measure_handshakes

    async def run_then_shut_down():
        try:
            return await measurement(open_connection, args)
        finally:
            if shutdown is not None:
                await shutdown()

    try:
        report.update(run_on_loop(args.loop, run_then_shut_down))
    except Exception as exc:  # every failure becomes a reported error, never a count
        report["error"] = f"{type(exc).__name__}: {exc}" if not isinstance(exc, DriverError) else str(exc)
    report["errors"] = 0 if report["error"] is None else 1
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    if report["error"]:
        print(f"{implementation} client: {report['error']}", file=sys.stderr)
        sys.exit(1)


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
        received = b""
        while not received.endswith(b"\n"):
            chunk = os.read(int(go_fd), 64)
            if not chunk:
                break
            received += chunk
        os.close(int(go_fd))
        if received.strip() != GO_LINE.encode():
            raise DriverError("start barrier: the orchestrator closed it without a go (another client process "
                              "failed or did not get ready)")


class Progress:
    """Read by the stall watchdog; written once per roundtrip during warmup and via len() in the window."""

    def __init__(self) -> None:
        self.phase = "connecting"
        self.warmup_roundtrips = 0
        self.window: array = array("q")
        self.window_roundtrips = 0


async def measure(open_connection: OpenConnection, args: argparse.Namespace) -> dict[str, Any]:
    ping = make_payload(args.payload_kind, args.payload_size, PING)
    pong = make_payload(args.payload_kind, args.payload_size, PONG)
    progress = Progress()
    async with _watched(progress, args.stall_timeout) as opened:
        pairs = []
        for url in pair_urls(args.url, args.pairs):
            a = opened.connection(await open_connection(url, args))
            b = opened.connection(await open_connection(url, args))
            pairs.append((a, b))
        WindowEvents().ready_then_wait_for_go()
        if len(pairs) == 1:
            result = await _ping_pong(a, b, ping, pong, args, progress)
        else:
            result = await _many_pairs(pairs, ping, pong, args, progress)
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
    """What a measurement opened, for _watched to close: connections (in opening order) and helper tasks."""

    def __init__(self) -> None:
        self.connections: list[Connection] = []
        self.tasks: list[asyncio.Task] = []

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
        now_state = (progress.phase, progress.warmup_roundtrips, len(progress.window), progress.window_roundtrips)
        if now_state != last:
            last, last_change = now_state, time.monotonic()
        elif time.monotonic() - last_change >= stall_timeout:
            completed = progress.warmup_roundtrips + max(len(progress.window), progress.window_roundtrips)
            watchdog = asyncio.current_task()
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
