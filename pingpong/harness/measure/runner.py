"""One attempt of one cell: start the server, probe it, verify it, run the client, sample CPU, stop everything."""

from __future__ import annotations

import json
import math
import os
import queue
import select
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from pingpong.harness.system import cpu, kernel_signals, listeners, processes
from pingpong.harness.results import histograms
from pingpong.harness.measure import probe
from pingpong.harness.analysis import workload_figures
from pingpong.harness.system.syscall_trace import SyscallTracer
from pingpong.harness.settings.manifest import Implementation, resolve_command
from pingpong.harness.results.records import Attempt
from pingpong.harness.settings.cell import CellSettings, cpus_for, pairs_per_process
from pingpong.harness.measure.start_barrier import StartBarrier, window_spread
from pingpong.contract import (ACK_FD_ENV, ARMED_EVENT, EVENTS_FD_ENV, GO_FD_ENV, GO_LINE,
                               INFO_FILE_ENV, MALLOC_ENV, NODE_EXTRA_CA_CERTS_ENV, NODE_MODULES_ENV, READY_EVENT,
                               START_FD_ENV, WINDOW_END_EVENT, WINDOW_START_EVENT)

STDERR_TAIL_LINES = 20


def process_environment(settings: CellSettings, **extra: str) -> dict[str, str]:
    """The environment of a server or client process: ours, plus the package environment's location."""
    environment = {**os.environ, **extra, MALLOC_ENV: settings.malloc}
    if settings.tls_ca:  # the WHATWG clients (Node built-in, Bun) take no CA option: the runtime reads this
        environment[NODE_EXTRA_CA_CERTS_ENV] = settings.tls_ca
    if settings.node_modules:
        environment[NODE_MODULES_ENV] = settings.node_modules
    return environment


def loop_for(implementation: Implementation, requested: str) -> str:
    """The --loop an implementation gets: the requested one, or 'auto' in single-loop runtimes."""
    return requested if requested in implementation.loops else "auto"


def run_attempt(server: Implementation, client: Implementation, settings: CellSettings, repeat: int,
                project_root: Path) -> Attempt:
    """Measure one repeat of a cell on a server started for it; every failure becomes an Attempt with a reason."""
    server_cpus, client_cpus = cpus_for(settings)
    with tempfile.TemporaryDirectory(prefix="pingpong-cell-") as work:
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        server_under_test = start_server(server, settings, project_root, Path(work), server_cpus)
        running: list[processes.ManagedProcess] = []
        try:
            outcome = server_under_test.problem or _measure_client(server_under_test, client, settings, repeat,
                                                                   project_root, client_cpus, running)
        except Exception as exc:  # a bug or an OS error in one cell must not end the run
            outcome = dict(status="error", reason=f"orchestrator: {type(exc).__name__}: {exc}")
        finally:
            with processes.interrupts_deferred():
                for process in running:
                    processes.stop(process)
                server_code = processes.stop(server_under_test.process)
        unclean_stop = server_code not in processes.CLEAN_EXIT_CODES  # kept: why it did not stop cleanly
        if (outcome["status"] != "ok" or unclean_stop) and "server_stderr_tail" not in outcome:
            outcome["server_stderr_tail"] = server_under_test.process.stderr_tail(STDERR_TAIL_LINES)
        return Attempt(**server_under_test.attempt_fields(repeat, started_at, client_cpus), **outcome,
                       server_exit_code=server_code)


def run_attempt_on(server_under_test: "ServerUnderTest", client: Implementation, settings: CellSettings,
                   repeat: int, project_root: Path) -> Attempt:
    """Measure one repeat of a cell on a server that is already running (started and verified by start_server).

    First a room probe (one handshake in a room of its own) shows the server still answers; then the client runs
    in a room of its own. The server is left running, so server_exit_code stays None (the caller stops the server
    with processes.stop and has its exit code then).
    """
    server_cpus, client_cpus = cpus_for(settings)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    running: list[processes.ManagedProcess] = []
    waiting = server_under_test.take_turn(client, settings, repeat)
    # the next client loads on the server's CPUs while this one finishes (moved to the client's before its go)
    spawn_next = (lambda: spawn_ahead(server_under_test, server_cpus)) if server_under_test.upcoming else None
    try:
        outcome = server_under_test.problem or room_probe(server_under_test, settings)
        if outcome is None:
            server_under_test.settle_waiting(settings.ready_timeout_s)  # none may be loading during the window
            outcome = _measure_client(server_under_test, client, settings, repeat, project_root, client_cpus,
                                      running, waiting, spawn_next)
    except Exception as exc:
        outcome = dict(status="error", reason=f"orchestrator: {type(exc).__name__}: {exc}")
    finally:
        with processes.interrupts_deferred():
            for process in running:
                processes.stop(process)
            if waiting is not None:  # used (its process is in running) or not (a server problem, a failed probe)
                waiting.close()
                processes.stop(waiting.process)
    return Attempt(**server_under_test.attempt_fields(repeat, started_at, client_cpus), **outcome)


ROOM_PROBE_TIMEOUT_S = 3.0


# Runtimes that compile a program's hot path while it runs, and need jit_warmup_s to be steady: V8 (Node.js) took
# about half a second on this 2-CPU machine (benchmarks/window_spread.py, docs/methodology.md); Bun's JavaScriptCore,
# CPython and C were steady after 0.1-0.2 s.
JIT_RUNTIMES = ("node",)


def with_jit_warmup(settings: CellSettings, client_runtime: str | None, server_runtime: str | None,
                    client_number: int) -> CellSettings:
    """The warmup of one client process: a Node.js client warms up at least jit_warmup_s, and the first client of
    a Node.js server process jit_warmup_s longer (the new server's V8 is still compiling, its heap growing)."""
    if not settings.jit_warmup_s:
        return settings
    warmup = settings.warmup_s
    if client_runtime in JIT_RUNTIMES:
        warmup = max(warmup, settings.jit_warmup_s)
    if client_number == 1 and server_runtime in JIT_RUNTIMES:
        warmup += settings.jit_warmup_s
    return settings if warmup == settings.warmup_s else replace(settings, warmup_s=warmup)


