"""A client's helper threads during its warm-up: on the orchestrator's spare CPU, back on the measured CPU before the
window (--warmup-helpers spare, the default; `measured` keeps every thread on the measured CPU throughout).

A JIT runtime compiles its hot code on helper threads (V8's and JavaScriptCore's compiler and collector threads).
With both sides of a same-cpu cell on one CPU, the ping-pong keeps that CPU busy, and those threads wait for it: on
2026-11-29 a Node.js client warmed up for the default 0.5 s measured a quarter to a half below the same client once
its helper threads had had the orchestrator's idle CPU during the warm-up (benchmarks/warmup_helpers.py,
docs/methodology.md, "Helper threads during the warm-up"). So when the client says it is ready (every connection
open, its warm-up starting), every thread of it but its main one moves to the spare CPU; BACK_BEFORE_WINDOW_S
before its warm-up ends, all of them are back on the measured CPU, and the window is measured as before: every
thread of both sides on the one CPU. A single-threaded client has nothing to move.

The record each attempt keeps (Attempt.warmup_helpers, docs/results-format.md): {"moved": threads moved off,
"off_s": how long they were off, "back_before_window_s": how long before the window's start event they were back
(negative: after it), "all_on_measured": whether every thread read back as on the measured CPU}, or {"off": why
not}.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

from pingpong.harness.settings.cell import HELPERS_ACROSS, WARMUP_HELPERS_SPARE, CellSettings, cpus_for, placement_of
from pingpong.harness.system import listeners, processes
# The helper threads come back this long before the warm-up ends: the window must find them on the measured CPU
# even when the orchestrator's timer runs a few milliseconds late on the CPU it now shares with them.
BACK_BEFORE_WINDOW_S = 0.05


def off_reason(mode: str, client_processes: int, spare: set[int] | None, measured: set[int] | None,
               warmup_s: float) -> str | None:
    """Why an attempt's client keeps its helper threads on the measured CPU during its warm-up; None when they
    move. Pure."""
    if mode != WARMUP_HELPERS_SPARE:
        return "--warmup-helpers measured"
    if client_processes != 1:
        return "several client processes"
    if not spare or not measured or spare & measured:
        return "no spare CPU (placement other than same-cpu, or not pinned)"
    if warmup_s <= BACK_BEFORE_WINDOW_S:
        return f"a warm-up of {warmup_s:g} s leaves no time before the window"
    return None


def helper_threads(pid: int) -> list[int]:
    """The process's threads but its main one (the thread whose id is the pid); [] when it has ended."""
    try:
        return [int(entry.name) for entry in os.scandir(f"/proc/{pid}/task") if int(entry.name) != pid]
    except OSError:
        return []


def all_threads_on(pid: int, cpus: set[int]) -> bool:
    """Whether every thread of the process may run only on cpus (threads that end meanwhile are skipped)."""
    for task in [pid, *helper_threads(pid)]:
        try:
            if not os.sched_getaffinity(task) <= cpus:
                return False
        except OSError:
            continue
    return True


