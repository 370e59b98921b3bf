"""Measuring on this machine: LocalMeasurer, the engine's Measurer here. An attempt starts its client processes (or
gives the go to one started ahead of its turn), watches their window, waits for them within their limit, and hands
what they left (typed records, boundary.py) to the judge."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from pingpong.contract import ACK_FD_ENV, EVENTS_FD_ENV, GO_FD_ENV, GO_LINE
from pingpong.harness.analysis.workers import attempt_workers_record
from pingpong.harness.measure import judge
from pingpong.harness.measure.attempt_plan import (STDERR_TAIL_LINES, barrier_limit_s, client_command, client_limit_s,
                                                   client_shares, pair_rooms, process_environment, process_name,
                                                   process_worker, room_path, window_processes, with_jit_warmup)
from pingpong.harness.measure.boundary import (ClientFacts, ClientRun, Outcome, ServerFacts, Turn, attempt_from,
                                               failed)
from pingpong.harness.measure.clients_ahead import WaitingClient
from pingpong.harness.measure.outside import measure_outside
from pingpong.harness.measure.server import (LocalServer, room_probe, spawn_ahead, start_server, stop_server,
                                             worker_counts)
from pingpong.harness.measure.start_barrier import StartBarrier
from pingpong.harness.measure.warmup_helpers import (HelpersAcross, HelpersStayPut, WarmupHelpers, helpers_across_for,
                                                     off_reason)
from pingpong.harness.measure.window import HeldConnections, WindowWatcher
from pingpong.harness.results.records import Attempt
from pingpong.harness.settings.catalog import PROJECT_ROOT
from pingpong.harness.settings.cell import (CellSettings, client_process_cpus, cpus_for, orchestrator_cpus,
                                            placement_of)
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.system import host_sentinel, processes, work_dirs
from pingpong.harness.system.broker import BrokerNotReady


class LocalMeasurer:
    """The engine's Measurer on this machine (measure/measurer.py; tests of the engine's logic pass a fake)."""

    def start(self, server: Implementation, settings: CellSettings, work_dir: Path,
              upcoming: list[tuple[Implementation, CellSettings, int]] | None = None) -> LocalServer:
        """upcoming: the attempts that will run on this server, in order, to start their clients ahead of their
        turn (server.spawn_ahead); None: each client starts at its turn."""
        server_cpus, _ = cpus_for(settings)
        return start_server(server, settings, PROJECT_ROOT, work_dir, server_cpus, upcoming)

    def attempt_on(self, started: LocalServer, client: Implementation, settings: CellSettings,
                   round_number: int) -> Attempt:
        return run_attempt_on(started, client, settings, round_number, PROJECT_ROOT)

    def stop(self, started: LocalServer) -> int | None:
        with processes.interrupts_deferred():
            started.discard_waiting()
            return stop_server(started)

    def fresh_attempt(self, server: Implementation, client: Implementation, settings: CellSettings,
                      round_number: int) -> Attempt:
        return run_attempt(server, client, settings, round_number, PROJECT_ROOT)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _orchestrator_error(exc: Exception) -> Outcome:
    return failed("error", f"orchestrator: {type(exc).__name__}: {exc}")


def run_attempt(server: Implementation, client: Implementation, settings: CellSettings, repeat: int,
                project_root: Path) -> Attempt:
    """Measure one repeat of a cell on a server started for it; every failure becomes an Attempt with a reason."""
    server_cpus, client_cpus = cpus_for(settings)
    with work_dirs.temporary("pingpong-cell-") as work:
        started_at = _now()
        try:
            started = start_server(server, settings, project_root, Path(work), server_cpus)
        except BrokerNotReady as exc:  # --workers: no broker, no server; the run goes on
            return attempt_from(Turn(repeat, started_at), failed("not-ready", f"the Redis broker: {exc}"))
        running: list[processes.ManagedProcess] = []
        try:
            with processes.this_process_on(orchestrator_cpus(settings)):
                outcome = started.problem or _measure_client(started, client, settings, repeat, project_root,
                                                             client_cpus, running)
        except Exception as exc:  # a bug or an OS error in one cell must not end the run
            outcome = _orchestrator_error(exc)
        finally:
            with processes.interrupts_deferred():
                for process in running:
                    processes.stop(process)
                server_code = stop_server(started)
                host_sentinel.close_all()  # an attempt on a server of its own ends its window's sentinels too
        unclean_stop = server_code not in processes.CLEAN_EXIT_CODES  # kept: why it did not stop cleanly
        if (not outcome.ok or unclean_stop) and outcome.server.stderr_tail is None:
            outcome = replace(outcome, server=replace(outcome.server, stderr_tail=started.stderr_tail()))
        attempt = attempt_from(started.turn(repeat, started_at, client_cpus, placement_of(settings)), outcome,
                               server_code)
        if started.worker_stats_dir is None:
            return attempt
        return replace(attempt, workers=workers_record(started, outcome, settings, repeat))


def workers_record(started: LocalServer, outcome: Outcome, settings: CellSettings | None = None,
                   repeat: int = 1) -> dict:
    """The attempt's `workers` record (analysis/workers.attempt_workers_record) from this machine's server: its
    workers' counts, its broker, and the outcome's window."""
    rooms = (pair_rooms(settings, repeat, max(1, started.turns))
             if settings is not None and settings.workload == "pingpong" and settings.rate is None else None)
    return attempt_workers_record(started.workers, started.broker.record() if started.broker is not None else None,
                                  worker_counts(started), outcome, rooms,
                                  settings.room_placement if settings is not None else "kernel",
                                  started.worker_ports)


def run_attempt_on(started: LocalServer, client: Implementation, settings: CellSettings, repeat: int,
                   project_root: Path) -> Attempt:
    """Measure one repeat of a cell on a server that is already running (started and verified by start_server).

    First a room probe (one handshake in a room of its own) shows the server still answers; then the client runs
    in a room of its own. The server is left running, so server_exit_code stays None (the caller stops the server
    with processes.stop and has its exit code then).
    """
    server_cpus, client_cpus = cpus_for(settings)
    started_at = _now()
    running: list[processes.ManagedProcess] = []
    waiting = started.take_turn(client, settings, repeat)
    # the next client loads on the server's CPUs while this one finishes (moved to the client's before its go);
    # same-cpu: beside the orchestrator, off the CPU this attempt measures on
    loading_cpus = orchestrator_cpus(settings) or server_cpus
    spawn_next = (lambda: spawn_ahead(started, loading_cpus)) if started.upcoming else None
    try:
        with processes.this_process_on(orchestrator_cpus(settings)):
            outcome = started.problem or room_probe(started, settings)
            if outcome is None:
                started.settle_waiting(settings.ready_timeout_s)  # none may be loading during the window
                outcome = _measure_client(started, client, settings, repeat, project_root, client_cpus, running,
                                          waiting, spawn_next)
    except Exception as exc:
        outcome = _orchestrator_error(exc)
    finally:
        with processes.interrupts_deferred():
            for process in running:
                processes.stop(process)
            if waiting is not None:  # used (its process is in running) or not (a server problem, a failed probe)
                waiting.close()
                processes.stop(waiting.process)
    return attempt_from(started.turn(repeat, started_at, client_cpus, placement_of(settings)), outcome)


def _measure_client(started: LocalServer, client: Implementation, settings: CellSettings, repeat: int,
                    project_root: Path, client_cpus: set[int] | None, running: list[processes.ManagedProcess],
                    waiting: WaitingClient | None = None, spawn_next: Callable[[], None] | None = None) -> Outcome:
    """Run the attempt's client (started here, or waiting at its start gate), judge it. spawn_next, if given, runs
    once its window has closed (and been sampled): it starts the next attempt's client ahead of its turn."""
    if waiting is not None:
        return _measure_waiting_client(started, waiting, client_cpus, running, spawn_next, client.runtime)
    if client.outside:
        return measure_outside(started, client, settings, repeat, project_root, client_cpus, running, spawn_next)
    server_facts = started.facts()
    number = max(1, started.turns)  # its turn (take_turn counts them)
    settings = with_jit_warmup(settings, client.runtime, started.runtime, number)
    shares = client_shares(settings)
    held = (HeldConnections(started.pid, started.port)
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
            url = client_base_url(started, index, settings.client_host) + room_path(repeat, number, index, len(shares),
                                                                                   settings.workload)
            argv = client_command(client, settings, url, share.pairs, project_root, share)
            fds = {EVENTS_FD_ENV: write_fd} | ({GO_FD_ENV: barrier.read_fds[index]} if barrier else {}) | (
                {ACK_FD_ENV: ack_fds[0] if share.role == "sender" else ack_fds[1]} if ack_fds else {})
            cpus = client_process_cpus(settings, process_worker(index, max(1, len(started.worker_ports))),
                                       client_cpus)
            clients.append(processes.start(process_name(index, len(shares), number), argv, project_root,
                                           started.work_dir, cpus=cpus, pass_fds=tuple(fds.values()),
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
    window = WindowWatcher(read_fd, started.pid, [c.pid for c in clients], started.port, settings,
                           started.work_dir, on_ready=barrier.arrived if barrier else None,
                           window_processes=window_processes(settings, shares),
                           runtimes=(started.runtime, client.runtime), broker=started.broker,
                           warmup_helpers=warmup_helpers_for(settings, [c.pid for c in clients], client_cpus,
                                                            started))
    if barrier:
        try:
            problem = _wait_at_barrier(barrier, started, clients, settings, server_facts)
        finally:
            barrier.abort()  # closes the go pipes if the wait ended any other way than by the go
        if problem:
            for other in clients:
                processes.stop(other)
            window.join()
            return problem
    return _await_clients(started, clients, settings, window, server_facts, held, spawn_next)


def warmup_helpers_for(settings: CellSettings, client_pids: list[int], client_cpus: set[int] | None,
                       started: LocalServer | None = None) -> WarmupHelpers | HelpersStayPut | HelpersAcross:
    """The client's helper threads over its warm-up (measure/warmup_helpers.py), or why they stay on its CPU; with
    placement helpers-across, both sides' helper threads on the other side's CPUs."""
    if started is not None and (across := helpers_across_for(settings, started.pid, client_pids)) is not None:
        return across
    spare = orchestrator_cpus(settings)
    off = off_reason(settings.warmup_helpers, len(client_pids), spare, client_cpus, settings.warmup_s)
    return HelpersStayPut(off) if off else WarmupHelpers(client_pids[0], client_cpus, spare, settings.warmup_s)


def client_base_url(started: LocalServer, index: int, client_host: str = "127.0.0.1") -> str:
    """Where client process `index` connects: the server's shared port, or with placement by room its worker's own
    (attempt_plan.process_worker)."""
    url = started.worker_url(process_worker(index, len(started.worker_ports))) if started.worker_ports \
        else started.base_url
    return url.replace("127.0.0.1", client_host, 1)


def _measure_waiting_client(started: LocalServer, waiting: WaitingClient, client_cpus: set[int] | None,
                            running: list[processes.ManagedProcess],
                            spawn_next: Callable[[], None] | None, client_runtime: str) -> Outcome:
    """The attempt of a client started ahead of its turn: once it has loaded, it moves to the client's CPUs and
    gets its go; from there on it is measured as any other."""
    settings, process = waiting.settings, waiting.process
    running.append(process)
    server_facts = started.facts()
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
    if not_armed not in (None, "exited"):  # "exited": the watcher sees the end, the judge tells why it ended
        os.close(events_fd)
        processes.stop(process)
        return Outcome("timeout", f"client process started ahead of its turn did not load within "
                                  f"{settings.ready_timeout_s:g} s ({not_armed})",
                       ClientFacts(process.pid, process.popen.returncode, process.stderr_tail(STDERR_TAIL_LINES)),
                       server_facts)
    window = WindowWatcher(events_fd, started.pid, [process.pid], started.port, settings, started.work_dir,
                           window_processes=1, runtimes=(started.runtime, client_runtime), broker=started.broker,
                           warmup_helpers=warmup_helpers_for(settings, [process.pid], client_cpus, started))
    return _await_clients(started, [process], settings, window, server_facts, None, spawn_next)


def _client_run(index: int, process: processes.ManagedProcess) -> ClientRun:
    return ClientRun(index, process.pid, process.popen.returncode, process.stdout_text(),
                     process.stderr_tail(STDERR_TAIL_LINES))


def _await_clients(started: LocalServer, clients: list[processes.ManagedProcess], settings: CellSettings,
                   window: WindowWatcher, server_facts: ServerFacts, held: HeldConnections | None,
                   spawn_next: Callable[[], None] | None) -> Outcome:
    """Wait for the client processes to end (within their limit), then judge the attempt."""
    limit_s = client_limit_s(settings)
    deadline = time.monotonic() + limit_s
    if spawn_next is not None:
        window.ended.wait(max(0.0, deadline - time.monotonic()))
        spawn_next()
    for index, client_process in enumerate(clients):
        try:  # not reaped before the window's end sample: a client that exits as its window ends (the C and native
            # clients do) would drop out of the CPU it reads, and the clients' CPU read 0 under load
            if not processes.wait_exited(client_process.popen, max(0.1, deadline - time.monotonic())):
                client_process.popen.wait(max(0.1, deadline - time.monotonic()))  # no pidfd: reaped, as before
        except subprocess.TimeoutExpired:
            for other in clients:
                processes.stop(other)
            window.join()
            return judge.client_timed_out(_client_run(index, client_process), len(clients), limit_s,
                                          clients[0].pid, server_facts)
    window.join()
    for client_process in clients:
        client_process.popen.wait()
    runs = [_client_run(index, process) for index, process in enumerate(clients)]
    failed = any(run.exit_code != 0 for run in runs)  # a client that reports an error exits 1 (the contract)
    server_exit_code = started.exit_code_after_a_failed_client() if failed else started.exit_code()
    return judge.judge_attempt(runs, server_exit_code, window.samples(), settings, server_facts,
                               held.sample() if held else None)


def _wait_at_barrier(barrier: StartBarrier, started: LocalServer, clients: list[processes.ManagedProcess],
                     settings: CellSettings, server_facts: ServerFacts) -> Outcome | None:
    """None once the barrier has released every client; else the failed outcome, the barrier aborted.

    It fails when a client process ends before the release (a crash, or a client that does not wait at the
    barrier), or when not all are ready within the barrier's limit (barrier_limit_s).
    """
    limit_s = barrier_limit_s(settings)
    deadline = time.monotonic() + limit_s
    while not barrier.released.wait(0.02):
        ended = [index for index, client in enumerate(clients) if client.popen.poll() is not None]
        if not ended and time.monotonic() < deadline:
            continue
        if barrier.abort():  # released in the meantime: go on and judge the clients as usual
            return None
        if not ended:
            return judge.barrier_timed_out(barrier.ready, len(clients), limit_s,
                                           [client.stderr_tail(STDERR_TAIL_LINES) for client in clients],
                                           clients[0].pid, server_facts)
        return judge.ended_before_release(_client_run(ended[0], clients[ended[0]]),
                                          started.exit_code_after_a_failed_client(), clients[0].pid, server_facts)
    return None
