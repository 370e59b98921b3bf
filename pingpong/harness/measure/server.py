"""A server started on this machine for measuring: launched on a free port, probed until its first handshake, its
port's owner checked and its relay verified; the handle the engine holds while clients take their turns on it, and
the clients it starts ahead of their turn (clients_ahead.py)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pingpong.contract import EVENTS_FD_ENV, INFO_FILE_ENV, START_FD_ENV, WORKER_STATS_DIR_ENV
from pingpong.harness.measure import probe
from pingpong.harness.measure.attempt_plan import (ROOM_PROBE_TIMEOUT_S, STDERR_TAIL_LINES, client_command,
                                                   client_shares, process_environment, process_name, room_path,
                                                   room_probe_path, server_command, server_scheme, with_jit_warmup)
from pingpong.harness.measure.boundary import Outcome, ServerFacts, Turn, failed
from pingpong.harness.measure.clients_ahead import CLIENTS_AHEAD_AT_SERVER_START, WaitingClient, can_start_ahead
from pingpong.harness.settings.cell import CellSettings, by_worker, cpus_for, orchestrator_cpus, worker_cpu
from pingpong.harness.settings.catalog import takes_rooms_by_port
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.system import broker as redis_broker
from pingpong.harness.system import listeners, processes

# How long a server that may have crashed is given to end once a client failed: the kernel closes a dying process's
# sockets before it can be waited for, and under load the client saw the close, failed and ended first (a CI run by
# hand, 2026-11-29: "client-failed" where the crash was the cause).
SERVER_EXIT_GRACE_S = 0.5
WORKER_STATS_POLL_S = 0.01  # while waiting for every worker of a multi-worker server to say it serves


def room_probe(server: "LocalServer", settings: CellSettings) -> Outcome | None:
    """None when a long-lived server still completes a handshake; else a not-ready outcome with the reason."""
    code = server.exit_code()
    if code is not None:
        return failed("server-crashed", f"the server exited with code {code} before this attempt")
    try:
        server.room_probes += 1
        with probe.open_connection(server.base_url, room_probe_path(server.room_probes), ROOM_PROBE_TIMEOUT_S,
                                   settings.tls_ca):
            return None
    except Exception as exc:
        return failed("not-ready", f"room probe before the client: {type(exc).__name__}: {exc}")


@dataclass
class LocalServer:
    """A server process started on this machine for measuring (the engine's ServerHandle): where it listens, and
    whether it passed readiness and verification.

    problem is None when it is ready and relays as the contract says; else the failed outcome (not-ready,
    port-conflict, verification-failed) that every attempt on it reports.
    """

    process: processes.ManagedProcess
    base_url: str
    port: int
    info_path: Path
    work_dir: Path
    cpus: set[int] | None
    ready_after_s: float | None = None
    problem: Outcome | None = None
    # Attempts that have taken their turn on this server. An attempt's client is numbered by its turn (its room and
    # its jit warmup depend on it), so a long-lived server never reuses a room.
    turns: int = 0
    room_probes: int = 0  # the room probes' rooms are numbered per server too
    runtime: str | None = None  # the server implementation's runtime (python, node, bun, native)
    # Starting clients ahead of their turn (spawn_ahead): the attempts still to come on this server, in order, as
    # (client, settings, round); the client processes started for some of them, in the same order, each loaded and
    # waiting at its start gate; and how many of the upcoming attempts, from the first, were considered for one.
    upcoming: list[tuple[Implementation, CellSettings, int]] = field(default_factory=list)
    waiting: list[WaitingClient] = field(default_factory=list)
    considered_ahead: int = 0
    project_root: Path | None = None
    # --workers: the Redis broker started for this server (N > 1), and the folder where each worker writes its
    # counts (a server with the manifest's "workers" feature, any N); stop_server() stops the broker too
    broker: redis_broker.Broker | None = None
    worker_stats_dir: Path | None = None
    workers: int = 1
    # --room-placement room: each worker's own port, worker i's at index i (PORT+1+i), read back from what the
    # workers wrote once they serve (wait_for_workers); [] with the kernel's placement
    worker_ports: list[int] = field(default_factory=list)

    def worker_url(self, index: int) -> str:
        """The URL of worker `index`'s own port (placement by room), as base_url names the shared one."""
        return self.base_url.rsplit(":", 1)[0] + f":{self.worker_ports[index]}"

    def take_turn(self, client: Implementation, settings: CellSettings, repeat: int) -> WaitingClient | None:
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

    # -- the ServerHandle the engine reads
    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.popen.poll() is None

    def exit_code(self) -> int | None:
        """Its exit code once it has exited; None while it runs."""
        return self.process.popen.poll()

    def exit_code_after_a_failed_client(self) -> int | None:
        """exit_code, once a client has failed: a server that crashes closes its sockets before it ends, so its
        client can fail and end first; it is given up to SERVER_EXIT_GRACE_S to end, or it is still running."""
        try:
            processes.wait_exited(self.process.popen, SERVER_EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        return self.exit_code()

    def stderr_tail(self) -> str:
        return self.process.stderr_tail(STDERR_TAIL_LINES)

    def facts(self) -> ServerFacts:
        """What an attempt on it records of the server: when it was ready, what it said about itself."""
        return ServerFacts(ready_after_s=self.ready_after_s, info=_read_json_file(self.info_path))

    def turn(self, repeat: int, started_at: str, client_cpus: set[int] | None, placement: str | None = None) -> Turn:
        return Turn(repeat=repeat, started_at=started_at, port=self.port, server_pid=self.process.pid,
                    server_cpus=sorted(self.cpus) if self.cpus else None,
                    client_cpus=sorted(client_cpus) if client_cpus else None, cpu_placement=placement)


def start_server(server: Implementation, settings: CellSettings, project_root: Path, work_dir: Path,
                 server_cpus: set[int] | None,
                 upcoming: list[tuple[Implementation, CellSettings, int]] | None = None,
                 clients_ahead: int = CLIENTS_AHEAD_AT_SERVER_START) -> LocalServer:
    """Start a server, wait for its first handshake, check who holds its port, and verify its relay.

    upcoming: the attempts that will run on it, in order (client, settings, round), to start their clients ahead
    of their turn (spawn_ahead): the first clients_ahead of them load on the client's CPUs while the server gets
    ready.

    Once this returns, the caller owns the process and stops it (stop_server, after discard_waiting) in every
    case; if this raises (an interruption during the probe, an OS error, a broker that did not answer:
    broker.BrokerNotReady), it has stopped the processes itself.
    """
    started = launch_server(server, settings, project_root, work_dir, server_cpus)
    on_ready = None
    try:
        if upcoming:
            started.upcoming, started.project_root = list(upcoming), project_root
            client_cpus = cpus_for(settings)[1]
            # same-cpu: clients load beside the orchestrator, off the CPU the attempts measure on
            loading_cpus = orchestrator_cpus(settings) or client_cpus
            spawn_ahead(started, loading_cpus, clients_ahead)
            if server_cpus and client_cpus and server_cpus != client_cpus and len(started.waiting) > 1:
                # once the server is ready, its CPUs idle while its relay is verified: clients still loading may
                # use them too (at its turn, each client moves to the client's CPUs)
                on_ready = lambda: [processes.pin_threads(waiting.process.pid, server_cpus | client_cpus)  # noqa
                                    for waiting in started.waiting]
        started.problem = _check_server(started, settings, on_ready)
    except BaseException:
        with processes.interrupts_deferred():
            started.discard_waiting()
            stop_server(started)
        raise
    return started


def stop_server(started: LocalServer) -> int | None:
    """Stop the server's process group, then its broker (if it has one); the server's exit code. Callers hold
    processes.interrupts_deferred() around it, as around processes.stop."""
    try:
        return processes.stop(started.process)
    finally:
        if started.broker is not None:
            started.broker.stop()


def launch_server(server: Implementation, settings: CellSettings, project_root: Path, work_dir: Path,
                  server_cpus: set[int] | None, host: str = "127.0.0.1") -> LocalServer:
    """Start a server listening on host (only there) at a free port; not yet probed. The caller stops it
    (stop_server). With settings.workers above 1 and a server whose workers are processes (the "workers" feature),
    its Redis broker first (on the server's CPUs), named by --broker; such a server writes its workers' counts to a
    folder of the work folder. A server with the "threads" feature runs its N threads on the server's CPUs."""
    broker = (redis_broker.start_broker(work_dir, server_cpus)
              if settings.workers > 1 and "workers" in server.features else None)
    try:
        # by room, worker i also listens on PORT+1+i: the run reserves PORT..PORT+N
        port = free_port_checked(host, ports=1 + (settings.workers if by_room(server, settings) else 0))
        info_path = work_dir / "server-info.json"
        environment = {INFO_FILE_ENV: str(info_path)}
        stats_dir = None
        if "workers" in server.features or by_room(server, settings):  # threads by room write counts too
            stats_dir = work_dir / "worker-stats"
            stats_dir.mkdir(exist_ok=True)
            environment[WORKER_STATS_DIR_ENV] = str(stats_dir)
        server_argv = server_command(server, settings, project_root, host, port, broker.url if broker else None,
                                     worker_ports=by_room(server, settings))
        process = processes.start("server", server_argv, project_root, work_dir,
                                  env=process_environment(settings, **environment), cpus=server_cpus)
    except BaseException:
        if broker is not None:
            with processes.interrupts_deferred():
                broker.stop()
        raise
    return LocalServer(process, f"{server_scheme(server, settings)}://{host}:{port}", port, info_path, work_dir,
                       server_cpus, runtime=server.runtime, broker=broker, worker_stats_dir=stats_dir,
                       workers=settings.workers)


def _check_server(started: LocalServer, settings: CellSettings,
                  on_ready: Callable[[], Any] | None = None) -> Outcome | None:
    """None when the server is ready, holds its port and relays as the contract says; else status and reason.
    on_ready, if given, runs once its first handshake has succeeded."""
    process, port = started.process, started.port
    try:
        started.ready_after_s = round(probe.wait_until_ready(started.base_url, process, settings.ready_timeout_s,
                                                             settings.tls_ca), 4)
    except probe.NotReady as exc:
        return failed("not-ready", str(exc) + diagnose_port(port, process))
    if started.worker_stats_dir is not None:
        problem = wait_for_workers(started, settings.ready_timeout_s, by_worker(settings))
        if problem is None and settings.room_placement == "room":
            problem = check_worker_ports(started, settings)
        if problem:
            return failed("not-ready", problem)
    if on_ready is not None:
        on_ready()
    owner = listeners.port_owner(port)
    if owner is not None and owner not in listeners.process_tree(process.pid):
        return failed("port-conflict", f"port {port} answered, but it is held by another process (pid {owner}), "
                                       f"not by the server")
    problem = probe.verify_relay(started.base_url, settings.tls_ca, settings.relay_silence_s)
    if problem:
        return failed("verification-failed", problem, ServerFacts(ready_after_s=started.ready_after_s))
    return None


def worker_counts(started: LocalServer) -> list[dict[str, Any]]:
    """What each worker of a server with the "workers" feature wrote (kit/worker_rooms.py), by pid."""
    if started.worker_stats_dir is None:
        return []
    found = [_read_json_file(path) for path in sorted(started.worker_stats_dir.glob("worker-*.json"))]
    return sorted((record for record in found if record),
                  key=lambda record: (record.get("pid", 0), record.get("own_port") or 0))  # a threads server: by port


def wait_for_workers(started: LocalServer, timeout_s: float, by_worker_cpu: bool = False) -> str | None:
    """None once every worker says it serves (subscribed to the broker when there is one); then each worker is
    pinned to one of the server's CPUs, in turn, when it has more than one (by_worker_cpu: placement same-cpu by
    worker, worker i on settings/cell.worker_cpu(i)). Else why not, in one line. The first
    handshake alone does not show it: the kernel (or the cluster's primary) hands connections to whichever worker
    listens, so a run could start while one worker takes them all."""
    deadline = time.monotonic() + timeout_s
    while len(worker_counts(started)) < started.workers:
        code = started.exit_code()
        if code is not None:
            return f"the server exited with code {code} before its {started.workers} workers served"
        if time.monotonic() > deadline:
            return (f"{len(worker_counts(started))} of its {started.workers} workers said they serve within "
                    f"{timeout_s:g} s")
        time.sleep(WORKER_STATS_POLL_S)
    cpus = sorted(started.cpus or ())
    records = worker_counts(started)
    if by_worker_cpu:  # worker i (its own port PORT+1+i) on worker_cpu(i), beside the clients of its rooms
        for record in records:  # a worker without its port is left where it is: check_worker_ports says why
            if isinstance(record.get("own_port"), int):
                pin_worker(record, {worker_cpu(record["own_port"] - started.port - 1)})
    elif len(cpus) > 1:
        for index, record in enumerate(records):
            pin_worker(record, {cpus[index % len(cpus)]})
    started.worker_ports = sorted(record["own_port"] for record in records if record.get("own_port"))
    return None


def pin_worker(record: dict[str, Any], cpus: set[int]) -> None:
    """A worker on cpus: a process with every thread of it, or a thread of a threads server (its record's tid)."""
    if isinstance(record.get("tid"), int):
        try:
            os.sched_setaffinity(record["tid"], cpus)
        except OSError:
            pass  # it has ended: its attempt says so
    else:
        processes.pin_threads(record["pid"], cpus)


def by_room(server: Implementation, settings: CellSettings) -> bool:
    """Whether the server's workers each listen on a port of their own too (--worker-ports): placement by room."""
    return settings.room_placement == "room" and takes_rooms_by_port(server)


def check_worker_ports(started: LocalServer, settings: CellSettings) -> str | None:
    """None when worker i said it listens on PORT+1+i, each of the N, and each completes a handshake there; else
    why not, in one line."""
    expected = [started.port + 1 + index for index in range(started.workers)]
    if started.worker_ports != expected:
        return (f"--room-placement room: its workers said they listen on ports {started.worker_ports or 'none'}, "
                f"not {expected[0]}-{expected[-1]}")
    for index in range(started.workers):
        try:
            with probe.open_connection(started.worker_url(index), "/__readiness_probe__", ROOM_PROBE_TIMEOUT_S,
                                       settings.tls_ca):
                pass
        except Exception as exc:  # noqa: BLE001 - any failure to connect is the reason
            return f"worker {index}'s own port {started.worker_ports[index]}: {type(exc).__name__}: {exc}"
    return None


FIRST_RANGE_PORT = 10000  # a range of ports for a server's workers starts at or above this


def free_port_checked(host: str = "127.0.0.1", attempts: int = 5, ports: int = 1) -> int:
    """A free port, re-checked so a port another process grabbed in between is not handed to the server; with
    ports above 1, the next ports - 1 are free too (a range the server's workers use).

    A range lies below the kernel's ephemeral ports (ip_local_port_range) when there is room: the workers bind
    PORT+1.. a second or more after the check, and any connect() meanwhile (a readiness probe, another run's
    clients) takes its local port from the ephemeral range, so it could take one of them there but not here."""
    low, _ = processes.ephemeral_port_range()
    if ports > 1 and low - ports >= FIRST_RANGE_PORT:
        for _ in range(attempts * 20):
            port = random.randrange(FIRST_RANGE_PORT, low - ports + 1)  # port + ports - 1 < low
            if all(processes.port_is_free(port + offset, host) for offset in range(ports)):
                return port
    for _ in range(attempts * ports):
        port = processes.free_port(host)
        if port + ports <= 65536 and all(processes.port_is_free(port + offset, host) for offset in range(ports)):
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


def _read_json_file(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def spawn_ahead(server_under_test: LocalServer, loading_cpus: set[int] | None, clients: int = 1) -> None:
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


def _start_waiting(server_under_test: LocalServer, client: Implementation, base_settings: CellSettings,
                   repeat: int, loading_cpus: set[int] | None, place: int) -> WaitingClient:
    """Start the client of the upcoming attempt at `place` (0: the next one) and add it to the server's waiting
    clients; it is numbered by the turn that attempt will take."""
    number = server_under_test.turns + 1 + place
    settings = with_jit_warmup(base_settings, client.runtime, server_under_test.runtime, number)
    share = client_shares(settings)[0]
    client_url = server_under_test.base_url.replace("127.0.0.1", settings.client_host, 1)
    room = room_path(repeat, number)
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
            process = processes.start(process_name(0, 1, number), argv,
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