class HelpersStayPut:
    """An attempt whose client keeps its helper threads on the measured CPU: the same calls, doing nothing, and the
    reason as its record."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def released(self) -> None:
        pass

    def window_started(self) -> None:
        pass

    def close(self) -> None:
        pass

    def record(self) -> dict[str, Any]:
        return {"off": self.reason}


class WarmupHelpers:
    """One client process's helper threads over one attempt's warm-up (module docstring). `released()` runs when
    the client says it is ready, `window_started()` when its window opens; both from the window's event reader."""

    def __init__(self, pid: int, measured: set[int], spare: set[int], warmup_s: float) -> None:
        self.pid, self.measured, self.spare, self.warmup_s = pid, set(measured), set(spare), warmup_s
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.moved: int | None = None
        self.off_at: float | None = None
        self.back_at: float | None = None
        self.window_at: float | None = None
        self.all_on_measured: bool | None = None

    def released(self) -> None:
        """The client is ready: its helper threads go to the spare CPU until shortly before the window."""
        with self._lock:
            if self.off_at is not None:
                return
            moved = 0
            for task in helper_threads(self.pid):
                try:
                    os.sched_setaffinity(task, self.spare)
                    moved += 1
                except OSError:
                    pass  # a thread that ended meanwhile
            self.moved, self.off_at = moved, time.monotonic()
            self._timer = threading.Timer(self.warmup_s - BACK_BEFORE_WINDOW_S, self.bring_back)
            self._timer.daemon = True
            self._timer.start()

    def bring_back(self) -> None:
        """Every thread of the client back on the measured CPU (once; threads it starts later inherit it)."""
        with self._lock:
            if self.off_at is None or self.back_at is not None:
                return
            processes.pin_threads(self.pid, self.measured)
            self.back_at = time.monotonic()
            self.all_on_measured = all_threads_on(self.pid, self.measured)

    def window_started(self) -> None:
        """The window's start event: the threads come back now at the latest (the record says how late)."""
        self.window_at = time.monotonic()
        self.bring_back()

    def close(self) -> None:
        """The attempt is over: no timer left behind, every thread where the attempt put it."""
        if self._timer is not None:
            self._timer.cancel()
        self.bring_back()

    def record(self) -> dict[str, Any] | None:
        """What the attempt keeps (module docstring); None when the client never said it was ready."""
        if self.off_at is None:
            return None
        back = self.back_at if self.back_at is not None else time.monotonic()
        return {"moved": self.moved, "off_s": round(back - self.off_at, 4),
                "back_before_window_s": (round(self.window_at - self.back_at, 4)
                                         if self.window_at is not None and self.back_at is not None else None),
                "all_on_measured": self.all_on_measured}


class HelpersAcross:
    """Placement helpers-across: the sides as split, and every thread of each side's processes but their main ones
    on the *other* side's CPUs, from the client's ready on (and again at the window's start, for threads started
    meanwhile: libuv starts its pool on first use). Every hand-off between a side's event loop and its thread pool
    (Node.js's zlib, Python's executor) then crosses CPUs, as it may on a host whose pool threads run on other
    cores; the rest of the cell runs as split. The record: {"across": threads moved at the ready, "at_window":
    more at the window's start}."""

    def __init__(self, server_pids: Callable[[], list[int]], client_pids: list[int], server_cpus: set[int],
                 client_cpus: set[int]) -> None:
        self.server_pids, self.client_pids = server_pids, client_pids
        self.server_cpus, self.client_cpus = server_cpus, client_cpus
        self.moved: int | None = None
        self.at_window: int | None = None
        self._lock = threading.Lock()

    def _move(self) -> int:
        moved = 0
        for pids, cpus in ((self.server_pids(), self.client_cpus), (self.client_pids, self.server_cpus)):
            for pid in pids:
                for task in helper_threads(pid):
                    try:
                        if os.sched_getaffinity(task) != cpus:
                            os.sched_setaffinity(task, cpus)
                            moved += 1
                    except OSError:
                        pass  # a thread that ended meanwhile
        return moved

    def released(self) -> None:
        with self._lock:
            if self.moved is None:
                self.moved = self._move()

    def window_started(self) -> None:
        with self._lock:
            if self.at_window is None:
                self.at_window = self._move()

    def close(self) -> None:
        """Nothing to bring back: the processes end with the attempt."""

    def record(self) -> dict[str, Any]:
        return {"across": self.moved, "at_window": self.at_window}


def helpers_across_for(settings: CellSettings, server_pid: int, client_pids: list[int]) -> HelpersAcross | None:
    """Placement helpers-across's mover for an attempt (the server's tree read when it moves), or None for any other
    placement or without two sets of CPUs."""
    server_cpus, client_cpus = cpus_for(settings)
    if placement_of(settings) != HELPERS_ACROSS or not server_cpus or not client_cpus:
        return None
    return HelpersAcross(lambda: listeners.process_trees([server_pid]).get(server_pid, [server_pid]), client_pids,
                         server_cpus, client_cpus)
