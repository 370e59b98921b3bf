"""A client program measured from outside (manifest `measure = "outside"`): a program as people write it, which knows
nothing of the contract. Its command gets the room's URL ({url}); it opens two connections and ping-pongs until it
is ended, printing nothing the suite reads.

The orchestrator starts it, waits until the kernel lists its two connections to the server, lets it warm up, and
opens and closes the measured window itself (the same WindowWatcher as for a driver, fed the window's events from
here). The roundtrips are counted from the kernel's counters of the program's two sockets (judge.judge_outside says
why that count is exact), read at the window's edges through pidfd_getfd; then the program is ended.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Callable

from pingpong.contract import WINDOW_END_EVENT, WINDOW_START_EVENT
from pingpong.harness.measure import judge
from pingpong.harness.measure.attempt_plan import (STDERR_TAIL_LINES, process_environment, process_name,
                                                   profiled_command, room_path, with_jit_warmup)
from pingpong.harness.measure.boundary import ClientFacts, Outcome
from pingpong.harness.measure.server import LocalServer
from pingpong.harness.measure.window import WindowWatcher
from pingpong.harness.measure.warmup_helpers import helpers_across_for
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import URL_PLACEHOLDER, Implementation, resolve_command
from pingpong.harness.system import kernel_signals, listeners, processes

CONNECTIONS = 2  # one pair: the program's two clients in one room
CONNECTION_POLL_S = 0.01  # how often the kernel's list of its connections is read while it connects
# A program's connections close as it exits, a moment before it is seen to have ended: one found with fewer than two
# at its warmup's end is given this long to end, and then it ended (with its code and last words), not closed one
EXIT_GRACE_S = 0.5


def outside_command(client: Implementation, settings: CellSettings, url: str, project_root: Path) -> list[str]:
    """The program's own command, with the room's URL where it says {url}: no contract flag is added."""
    return [part.replace(URL_PLACEHOLDER, url)
            for part in profiled_command(resolve_command(client, project_root, settings.python_executable), client,
                                         "client", settings)]


def measure_outside(started: LocalServer, client: Implementation, settings: CellSettings, repeat: int,
                    project_root: Path, client_cpus: set[int] | None,
                    running: list[processes.ManagedProcess],
                    spawn_next: Callable[[], None] | None = None) -> Outcome:
    """One attempt of a program measured from outside, on a started server; the caller stops what is in running.
    spawn_next, if given, runs once the program has been measured and ended (local.py: the next client ahead)."""
    server_facts = started.facts()
    number = max(1, started.turns)
    settings = with_jit_warmup(settings, client.runtime, started.runtime, number)
    url = started.base_url.replace("127.0.0.1", settings.client_host, 1) + room_path(repeat, number)
    process = processes.start(process_name(0, 1, number), outside_command(client, settings, url, project_root),
                              project_root, started.work_dir, cpus=client_cpus, env=process_environment(settings))
    running.append(process)

    def facts() -> ClientFacts:
        return ClientFacts(process.pid, process.popen.returncode, process.stderr_tail(STDERR_TAIL_LINES))

    connected, problem = await_connections(process, started.port, settings.ready_timeout_s)
    if problem is not None:
        return judge.outside_not_started(problem, connected, settings.ready_timeout_s, facts(), server_facts)
    if _ended_within(process, settings.warmup_s):
        return judge.outside_ended("during its warmup", facts(), server_facts)
    connected, problem = count_connections(process, started.port)  # one more may have opened after the first two
    if problem is None and connected < CONNECTIONS and _ended_within(process, EXIT_GRACE_S):
        return judge.outside_ended("during its warmup", facts(), server_facts)
    if problem is not None or connected != CONNECTIONS:
        return judge.outside_not_started(problem or ("too-many" if connected > CONNECTIONS else "closed-one"),
                                         connected, settings.ready_timeout_s, facts(), server_facts)
    read_fd, write_fd = os.pipe()
    window = WindowWatcher(read_fd, started.pid, [process.pid], started.port, settings, started.work_dir,
                           window_processes=1, count_connections=True,
                           runtimes=(started.runtime, client.runtime),
                           warmup_helpers=helpers_across_for(settings, started.pid, [process.pid]))
    try:
        os.write(write_fd, f"{WINDOW_START_EVENT}\n".encode())
        ended = _ended_within(process, settings.duration_s)
        os.write(write_fd, f"{WINDOW_END_EVENT}\n".encode())
    finally:
        os.close(write_fd)
    window.join()
    if ended:
        return judge.outside_ended("during the measured window", facts(), server_facts)
    samples = window.samples()
    processes.stop(process)
    if spawn_next is not None:
        spawn_next()
    return judge.judge_outside(samples, started.exit_code(), facts(), server_facts)


def _ended_within(process: processes.ManagedProcess, seconds: float) -> bool:
    """Whether the program ended within these seconds (else they have passed, and it runs on)."""
    try:
        processes.wait(process.popen, seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def count_connections(process: processes.ManagedProcess, port: int) -> tuple[int, str | None]:
    """How many connections to the server's port the program's process tree holds now (or why it is not known)."""
    tree = listeners.process_trees([process.pid]).get(process.pid, [process.pid])
    try:
        return len(kernel_signals.connection_counters(tree, port)), None
    except (OSError, ValueError) as exc:
        return 0, f"its sockets could not be read: {exc}"


def await_connections(process: processes.ManagedProcess, port: int, limit_s: float) -> tuple[int, str | None]:
    """Wait until the program's process tree holds CONNECTIONS connections to the server's port: how many it
    held, and None, or what went wrong instead ("exited", "too-few", "too-many", or a socket that could not be
    read)."""
    deadline = time.monotonic() + limit_s
    connected = 0
    while True:
        if process.popen.poll() is not None:
            return connected, "exited"
        connected, problem = count_connections(process, port)
        if problem is not None:
            return connected, problem
        if connected > CONNECTIONS:
            return connected, "too-many"
        if connected == CONNECTIONS:
            return connected, None
        if time.monotonic() >= deadline:
            return connected, "too-few"
        _ended_within(process, CONNECTION_POLL_S)
