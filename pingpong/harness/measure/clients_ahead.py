"""Clients started ahead of their turn: each loads while the server starts (or the attempt before it ends), says
ARMED_EVENT on its events pipe and waits at its start gate, before any connection, until its attempt gives the go."""

from __future__ import annotations

import math
import os
import select
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pingpong.contract import ARMED_EVENT, EVENTS_FD_ENV, START_FD_ENV
from pingpong.harness.measure.attempt_plan import (client_command, client_shares, process_environment, process_name,
                                                   room_path, with_jit_warmup)
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.system import processes

if TYPE_CHECKING:  # server.py starts clients ahead through this module
    from pingpong.harness.measure.server import LocalServer


# How many of a server's clients start ahead while the server itself starts: each loads, then waits at its start
# gate until its turn. While the server imports, gets ready and has its relay verified (about 0.4-0.7 s, 0.35 s of
# it watching for stray messages, when the server's CPU idles too), the CPUs load a whole group of clients
# (0.03-0.24 s each), which otherwise would load one by one between attempts, each while the attempt before it
# closes. A server's later clients, if any, start one at a time after each window.
CLIENTS_AHEAD_AT_SERVER_START = 8


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


def spawn_ahead(server_under_test: "LocalServer", loading_cpus: set[int] | None, clients: int = 1) -> None:
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


def _start_waiting(server_under_test: "LocalServer", client: Implementation, base_settings: CellSettings,
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