def room_probe(server_under_test: "ServerUnderTest", settings: CellSettings) -> dict[str, Any] | None:
    """None when a long-lived server still completes a handshake; else a not-ready outcome with the reason."""
    if server_under_test.process.popen.poll() is not None:
        return dict(status="server-crashed", reason=f"the server exited with code "
                                                    f"{server_under_test.process.popen.returncode} before this attempt")
    try:
        server_under_test.room_probes += 1
        with probe.open_connection(server_under_test.base_url, f"/__room_probe_{server_under_test.room_probes}",
                                   ROOM_PROBE_TIMEOUT_S, settings.tls_ca):
            return None
    except Exception as exc:
        return dict(status="not-ready", reason=f"room probe before the client: {type(exc).__name__}: {exc}")


@dataclass
class ServerUnderTest:
    """A server process started for measuring: where it listens, and whether it passed readiness and verification.

    problem is None when it is ready and relays as the contract says; else the failed attempt's status and reason
    (not-ready, port-conflict, verification-failed), which every attempt on it reports.
    """

    process: processes.ManagedProcess
    base_url: str
    port: int
    info_path: Path
    work_dir: Path
    cpus: set[int] | None
    ready_after_s: float | None = None
    problem: dict[str, Any] | None = None
    # Attempts that have taken their turn on this server. An attempt's client is numbered by its turn (its room and
    # its jit warmup depend on it), so a long-lived server never reuses a room.
    turns: int = 0
    room_probes: int = 0  # the room probes' rooms are numbered per server too
    runtime: str | None = None  # the server implementation's runtime (python, node, bun, native)
    # Starting clients ahead of their turn (spawn_ahead): the attempts still to come on this server, in order, as
    # (client, settings, round); the client processes started for some of them, in the same order, each loaded and
    # waiting at its start gate; and how many of the upcoming attempts, from the first, were considered for one.
    upcoming: list[tuple[Implementation, "CellSettings", int]] = field(default_factory=list)
    waiting: list["WaitingClient"] = field(default_factory=list)
    considered_ahead: int = 0
    project_root: Path | None = None

    def take_turn(self, client: Implementation, settings: "CellSettings", repeat: int) -> "WaitingClient | None":
        """This attempt takes its turn and leaves the upcoming list; the client waiting for it, if one was started
        for it. When the caller runs another attempt than the next upcoming one (it changed its order), every
        waiting client is stopped and none is started ahead any more."""
        self.turns += 1
        if self.upcoming and (self.upcoming[0][0].name, self.upcoming[0][1], self.upcoming[0][2]) == (
                client.name, settings, repeat):
            self.upcoming.pop(0)
            self.considered_ahead = max(0, self.considered_ahead - 1)
            if self.waiting and self.waiting[0].serves(client, settings, repeat):
                return self.waiting.pop(0)
            return None  # it could not wait at a gate, or its start failed: the attempt starts it
        with processes.interrupts_deferred():
            self.discard_waiting()
        return None

    def settle_waiting(self, timeout_s: float) -> None:
        """Wait until every client waiting for a later attempt has loaded (said ARMED_EVENT), so that none is still
        loading during this attempt's window; one that does not load in time, or exits, is stopped (its attempt
        then starts its client at its turn, and reports why it fails)."""
        deadline = time.monotonic() + timeout_s
        for waiting in list(self.waiting):
            if waiting.wait_until_armed(max(0.0, deadline - time.monotonic())) is not None:
                with processes.interrupts_deferred():
                    self.waiting.remove(waiting)
                    waiting.discard()

    def discard_waiting(self) -> None:
        """Stop every client started ahead for an attempt that will not come (before the server stops; callers
        hold interrupts_deferred around both)."""
        self.upcoming.clear()
        self.considered_ahead = 0
        waiting, self.waiting = self.waiting, []
        for client in waiting:
            client.discard()

    def attempt_fields(self, repeat: int, started_at: str, client_cpus: set[int] | None) -> dict[str, Any]:
        return dict(repeat=repeat, started_at=started_at, port=self.port, server_pid=self.process.pid,
                    server_cpus=sorted(self.cpus) if self.cpus else None,
                    client_cpus=sorted(client_cpus) if client_cpus else None)


# How many of a server's clients start ahead while the server itself starts: each loads, then waits at its start
# gate until its turn. While the server imports, gets ready and has its relay verified (about 0.4-0.7 s, 0.35 s of
# it watching for stray messages, when the server's CPU idles too), the CPUs load a whole group of clients
# (0.03-0.24 s each), which otherwise would load one by one between attempts, each while the attempt before it
# closes. A server's later clients, if any, start one at a time after each window.
CLIENTS_AHEAD_AT_SERVER_START = 8


def start_server(server: Implementation, settings: CellSettings, project_root: Path, work_dir: Path,
                 server_cpus: set[int] | None,
                 upcoming: list[tuple[Implementation, CellSettings, int]] | None = None,
                 clients_ahead: int = CLIENTS_AHEAD_AT_SERVER_START) -> ServerUnderTest:
    """Start a server, wait for its first handshake, check who holds its port, and verify its relay.

    upcoming: the attempts that will run on it, in order (client, settings, round), to start their clients ahead
    of their turn (spawn_ahead): the first clients_ahead of them load on the client's CPUs while the server gets
    ready.

    Once this returns, the caller owns the process and stops it (processes.stop, after discard_waiting) in every
    case; if this raises (an interruption during the probe, an OS error), it has stopped the processes itself.
    """
    started = launch_server(server, settings, project_root, work_dir, server_cpus)
    on_ready = None
    try:
        if upcoming:
            started.upcoming, started.project_root = list(upcoming), project_root
            client_cpus = cpus_for(settings)[1]
            spawn_ahead(started, client_cpus, clients_ahead)
            if server_cpus and client_cpus and len(started.waiting) > 1:
                # once the server is ready, its CPUs idle while its relay is verified: clients still loading may
                # use them too (at its turn, each client moves to the client's CPUs)
                on_ready = lambda: [processes.pin_threads(waiting.process.pid, server_cpus | client_cpus)  # noqa
                                    for waiting in started.waiting]
        started.problem = _check_server(started, settings, on_ready)
    except BaseException:
        with processes.interrupts_deferred():
            started.discard_waiting()
            processes.stop(started.process)
        raise
    return started


