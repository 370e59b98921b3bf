"""The engine's two interfaces: a Measurer starts servers and measures attempts on them (LocalMeasurer on this
machine, cluster.measurer.ClusterMeasurer on a cluster's hosts), and the ServerHandle it returns tells the engine
what it needs of a running server."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pingpong.harness.measure.boundary import Outcome
from pingpong.harness.results.records import Attempt
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import Implementation


class ServerHandle(Protocol):
    """A server started for a group of attempts, wherever it runs."""

    problem: Outcome | None  # None when it is ready and relays; else the outcome every attempt on it reports
    runtime: str | None  # its implementation's runtime (python, node, bun, native)

    @property
    def pid(self) -> int | None: ...

    def alive(self) -> bool: ...

    def exit_code(self) -> int | None:
        """Its exit code once it has exited; None while it runs."""

    def stderr_tail(self) -> str: ...


class Measurer(Protocol):
    def start(self, server: Implementation, settings: CellSettings, work_dir: Path,
              upcoming: list[tuple[Implementation, CellSettings, int]] | None = None) -> ServerHandle:
        """Start a server and check it (readiness, its port's owner, its relay). upcoming: the attempts that will
        run on it, in order, where clients can start ahead of their turn; None: each client starts at its turn."""

    def attempt_on(self, started: ServerHandle, client: Implementation, settings: CellSettings,
                   round_number: int) -> Attempt:
        """One attempt on a started server; every failure is an Attempt with its reason."""

    def stop(self, started: ServerHandle) -> int | None:
        """Stop the server (and what waits for it); its exit code."""

    def fresh_attempt(self, server: Implementation, client: Implementation, settings: CellSettings,
                      round_number: int) -> Attempt:
        """One attempt on a server started for it alone, stopped after it."""
