"""Clients started ahead of their turn: each loads while the server starts (or the attempt before it ends), says
ARMED_EVENT on its events pipe and waits at its start gate, before any connection, until its attempt gives the go.
LocalServer (server.py) starts them (spawn_ahead) and holds them in its waiting list."""

from __future__ import annotations

import math
import os
import select
import time
from dataclasses import dataclass

from pingpong.contract import ARMED_EVENT
from pingpong.harness.measure.attempt_plan import client_shares
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.system import processes

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