@dataclass
class WaitingClient:
    """A client process started ahead of its turn (contract START_FD_ENV): it loads, says ARMED_EVENT on its
    events pipe and blocks, before any connection, until GO_LINE comes on its start gate."""

    client_name: str
    base_settings: CellSettings  # as its attempt will ask for them (before with_jit_warmup)
    repeat: int
    settings: CellSettings  # what it runs with: its jit warmup is that of its place among the server's clients
    number: int  # its place among the server's clients (client_number of with_jit_warmup, its room)
    process: processes.ManagedProcess
    events_fd: int | None  # read end of its events pipe (the attempt's WindowWatcher takes it over)
    gate_fd: int | None  # write end of its start gate
    armed: bool = False  # it has said ARMED_EVENT

    def serves(self, client: Implementation, settings: CellSettings, repeat: int) -> bool:
        return (self.client_name, self.base_settings, self.repeat) == (client.name, settings, repeat)

    def wait_until_armed(self, timeout_s: float) -> str | None:
        """None once it has loaded and said ARMED_EVENT (now or before); else why not (wait_until_armed)."""
        if not self.armed:
            if self.events_fd is None:
                return "its events pipe is closed"
            not_armed = wait_until_armed(self.events_fd, timeout_s)
            if not_armed is not None:
                return not_armed
            self.armed = True
        return None

    def close(self) -> None:
        """Close what the orchestrator still holds of its pipes (closing the gate without a go ends the client)."""
        for name in ("gate_fd", "events_fd"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                try:
                    os.close(fd)
                except OSError:
                    pass

    def discard(self) -> None:
        """Close its pipes and stop it (callers hold processes.interrupts_deferred)."""
        self.close()
        processes.stop(self.process)


# Only a plain attempt's single client process waits at a start gate: a start barrier, held idle connections and a
# broadcast's acknowledgement pipes are set up with the client processes of their attempt.
def can_start_ahead(client: Implementation, settings: CellSettings) -> bool:
    return (START_GATE_FEATURE in client.features and len(client_shares(settings)) == 1
            and not settings.idle_connections and not settings.sample_server_memory
            and settings.workload != "broadcast")


START_GATE_FEATURE = "start-gate"


def spawn_ahead(server_under_test: ServerUnderTest, loading_cpus: set[int] | None, clients: int = 1) -> None:
    """Start clients for the next upcoming attempts now, each blocked at its start gate, until `clients` are
    waiting; they load on loading_cpus. Each upcoming attempt is considered once: a client that cannot wait at a
    gate (or whose start fails) is left for its attempt to start."""
    while (len(server_under_test.waiting) < clients
           and server_under_test.considered_ahead < len(server_under_test.upcoming)):
        place = server_under_test.considered_ahead  # 0: the next attempt
        server_under_test.considered_ahead += 1
        client, settings, repeat = server_under_test.upcoming[place]
        if not can_start_ahead(client, settings):
            continue
        try:
            _start_waiting(server_under_test, client, settings, repeat, loading_cpus, place)
        except Exception:  # noqa: BLE001 - an OS error, a failed preexec: never this attempt's or the run's failure
            pass  # its attempt starts it the usual way, and says so if it fails again


def _start_waiting(server_under_test: ServerUnderTest, client: Implementation, base_settings: CellSettings,
                   repeat: int, loading_cpus: set[int] | None, place: int) -> WaitingClient:
    """Start the client of the upcoming attempt at `place` (0: the next one) and add it to the server's waiting
    clients; it is numbered by the turn that attempt will take."""
    number = server_under_test.turns + 1 + place
    settings = with_jit_warmup(base_settings, client.runtime, server_under_test.runtime, number)
    share = client_shares(settings)[0]
    client_url = server_under_test.base_url.replace("127.0.0.1", settings.client_host, 1)
    room = f"/bench-r{repeat}" + (f"-n{number}" if number > 1 else "")
    argv = client_command(client, settings, f"{client_url}{room}", share.pairs, server_under_test.project_root,
                          share)
    events_read, events_write = os.pipe()
    try:
        gate_read, gate_write = os.pipe()
    except BaseException:
        os.close(events_read)
        os.close(events_write)
        raise
    try:
        with processes.interrupts_deferred():  # a Ctrl-C now is raised once the client is in the caller's hands
            process = processes.start("client" + (f"-n{number}" if number > 1 else ""), argv,
                                      server_under_test.project_root, server_under_test.work_dir,
                                      cpus=loading_cpus, pass_fds=(events_write, gate_read),
                                      env=process_environment(settings, **{EVENTS_FD_ENV: str(events_write),
                                                                           START_FD_ENV: str(gate_read)}))
            waiting = WaitingClient(client.name, base_settings, repeat, settings, number, process, events_read,
                                    gate_write)
            server_under_test.waiting.append(waiting)
    except BaseException:
        if not server_under_test.waiting or server_under_test.waiting[-1].events_fd != events_read:
            os.close(events_read)
            os.close(gate_write)
        raise
    finally:
        os.close(events_write)
        os.close(gate_read)
    return waiting


def wait_until_armed(events_fd: int, timeout_s: float) -> str | None:
    """None once ARMED_EVENT has come on events_fd; else why not: "exited" (end of file) or "timeout". Reads
    byte by byte, so nothing after that line is taken from the WindowWatcher (nothing comes before the go)."""
    deadline = time.monotonic() + timeout_s
    received = b""
    readable = select.poll()  # not select.select: it fails on a descriptor numbered 1024 or more
    readable.register(events_fd, select.POLLIN)
    while not received.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not readable.poll(math.ceil(remaining * 1000)):
            return "timeout"
        chunk = os.read(events_fd, 1)
        if not chunk:
            return "exited"
        received += chunk
    return None if received.strip() == ARMED_EVENT.encode() else f"said {received.strip()!r} before {ARMED_EVENT}"


def launch_server(server: Implementation, settings: CellSettings, project_root: Path, work_dir: Path,
                  server_cpus: set[int] | None, host: str = "127.0.0.1") -> ServerUnderTest:
    """Start a server listening on host (only there) at a free port; not yet probed. The caller stops it."""
    port = free_port_checked(host)
    info_path = work_dir / "server-info.json"
    server_argv = resolve_command(server, project_root, settings.python_executable) + [
        "--host", host, "--port", str(port),
        "--loop", loop_for(server, settings.loop), "--compression", settings.compression]
    if settings.tls_cert:
        server_argv += ["--tls-cert", settings.tls_cert, "--tls-key", settings.tls_key]
    process = processes.start("server", server_argv, project_root, work_dir,
                              env=process_environment(settings, **{INFO_FILE_ENV: str(info_path)}), cpus=server_cpus)
    return ServerUnderTest(process, f"{server_scheme(server, settings)}://{host}:{port}", port, info_path, work_dir,
                           server_cpus, runtime=server.runtime)


def server_scheme(server: Implementation, settings: CellSettings) -> str:
    return "tcp" if server.protocol == "raw-tcp" else "wss" if settings.tls_ca else "ws"


def _check_server(started: ServerUnderTest, settings: CellSettings,
                  on_ready: Callable[[], Any] | None = None) -> dict[str, Any] | None:
    """None when the server is ready, holds its port and relays as the contract says; else status and reason.
    on_ready, if given, runs once its first handshake has succeeded."""
    process, port = started.process, started.port
    try:
        started.ready_after_s = round(probe.wait_until_ready(started.base_url, process, settings.ready_timeout_s,
                                                             settings.tls_ca), 4)
    except probe.NotReady as exc:
        return dict(status="not-ready", reason=str(exc) + diagnose_port(port, process))
    if on_ready is not None:
        on_ready()
    owner = listeners.port_owner(port)
    if owner is not None and owner not in listeners.process_tree(process.pid):
        return dict(status="port-conflict", reason=f"port {port} answered, but it is held by another process "
                                                   f"(pid {owner}), not by the server")
    problem = probe.verify_relay(started.base_url, settings.tls_ca)
    if problem:
        return dict(status="verification-failed", reason=problem, ready_after_s=started.ready_after_s)
    return None


def _measure_client(server_under_test: ServerUnderTest, client: Implementation, settings: CellSettings,
                    repeat: int, project_root: Path, client_cpus: set[int] | None,
                    running: list[processes.ManagedProcess], waiting: WaitingClient | None = None,
                    spawn_next: Callable[[], None] | None = None) -> dict[str, Any]:
    """Run the attempt's client (started here, or waiting at its start gate), judge it. spawn_next, if given, runs
    once its window has closed (and been sampled): it starts the next attempt's client ahead of its turn."""
    if waiting is not None:
        return _measure_waiting_client(server_under_test, waiting, client_cpus, running, spawn_next)
    server_process, work_dir = server_under_test.process, server_under_test.work_dir
    server_info = _read_json_file(server_under_test.info_path)
    client_url = server_under_test.base_url.replace("127.0.0.1", settings.client_host, 1)
    number = max(1, server_under_test.turns)  # its turn (take_turn counts them)
    settings = with_jit_warmup(settings, client.runtime, server_under_test.runtime, number)
    shares = client_shares(settings)
    held = (HeldConnections(server_process.pid, server_under_test.port)
            if settings.idle_connections or settings.sample_server_memory else None)
    # Several client processes start their warmup together, released by a barrier once all are connected. With
    # idle connections, the barrier also holds the client while the server is sampled with all of them open.
    barrier = StartBarrier(len(shares), before_go=held.sample_held if held else None) \
        if len(shares) > 1 or held else None
    read_fd, write_fd = os.pipe()  # every client process writes its events here (short lines: atomic)
    # broadcast over several processes: each receivers process acks each message on this pipe, the sender reads
    ack_fds = os.pipe() if settings.workload == "broadcast" and len(shares) > 1 else None
    clients: list[processes.ManagedProcess] = []
    try:
        for index, share in enumerate(shares):
            room = f"/bench-r{repeat}" + (f"-n{number}" if number > 1 else "") + (
                f"-c{index}" if len(shares) > 1 and settings.workload != "broadcast" else "")
            argv = client_command(client, settings, f"{client_url}{room}", share.pairs, project_root, share)
            name = (f"client{index}" if len(shares) > 1 else "client") + (f"-n{number}" if number > 1 else "")
            fds = {EVENTS_FD_ENV: write_fd} | ({GO_FD_ENV: barrier.read_fds[index]} if barrier else {}) | (
                {ACK_FD_ENV: ack_fds[0] if share.role == "sender" else ack_fds[1]} if ack_fds else {})
            clients.append(processes.start(name, argv, project_root, work_dir, cpus=client_cpus,
                                           pass_fds=tuple(fds.values()),
                                           env=process_environment(settings, **{env: str(fd)
                                                                                for env, fd in fds.items()})))
            running.append(clients[-1])
    except BaseException:
        os.close(read_fd)
        if barrier:
            barrier.abort()
        raise
    finally:
        os.close(write_fd)
        for fd in ack_fds or ():
            os.close(fd)
        if barrier:
            barrier.close_read_ends()
    common = dict(client_pid=clients[0].pid, ready_after_s=server_under_test.ready_after_s, server_info=server_info)
    # the processes that measure a window: the broadcast's sender, or those with pairs (not the idle holders)
    window_processes = 1 if settings.workload == "broadcast" else sum(share.pairs > 0 for share in shares)
    window = WindowWatcher(read_fd, server_process.pid, [c.pid for c in clients], server_under_test.port, settings,
                           work_dir, on_ready=barrier.arrived if barrier else None,
                           window_processes=window_processes)
    if barrier:
        try:
            problem = _wait_at_barrier(barrier, server_process, clients, settings, common)
        finally:
            barrier.abort()  # closes the go pipes if the wait ended any other way than by the go
        if problem:
            for other in clients:
                processes.stop(other)
            window.join()
            return problem
    return _await_clients(server_process, clients, settings, window, common, held, spawn_next)


def _measure_waiting_client(server_under_test: ServerUnderTest, waiting: WaitingClient,
                            client_cpus: set[int] | None, running: list[processes.ManagedProcess],
                            spawn_next: Callable[[], None] | None) -> dict[str, Any]:
    """The attempt of a client started ahead of its turn: once it has loaded, it moves to the client's CPUs and
    gets its go; from there on it is measured as any other."""
    settings, process = waiting.settings, waiting.process
    running.append(process)
    common = dict(client_pid=process.pid, ready_after_s=server_under_test.ready_after_s,
                  server_info=_read_json_file(server_under_test.info_path))
    not_armed = waiting.wait_until_armed(settings.ready_timeout_s)
    if not_armed is None:
        if client_cpus:
            processes.pin_threads(process.pid, client_cpus)
        try:
            os.write(waiting.gate_fd, f"{GO_LINE}\n".encode())
        except BrokenPipeError:
            not_armed = "exited"
    events_fd, waiting.events_fd = waiting.events_fd, None  # the WindowWatcher below closes it
    waiting.close()  # the gate: its go is written, or its end tells the client to leave
    if not_armed not in (None, "exited"):  # "exited": the watcher sees the end, judge_outcome tells why it ended
        os.close(events_fd)
        processes.stop(process)
        return dict(status="timeout", reason=f"client process started ahead of its turn did not load within "
                                             f"{settings.ready_timeout_s:g} s ({not_armed})",
                    client_exit_code=process.popen.returncode,
                    client_stderr_tail=process.stderr_tail(STDERR_TAIL_LINES), **common)
    window = WindowWatcher(events_fd, server_under_test.process.pid, [process.pid], server_under_test.port,
                           settings, server_under_test.work_dir, window_processes=1)
    return _await_clients(server_under_test.process, [process], settings, window, common, None, spawn_next)


def _await_clients(server_process: processes.ManagedProcess, clients: list[processes.ManagedProcess],
                   settings: CellSettings, window: "WindowWatcher", common: dict[str, Any],
                   held: "HeldConnections | None", spawn_next: Callable[[], None] | None) -> dict[str, Any]:
    """Wait for the client processes to end (within their deadline), then judge the attempt."""
    deadline = (time.monotonic() + settings.warmup_s + settings.duration_s + settings.client_grace_s
                + connecting_allowance_s(settings))
    if spawn_next is not None:
        window.ended.wait(max(0.0, deadline - time.monotonic()))
        spawn_next()
    codes = []
    for index, client_process in enumerate(clients):
        try:
            codes.append(processes.wait(client_process.popen, max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for other in clients:
                processes.stop(other)
            window.join()
            timeout_s = (settings.warmup_s + settings.duration_s + settings.client_grace_s
                         + connecting_allowance_s(settings))
            return dict(status="timeout", reason=f"client{'' if len(clients) == 1 else f' process {index}'} "
                                                 f"did not finish within {timeout_s:g} s",
                        client_exit_code=client_process.popen.returncode,
                        client_stderr_tail=client_process.stderr_tail(STDERR_TAIL_LINES), **common)
    window.join()
    return judge_outcome(server_process, clients, codes, window, common, settings, held)


@dataclass
class HeldConnections:
    """The server with every idle connection open, sampled just before the go (outside any measured window):
    the memory of its process tree then and before the client started, and the connections the kernel lists."""

    server_pid: int
    port: int
    memory_before: dict[str, int] | None = None
    memory_held: dict[str, int] | None = None
    established: int | None = None

    def __post_init__(self) -> None:
        self.memory_before = cpu.tree_memory(self.server_pid)

    def sample_held(self) -> None:
        self.memory_held = cpu.tree_memory(self.server_pid)
        self.established = listeners.established_connections(self.port)


@dataclass(frozen=True)
class ClientShare:
    """What one client process of a cell drives."""

    pairs: int = 1
    idle_connections: int = 0
    receivers: int = 1
    role: str | None = None  # broadcast: "sender" (the sender and its receivers) or "receivers"
    ack_processes: int = 0  # broadcast sender: receivers processes that ack each message


def client_shares(settings: CellSettings) -> list[ClientShare]:
    """How a cell's work is spread over its client processes: pairs (or broadcast receivers) as evenly as possible,
    none without any. Idle connections are held by processes of their own (holders, --pairs 0) after the pairs'
    ones: the --client-processes the pairs leave over, at least one, so that the process measuring the pair pays
    nothing itself for the connections the server holds."""
    if settings.workload == "broadcast":
        receivers = pairs_per_process(settings.receivers, settings.client_processes)
        return [ClientShare(receivers=count, role="sender" if index == 0 else "receivers",
                            ack_processes=len(receivers) - 1 if index == 0 else 0)
                for index, count in enumerate(receivers)]
    pairs = [ClientShare(pairs=count) for count in pairs_per_process(settings.pairs, settings.client_processes)]
    if not settings.idle_connections:
        return pairs
    holders = max(1, min(settings.client_processes - len(pairs), settings.idle_connections))
    return pairs + [ClientShare(pairs=0, idle_connections=count)
                    for count in pairs_per_process(settings.idle_connections, holders)]


def _wait_at_barrier(barrier: StartBarrier, server_process: processes.ManagedProcess,
                     clients: list[processes.ManagedProcess], settings: CellSettings,
                     common: dict[str, Any]) -> dict[str, Any] | None:
    """None once the barrier has released every client; else the failed outcome, the barrier aborted.

    It fails when a client process ends before the release (a crash, or a client that does not wait at the
    barrier), or when not all are ready within settings.start_barrier_timeout_s.
    """
    deadline = time.monotonic() + settings.start_barrier_timeout_s + connecting_allowance_s(settings)
    while not barrier.released.wait(0.02):
        ended = [index for index, client in enumerate(clients) if client.popen.poll() is not None]
        if not ended and time.monotonic() < deadline:
            continue
        if barrier.abort():  # released in the meantime: go on and judge the clients as usual
            return None
        if not ended:
            tails = "\n".join(f"client process {index}: {client.stderr_tail(STDERR_TAIL_LINES)}"
                               for index, client in enumerate(clients))
            return dict(status="timeout", reason=f"start barrier: {barrier.ready} of {len(clients)} client "
                                                 f"processes reported ready within "
                                                 f"{settings.start_barrier_timeout_s:g} s",
                        client_stderr_tail=tails, **common)
        index = ended[0]
        code = clients[index].popen.returncode
        outcome = _judge_one(server_process, clients[index], code, common) or dict(
            status="client-failed", reason=f"it exited with code {code} without waiting for the go on {GO_FD_ENV} "
                                           "(docs/contract.md: the start barrier)",
            client_exit_code=code, client_stderr_tail=clients[index].stderr_tail(STDERR_TAIL_LINES), **common)
        outcome["reason"] = f"client process {index} ended before the start barrier released: {outcome['reason']}"
        return outcome
    return None


CONNECTIONS_PER_S_AT_LEAST = 200  # the slowest client still opens this many per second (its stall timeout aside)


def connecting_allowance_s(settings: CellSettings) -> float:
    """Time beyond the usual limits for opening many connections (idle ones, broadcast receivers) first."""
    extra = settings.idle_connections + (settings.receivers if settings.workload == "broadcast" else 0)
    return extra / CONNECTIONS_PER_S_AT_LEAST


def client_command(client: Implementation, settings: CellSettings, url: str, pairs: int,
                   project_root: Path, share: ClientShare | None = None) -> list[str]:
    argv = resolve_command(client, project_root, settings.python_executable) + [
        "--url", url,
        "--duration", str(settings.duration_s), "--warmup", str(settings.warmup_s),
        "--loop", loop_for(client, settings.loop),
        "--compression", settings.client_compression or settings.compression,
        "--payload-size", str(settings.payload_size), "--payload-kind", settings.payload_kind,
        "--stall-timeout", str(settings.stall_timeout_s)]
    if pairs != 1:
        argv += ["--pairs", str(pairs)]
    if settings.workload != "pingpong":
        argv += ["--workload", settings.workload]
    if settings.tls_ca:
        argv += ["--tls-ca", settings.tls_ca]
    share = share or ClientShare(pairs=pairs, idle_connections=settings.idle_connections,
                                 receivers=settings.receivers, role="sender" if settings.workload == "broadcast"
                                 else None)
    if share.role is not None:
        argv += ["--receivers", str(share.receivers), "--broadcast-role", share.role]
        if share.ack_processes:
            argv += ["--ack-processes", str(share.ack_processes)]
    if share.idle_connections:
        argv += ["--idle-connections", str(share.idle_connections)]
    if settings.rate is not None:
        argv += ["--rate", f"{settings.rate:g}"]
    return argv


def free_port_checked(host: str = "127.0.0.1", attempts: int = 5) -> int:
    """A free port, re-checked so a port another process grabbed in between is not handed to the server."""
    for _ in range(attempts):
        port = processes.free_port(host)
        if processes.port_is_free(port, host):
            return port
    return port


def diagnose_port(port: int, server_process: processes.ManagedProcess) -> str:
    """Why a server was not reachable on its port, as far as /proc tells: appended to the not-ready reason."""
    if server_process.popen.poll() is None:
        elsewhere = [f"{host}:{listened}" for host, listened in listeners.listeners_of_tree(server_process.pid)
                     if listened != port]
        if elsewhere:
            return f"; the server listens on {', '.join(elsewhere)}, not on the requested 127.0.0.1:{port}"
    owner = listeners.port_owner(port)
    if owner is not None and owner not in listeners.process_tree(server_process.pid):
        return f"; port {port} is already in use by another process (pid {owner})"
    return ""


def judge_outcome(server_process: processes.ManagedProcess, clients: list[processes.ManagedProcess],
                  codes: list[int], window: "WindowWatcher", common: dict[str, Any], settings: CellSettings,
                  held: HeldConnections | None = None) -> dict[str, Any]:
    """An attempt's outcome from its clients' exit codes and reports and the window's samples (status ok with every
    figure, or the first failure with its reason)."""
    reports = []
    for index, (client_process, client_code) in enumerate(zip(clients, codes)):
        outcome = _judge_one(server_process, client_process, client_code, common)
        if outcome is not None:
            if len(clients) > 1:
                outcome["reason"] = f"client process {index}: {outcome['reason']}"
            return outcome
        reports.append(parse_client_report(client_process.stdout_text())[0])
    figures: dict[str, Any] | None = None
    if settings.workload == "broadcast":
        try:
            report, figures = workload_figures.broadcast(reports)
        except workload_figures.WorkloadError as exc:
            return dict(status="client-failed", reason=str(exc), client_exit_code=max(codes),
                        client_report=workload_figures.without_timestamps(reports[0]), **common)
    else:
        measuring = [report for report in reports if not report.get("holder")]
        report = measuring[0] if len(measuring) == 1 else merge_reports(measuring)
        if settings.rate is not None:
            figures = {"open_loop": workload_figures.open_loop(measuring, settings.rate)}
        if held is not None:
            figures = (figures or {}) | {"idle": workload_figures.idle(reports, settings.idle_connections,
                                                                       held.memory_before, held.memory_held,
                                                                       held.established)}
            if figures["idle"]["opened"] != settings.idle_connections:
                return dict(status="client-failed", reason=f"idle connections: the clients held "
                                                           f"{figures['idle']['opened']} of "
                                                           f"{settings.idle_connections}",
                            client_exit_code=max(codes), client_report=report, **common)
    latency = report.get("latency") or {}
    histogram = latency.pop("hdr_histogram", None)
    value_counts = latency.pop("value_counts", None)
    if histogram is None and value_counts:
        histogram = histograms.encode_value_counts(value_counts)
    return dict(status="ok", reason=None, client_exit_code=max(codes),
                roundtrips=report["roundtrips"], elapsed_s=report["elapsed_s"],
                roundtrips_per_s=report["roundtrips_per_s"], latency_histogram=histogram,
                server_cpu_s=window.server_cpu_s, client_cpu_s=window.client_cpu_s,
                cpu_source=window.cpu_source.name if window.server_cpu_s is not None else None,
                server_minor_faults=window.server_minor_faults, client_minor_faults=window.client_minor_faults,
                cpu_steal_s=getattr(window, "cpu_steal_s", None),
                window_spread=window.spread,
                window_wall_s=window.wall_s, server_peak_rss_bytes=window.server_peak_rss_bytes,
                tcp_counters=window.tcp_counters, sockets=window.sockets, syscalls=window.syscalls,
                signal_sampling_s=window.sampling_s, client_report=report, workload_figures=figures, **common)


def merge_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One report for several client processes: rates and counts summed, histograms merged, each kept."""
    merged = {key: value for key, value in reports[0].items() if key not in ("latency", "connections")}
    merged["client_processes"] = len(reports)
    merged["roundtrips"] = sum(r["roundtrips"] for r in reports)
    merged["roundtrips_per_s"] = sum(r["roundtrips_per_s"] for r in reports)
    merged["elapsed_s"] = max(r["elapsed_s"] for r in reports)
    merged["pairs"] = sum(r.get("pairs", 1) for r in reports)
    merged["per_process"] = [{"pairs": r.get("pairs", 1), "roundtrips": r["roundtrips"],
                              "roundtrips_per_s": r["roundtrips_per_s"], "elapsed_s": r["elapsed_s"]}
                             for r in reports]
    merged["connections"] = [dict(c, process=index) for index, r in enumerate(reports)
                             for c in r.get("connections") or []]
    encoded = []
    for r in reports:
        latency = r.get("latency") or {}
        if latency.get("hdr_histogram"):
            encoded.append(latency["hdr_histogram"])
        elif latency.get("value_counts"):
            encoded.append(histograms.encode_value_counts(latency["value_counts"]))
    merged["latency"] = {"unit": "ns", "recorded": bool(encoded),
                         "hdr_histogram": histograms.merge(encoded).encode().decode("ascii") if encoded else None}
    return merged


def _judge_one(server_process: processes.ManagedProcess, client_process: processes.ManagedProcess,
               client_code: int, common: dict[str, Any]) -> dict[str, Any] | None:
    """The failed outcome of one client process, or None when its report is a success."""
    client_tail = client_process.stderr_tail(STDERR_TAIL_LINES)
    report, problem = parse_client_report(client_process.stdout_text())
    if problem:
        return dict(status="client-failed", reason=f"{problem} (exit code {client_code})",
                    client_exit_code=client_code, client_stderr_tail=client_tail, **common)
    server_alive = server_process.popen.poll() is None
    if report.get("error") or client_code != 0:
        reason = report.get("error") or f"client exited with code {client_code}"
        if not server_alive:
            reason = f"server exited with code {server_process.popen.returncode} during the run; client: {reason}"
        return dict(status="client-failed" if server_alive else "server-crashed", reason=reason,
                    client_exit_code=client_code, client_report=report, client_stderr_tail=client_tail, **common)
    if not report.get("roundtrips") and not report.get("holder"):
        return dict(status="client-failed", reason="client reported zero roundtrips", client_exit_code=client_code,
                    client_report=report, client_stderr_tail=client_tail, **common)
    return None


def parse_client_report(stdout: str) -> tuple[dict | None, str | None]:
    """The driver's one JSON object, or why stdout is not that."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None, "client printed no JSON on stdout"
    if len(lines) > 1:
        return None, f"client printed {len(lines)} lines on stdout; the contract is exactly one JSON object"
    try:
        report = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        return None, f"client stdout is not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(report, dict):
        return None, "client stdout is JSON but not an object"
    for key in ("roundtrips", "elapsed_s", "roundtrips_per_s"):
        if report.get("error") is None and not isinstance(report.get(key), (int, float)):
            return None, f"client report lacks the number '{key}'"
    return report, None


def _read_json_file(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


class WindowWatcher:
    """Reads the drivers' events and samples both sides when the measured window opens and closes.

    One thread reads: it times each event as it arrives and hands each READY_EVENT to on_ready (the start
    barrier). The other samples, per window: CPU and minor page faults of both sides' process trees, each CPU's
    steal time, the kernel's TCP counters, TCP_NODELAY of both sides' sockets as the kernel has it (forced on first when
    settings.force_nodelay), and strace counts when settings.trace_syscalls. With several client processes, the
    sampled window runs from the last one's start to the first one's end: the time when all of them measure
    (released together by the start barrier, their windows differ by `spread`). Sampling happens in the
    orchestrator, outside the processes measured.
    """

    def __init__(self, read_fd: int, server_pid: int | None, client_pids: list[int], port: int,
                 settings: CellSettings,
                 work_dir: Path, on_ready: Callable[[], None] | None = None,
                 window_processes: int | None = None) -> None:
        self.server_pid = server_pid
        # the processes whose window-start opens the sampled window (broadcast: only the sender measures one)
        self.window_processes = window_processes or len(client_pids)
        self.on_ready = on_ready  # called on each client's READY_EVENT (the start barrier counts them)
        self.ready_at: list[float] = []  # when each event arrived, on the orchestrator's monotonic clock
        self.starts_at: list[float] = []
        self.ends_at: list[float] = []
        self.client_pids = client_pids
        self.port = port
        self.settings = settings
        self.work_dir = work_dir
        self.cpu_source = cpu.cpu_source()
        self.server_cpu_s: float | None = None
        self.client_cpu_s: float | None = None
        self.server_minor_faults: int | None = None
        self.client_minor_faults: int | None = None
        self.cpu_steal_s: dict[str, float] | None = None
        self.wall_s: float | None = None
        self.server_peak_rss_bytes: int | None = None
        self.tcp_counters: dict[str, int] | None = None
        self.sockets: dict[str, Any] | None = None
        self.syscalls: dict[str, Any] | None = None
        self.sampling_s: float | None = None  # CPU time this thread spent sampling inside the window (at its start)
        # the window's edges on this host's wall clock (ns): a cluster run forwards them to the server's host
        self.start_wall_ns: int | None = None
        self.end_wall_ns: int | None = None
        # set once the window has closed and been sampled (or the events have ended without one): from then on the
        # orchestrator may start the next attempt's client without touching this window's figures
        self.ended = threading.Event()
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read, args=(read_fd,), daemon=True)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._reader.start()
        self._thread.start()

    def join(self) -> None:
        self._reader.join(15)
        self._thread.join(15)

    @property
    def spread(self) -> dict[str, Any] | None:
        """With several client processes, how far apart their readies, window starts and window ends came."""
        if len(self.client_pids) == 1 or self.window_processes == 1:
            return None
        return window_spread(self.ready_at, self.starts_at, self.ends_at, self.window_processes)

    def _read(self, read_fd: int) -> None:
        """Time each event as it arrives (sampling happens in the other thread) and count the readies."""
        try:
            with os.fdopen(read_fd, "rb") as stream:
                for line in stream:
                    arrived = time.monotonic()
                    event = line.strip().decode(errors="replace")
                    if event == READY_EVENT:
                        self.ready_at.append(arrived)
                        if self.on_ready is not None:
                            self.on_ready()
                        continue
                    (self.starts_at if event == WINDOW_START_EVENT else self.ends_at).append(arrived)
                    self._events.put(event)
        finally:
            self._events.put(None)

    def _trees(self) -> tuple[list[int], list[list[int]]]:
        """The server's tree and each client's tree of pids, from one pass over /proc."""
        trees = listeners.process_trees([pid for pid in (self.server_pid, *self.client_pids) if pid is not None])
        return trees.get(self.server_pid, []), [trees[pid] for pid in self.client_pids]

    def _inspect_sockets(self, server_tree: list[int], client_trees: list[list[int]], force: bool) -> None:
        # a server on another host (server_pid None): its own host reads its sockets
        server = ({"server": kernel_signals.inspect_sockets(server_tree, self.port, force)}
                  if self.server_pid is not None else {})
        self.sockets = server | {"client": self._client_sockets(client_trees, force)}

    def _inspect_pair_sockets_only(self, client_trees: list[list[int]]) -> None:
        """With idle connections held, only the measuring clients' sockets: borrowing the server's thousands (and
        the holders') would take longer than the window itself, inside it (signal_sampling_s said 0.5 s for
        10,000). The server's count is the kernel's, read before the go (workload_figures "idle")."""
        self.sockets = {"server": {"sockets": 0, "error": "not read with idle connections held (reading them all "
                                                          "would take longer than the window)"},
                        "client": self._client_sockets(client_trees[:self.window_processes], False)}

    def _client_sockets(self, client_trees: list[list[int]], force: bool) -> dict[str, Any]:
        return kernel_signals.merge_socket_readings(
            [kernel_signals.inspect_sockets(tree, self.port, force) for tree in client_trees], force)

    def _watch(self) -> None:
        start = None
        starts = ends = 0
        tracers: dict[str, SyscallTracer] = {}
        try:
            for event in iter(self._events.get, None):
                if event == WINDOW_START_EVENT:
                    starts += 1
                    if starts < self.window_processes:
                        continue
                    # Inside the measured window, so kept cheap (sampling_s records how cheap): CPU and
                    # counters first, then each connection's TCP_NODELAY (forced first, if asked).
                    sampling_began = time.thread_time()
                    self.start_wall_ns = time.time_ns()
                    server_tree, client_trees = self._trees()
                    client_pids = [pid for tree in client_trees for pid in tree]
                    start = (time.monotonic(), cpu.sample(server_tree, self.cpu_source),
                             cpu.sample(client_pids, self.cpu_source), kernel_signals.read_tcp_counters(),
                             cpu.minor_faults(server_tree), cpu.minor_faults(client_pids),
                             kernel_signals.read_cpu_steal())
                    if self.settings.idle_connections or self.settings.sample_server_memory:
                        self._inspect_pair_sockets_only(client_trees)
                    else:
                        self._inspect_sockets(server_tree, client_trees, force=self.settings.force_nodelay)
                    self.sampling_s = time.thread_time() - sampling_began
                    if self.settings.trace_syscalls:
                        tracers = {side: SyscallTracer(pid, self.work_dir / f"strace-{side}.txt")
                                   for side, pid in (("server", self.server_pid),
                                                     ("client", self.client_pids[0]))}
                        traced_from = time.monotonic()  # both tracers attached (or gave up)
                elif event == WINDOW_END_EVENT:
                    ends += 1
                    if ends >= self.window_processes and self.wall_s is not None:
                        self.ended.set()  # the last process measuring has closed its window too
                    if start is None or self.wall_s is not None:
                        continue
                    # the same pids as at the start; one that exited meanwhile drops out of the delta
                    server_end = cpu.sample(server_tree, self.cpu_source)
                    client_end = cpu.sample(client_pids, self.cpu_source)
                    counters_end = kernel_signals.read_tcp_counters()
                    faults_end = cpu.minor_faults(server_tree), cpu.minor_faults(client_pids)
                    self.cpu_steal_s = kernel_signals.steal_seconds(start[6], kernel_signals.read_cpu_steal())
                    self.wall_s = time.monotonic() - start[0]
                    self.end_wall_ns = time.time_ns()
                    if self.server_pid is not None:
                        self.server_cpu_s = cpu.cpu_delta(start[1], server_end)
                        self.server_minor_faults = cpu.faults_delta(start[4], faults_end[0])
                    self.client_cpu_s = cpu.cpu_delta(start[2], client_end)
                    self.client_minor_faults = cpu.faults_delta(start[5], faults_end[1])
                    self.tcp_counters = kernel_signals.counter_deltas(start[3], counters_end)
                    if tracers:
                        self._stop_tracers(tracers, time.monotonic() - traced_from)
                    tracers = {}
                    if self.server_pid is not None:
                        self.server_peak_rss_bytes = cpu.peak_rss_bytes(self.server_pid)
                    if ends >= self.window_processes:
                        self.ended.set()
        finally:
            if tracers:
                self._stop_tracers(tracers, None)
            self.ended.set()

    def _stop_tracers(self, tracers: dict[str, SyscallTracer], traced_wall_s: float | None) -> None:
        """Detach strace; traced_wall_s is how long both were attached, to turn counts into per-roundtrip figures."""
        self.syscalls = {}
        for side, tracer in tracers.items():
            counts = tracer.stop()
            self.syscalls[side] = ({"calls": counts, "traced_wall_s": traced_wall_s} if counts is not None
                                   else {"error": tracer.error})
