"""The host's pace inside the measured window: the cell kept off its CPUs now and then while the host sentinel runs
a slice there (docs/methodology.md, "The host's pace in the window").

On this shared VM the host's own pace moves under every cell in stretches of milliseconds to seconds (its sentinel
about 1.3-1.5x slower half the time), too fast for a probe before and after a window to follow. So the pace is
measured in the window itself: every RUN_S of the cell's running time, the host sentinel (native/host_sentinel.c,
system/host_sentinel.py's Sentinel) runs SLICE_ROUNDTRIPS roundtrips on each of the cell's CPUs while the cell does
not run, and the cell's process groups (the server's and every client's) get a SIGCONT after it, which each client
counts. How the cell is kept off (the record's "stop"):
- STOP_PREEMPT, a cell on one CPU (every serial cell), the default: the sentinel runs in the real-time class
  (SCHED_FIFO), so woken for a slice it takes the CPU at once and no ordinary process runs there until it sleeps
  again. No one is stopped, so no thread of the cell is woken to stop and woken again (Go's runtime has several,
  Node.js's about ten), and the pause the sentinel times is the time the cell stood still.
- STOP_SENTINEL, a cell on one CPU where the real-time class is refused (no CAP_SYS_NICE, no RLIMIT_RTPRIO): the
  sentinel stops the groups itself (SIGSTOP), on that CPU, and continues them: so the CPU never idles between the
  cell and the slice (on a VM an idle vCPU halts, and waking it cost about 0.3 ms a pause).
- STOP_ORCHESTRATOR, a cell on several CPUs: stopped and continued from here, around all of its CPUs' slices.
The window's running time is its length less its pauses; the sentinel's ns per roundtrip over the window's slices
is the pace the cell ran at (analysis/host_pace.py turns both into the rate at the reference pace). Each client
counts the SIGCONTs and keeps a paused roundtrip out of its latency histogram (client_report.PAUSES).

One more slice is taken as the first client process connects, before its warm-up (Pacer.warm_slice), and not
counted: a fresh process pays more for its first pauses than for the later ones (Bun: about 1.5% of a 0.1 s window).
Pauses run from the window's start (as the orchestrator sees it) until GUARD_S before its planned end, so every
pause lies inside the client's own window, which runs for its whole --duration of wall time. Stopped groups are
always continued, whatever ends the pacing; a kill -9 of the orchestrator mid-slice leaves them to the guardian,
whose SIGKILL ends a stopped process as any other, and the sentinels end at the end of their stdin. Off with the
measurement switch RAW_WINDOWS_ENV ("1").
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Callable

from pingpong.contract import RAW_WINDOWS_ENV
from pingpong.harness.analysis.host_pace import (STOP_ORCHESTRATOR, STOP_PREEMPT, STOP_SENTINEL, FastMode, SliceLog,
                                                fast_intervals, running_intervals, window_pace_ns)
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.system import host_sentinel, processes
from pingpong.harness.system.kernel_signals import HeldConnections

# Chosen by evidence (benchmarks/window_pace.py; docs/methodology.md, "The host's pace in the window"): each pause
# costs the cell a little beyond its own time (caches the slice took over, a runtime's work on the SIGCONT); with the
# sentinel taking the CPU, every runtime's rate per running second was within 2% of its unpaced windows' at a slice
# every 16 ms. Slices every 8 or 4 ms (40 or 20 roundtrips) did not make a window's paced rate steadier (the median
# CV of 0.2 s windows 6.2% and 5.9% against 5.8%), so the fewest pauses stay; 80 roundtrips a slice (about 1 ms)
# keep the pauses near 4% of the window.
RUN_S = 0.016  # the cell runs this long between two pauses
SLICE_ROUNDTRIPS = 80  # sentinel roundtrips per pause, on each of the cell's CPUs at once
MIN_WINDOW_S = 0.1  # a shorter window is measured raw: it would hold a few pauses at most
GUARD_S = 0.01  # no pause starts this close to the window's planned end, seen from the start event's arrival
SQPOLL_THREAD = "iou-sqp-"  # how the kernel names an io_uring ring's submission-queue polling thread (its comm)


def raw_windows() -> bool:
    """Whether the measurement switch RAW_WINDOWS_ENV turns the in-window slices off."""
    return os.environ.get(RAW_WINDOWS_ENV) == "1"


def unpaced_reason(settings: CellSettings, server_local: bool) -> str | None:
    """Why an attempt with these settings is measured without slices, or None when it is paced."""
    if raw_windows():
        return f"{RAW_WINDOWS_ENV}=1"
    if settings.duration_s < MIN_WINDOW_S:
        return (f"a window shorter than {MIN_WINDOW_S:g} s holds too few slices of the host's pace (one every "
                f"{RUN_S * 1000:g} ms)")
    if settings.workload != "pingpong" or settings.rate is not None:
        return ("paced only in the closed-loop ping-pong: a paused open loop or broadcast would queue its sends, "
                "and a handshake's pause would fall in the kernel's accept queue")
    if not server_local:
        return "the server runs on another host"
    if settings.trace_syscalls or settings.profile_dir:
        return "diagnose's tracer or profilers are attached to the processes (a stop would reach them too)"
    if not host_sentinel.SENTINEL.exists():
        return f"{host_sentinel.SENTINEL.name} is not built (sh native/build.sh)"
    return None


def stop_mode_for(cpus: list[int], groups: list[int], preempt: bool = True) -> str:
    """How a Pacer keeps the cell off its CPUs (pure): on one CPU its sentinel pauses the groups itself, so the CPU
    never idles between them. A cell on several CPUs (or with more groups than a slice line holds) is stopped from
    here, around every CPU's slice: one sentinel continuing it while another still runs would share that CPU with
    the cell."""
    one_cpu = len(cpus) == 1 and len(groups) <= host_sentinel.MAX_GROUPS
    return STOP_PREEMPT if one_cpu and preempt else STOP_SENTINEL if one_cpu else STOP_ORCHESTRATOR


def sqpoll_threads(groups: list[int]) -> list[int]:
    """The io_uring submission-queue polling threads (IORING_SETUP_SQPOLL: the kernel names each SQPOLL_THREAD
    followed by its ring owner's PID) in the processes of these process groups."""
    found = []
    for pid in (member for group in groups for member in processes.group_members(group)):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:  # the process exited since the listing
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as file:
                    if file.read().startswith(SQPOLL_THREAD):
                        found.append(int(tid))
            except OSError:
                continue
    return found


def signalled_sqpoll_reason(cpus: list[int], groups: list[int]) -> str | None:
    """Why a cell whose pacer would stop it with signals is measured without slices: a side polls an io_uring
    submission queue from a kernel thread, and each stop and continue of its process sets that thread polling on the
    side's CPU (libuv 1.45 to 1.48 set up such a ring for every loop: uvloop 0.19.0's does). Measured 2026-11-29
    (docs/methodology.md, "A pause that wakes a polling thread"): blacksheep on uvloop 0.19.0 with its client on the
    other CPU, its SQPOLL thread ran 1,339 ms of a 4 s window with slices and none without, and the cell's raw rate
    was 681/s, 941/s with io_uring off. On one CPU no one is stopped (STOP_PREEMPT): it stays idle, the cell paced."""
    if stop_mode_for(cpus, groups) == STOP_PREEMPT:
        return None
    found = sqpoll_threads(groups)
    if not found:
        return None
    return (f"a side has an io_uring SQPOLL thread ({SQPOLL_THREAD}..., thread {found[0]}), which polls the side's "
            f"CPU after every stop and continue of a slice on several CPUs")


RUN_SLICES = SliceLog()  # this process's: a run, a diagnose, a test worker


class Pacer:
    """Pauses the cell's process groups for slices of the host sentinel on its CPUs, from start() until stop()."""

    def __init__(self, cpus: list[int], groups: list[int], run_s: float = RUN_S,
                 slice_roundtrips: int = SLICE_ROUNDTRIPS, preempt: bool = True,
                 slice_log: SliceLog | None = RUN_SLICES) -> None:
        """preempt: on one CPU, a preempting sentinel where the system allows it (STOP_PREEMPT), else one that stops
        the groups itself (STOP_SENTINEL); False: the latter always (benchmarks/window_pace.py compares them).
        slice_log: where the window's slices go and its fast mode comes from; None: the pace is the slices'
        trimmed mean alone."""
        self.cpus = sorted(cpus)
        self.groups = list(groups)
        self.run_s = run_s
        self.slice_roundtrips = slice_roundtrips
        self.pauses = 0
        self.paused_ns = 0
        self.sentinel_ns = {cpu: 0 for cpu in self.cpus}  # each CPU's sentinel time over the slices
        self.slices_ns: list[float] = []  # per pause: ns per sentinel roundtrip, the mean over the CPUs
        self.error: str | None = None
        self.stop_mode = stop_mode_for(self.cpus, self.groups, preempt)
        self.preempt_refused: str | None = None
        # seconds from the window's start event's arrival to the pauses' start: a watcher that handles the event
        # late leaves the window fewer pauses (none when later than the window)
        self.start_late_s: float | None = None
        self._sentinels: list[host_sentinel.Sentinel] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._paused = threading.Lock()  # held while the groups are stopped
        self.slice_log = slice_log
        self._fast: FastMode | None = None
        self._logged = False
        # the client's received segments read at the pauses' start, in each pause and at their end: the cell's
        # running pieces between pauses (analysis/host_pace.running_intervals)
        self._connections: Callable[[], HeldConnections] | None = None
        self._held: HeldConnections | None = None
        self._counted_from: tuple[int, int] | None = None
        self._pause_counts: list[tuple[int, int, int]] = []
        self._intervals: dict[str, Any] | None = None
        self._held_lock = threading.Lock()  # whichever of stop() and the pacer's thread ends last closes _held
        self._stopped = False  # stop() has run: the pacer's thread closes what it still holds as it ends
        self.warm_slice_ns: int | None = None  # the slice before the warm-up (warm_slice), if one was taken
        self.warm_slice_error: str | None = None  # why that slice failed (its sentinels were started again)

    def prepare(self) -> None:
        """Start (and warm) the sentinels before the window, so no pause pays for a sentinel's start. A preempting
        sentinel the system refuses leaves the stop to a plain one (the record says why)."""
        try:
            if self.stop_mode == STOP_PREEMPT:
                try:
                    self._sentinels = [host_sentinel.sentinel_on(self.cpus[0], preempt=True)]
                    return
                except host_sentinel.PreemptRefused as exc:
                    self.stop_mode, self.preempt_refused = STOP_SENTINEL, str(exc)
            self._sentinels = [host_sentinel.sentinel_on(cpu) for cpu in self.cpus]
        except OSError as exc:
            self.error = f"the host sentinel could not start: {exc}"

    def warm_slice(self, not_after: float | None = None) -> None:
        """One slice as the client has connected, before its warm-up, not counted among the window's pauses: a
        process's first pauses cost it more than the later ones (a fresh Bun client paused from its window's start
        ran 0.971-0.978 times its unpaced attempts' rate, 0.990-0.991 with this slice: docs/methodology.md, "The
        pace's bias through the matrix's own attempts"), and the warm-up is where such costs belong. not_after
        (monotonic): no slice begins later, so that none falls in the window, where no count would leave it out. A
        sentinel that fails here is started again for the window's pauses (warm_slice_error says what failed)."""
        if self.error is not None or not self._sentinels or self.warm_slice_ns is not None:
            return
        with self._paused:
            if self._stop.is_set() or (not_after is not None and time.monotonic() > not_after):
                return
            try:
                _, self.warm_slice_ns, _, _ = self._slice()  # nothing counted: the pauses have not begun
            except (OSError, ValueError) as exc:
                self.warm_slice_error = f"the host sentinel failed in the slice before the warm-up: {exc}"
                self._sentinels = []
                self.prepare()  # new sentinels for the window's pauses; one that cannot start sets error

    def start(self, until: float, event_at: float | None = None,
              connections: Callable[[], HeldConnections] | None = None) -> None:
        """Pause every run_s until stop() or the monotonic time `until` (after prepare()). event_at: when the
        window's start event arrived (monotonic); the record keeps how late the pauses began after it.
        connections: opens the client's connections to the server (kernel_signals.HeldConnections), whose received
        segments are then read as the pauses begin, in each pause and as they end: the record's "intervals". On one
        CPU a pause's reading is taken once the sentinel has been asked for its slice (this thread runs on the
        orchestrator's CPU, not the cell's); on several, once the cell is stopped and before the sentinels run, so
        that it never competes with their slices."""
        self._connections = connections
        if event_at is not None:
            self.start_late_s = time.monotonic() - event_at
        if self.error is None and self._sentinels:
            self._thread = threading.Thread(target=self._run, args=(until,), daemon=True, name="pacer")
            self._thread.start()

    def stop(self) -> dict[str, Any]:
        """Stop pausing (the groups are running when this returns) and say what the pauses found."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(host_sentinel.ANSWER_TIMEOUT_S + 5)
        with self._paused:  # a pause still in progress has ended
            pass
        with self._held_lock:
            self._stopped = True
            if self._held is not None and not (self._thread is not None and self._thread.is_alive()):
                try:
                    if self._counted_from is not None and self._intervals is None:
                        self._intervals = running_intervals(self._counted_from, self._pause_counts,
                                                            (time.monotonic_ns(), self._held.segments_in()))
                except Exception as exc:  # noqa: BLE001 - a reading never costs the window its figures
                    self._intervals = {"error": f"the client's connections could not be read: {exc}"}
                finally:
                    self._held.close()
                    self._held = None
        if self.slice_log is not None and not self._logged and self.slices_ns:
            self._fast = self.slice_log.add(self.stop_mode, self.slices_ns)
        self._logged = True
        return self.record()

    def record(self) -> dict[str, Any]:
        """The window's host_pace record (docs/results-format.md)."""
        done = self.pauses * self.slice_roundtrips
        per_cpu = {f"cpu{cpu}": round(total / done, 1) for cpu, total in self.sentinel_ns.items()} if done else {}
        return {"cpus": self.cpus, "run_ms": self.run_s * 1000, "slice_roundtrips": self.slice_roundtrips,
                "pauses": self.pauses, "paused_s": self.paused_ns / 1e9,
                # the window's pace: its slices' trimmed mean, those in the host's fast mode counted as its typical
                # slice (analysis/host_pace.window_pace_ns); the trimmed mean alone (the pace of files before
                # 2026-11-29 13:00 UTC) and the plain mean (before 2026-11-27 16:40 UTC) beside it
                "sentinel_ns_per_roundtrip": (round(window_pace_ns(self.slices_ns, fast=self._fast), 1)
                                              if per_cpu else None),
                "sentinel_ns_trimmed": (round(window_pace_ns(self.slices_ns), 1) if per_cpu else None),
                "sentinel_ns_mean": (round(sum(per_cpu.values()) / len(per_cpu), 1) if per_cpu else None),
                "fast_mode": self._fast.to_json() if self._fast is not None and per_cpu else None,
                "per_cpu_ns_per_roundtrip": per_cpu,
                "slices_ns": [round(value) for value in self.slices_ns], "stop": self.stop_mode,
                "preempt_refused": self.preempt_refused, "error": self.error,
                "start_late_s": None if self.start_late_s is None else round(self.start_late_s, 4),
                "warm_slice_ms": None if self.warm_slice_ns is None else round(self.warm_slice_ns / 1e6, 3),
                "warm_slice_error": self.warm_slice_error,
                "intervals": self._intervals,
                "fast_intervals": ({name: round(value, 4) for name, value in found.items()}
                                   if (found := fast_intervals(self._intervals, self.slices_ns, self._fast)) else None)}

    def _signal(self, signal_number: int) -> None:
        for group in self.groups:
            try:
                os.killpg(group, signal_number)
            except (ProcessLookupError, PermissionError):
                pass  # a group that has ended: the judge tells why

    def _run(self, until: float) -> None:
        try:
            self._pace(until)
        finally:
            with self._held_lock:  # stop() gave up waiting for this thread: what it holds is closed here
                if self._stopped and self._held is not None:
                    self._held.close()
                    self._held = None

    def _pace(self, until: float) -> None:
        if self._connections is not None:
            try:
                with self._held_lock:
                    if self._stopped:
                        return
                    self._held = self._connections()
                if not self._held.connections:
                    self._intervals = {"error": "no connection of the client's to the server's port was found"}
                else:
                    self._counted_from = (time.monotonic_ns(), self._held.segments_in())
            except Exception as exc:  # noqa: BLE001 - a reading never costs the window its pauses
                self._intervals = {"error": f"the client's connections could not be read: {exc}"}
        while not self._stop.wait(self.run_s):
            if time.monotonic() >= until:
                return
            with self._paused:
                if self._stop.is_set():
                    return
                try:
                    began, paused_ns, totals, counted = self._slice()
                except (OSError, ValueError) as exc:
                    self.error = f"the host sentinel failed: {exc}"
                    return
                self.pauses += 1
                self.paused_ns += paused_ns or 0
                if counted is not None:
                    self._pause_counts.append((began, paused_ns or 0, counted))
                for cpu, total in zip(self.cpus, totals):
                    self.sentinel_ns[cpu] += total
                self.slices_ns.append(sum(totals) / len(totals) / self.slice_roundtrips)

    def _slice(self) -> tuple[int, int | None, list[int], int | None]:
        """One slice of every CPU's sentinel with the cell kept off its CPUs (the caller holds _paused): (when it
        began, monotonic ns; ns the cell was paused; each sentinel's total ns; the client's segments read in it, None
        outside the pauses or without the reading). A sentinel that fails leaves the groups continued and its CPUs'
        sentinels ended, and raises (OSError, ValueError)."""
        by_sentinel = self.stop_mode != STOP_ORCHESTRATOR
        began = time.monotonic_ns()
        counted = None
        if not by_sentinel:
            self._signal(signal.SIGSTOP)
            counted = self._count_in_pause()
        try:
            for sentinel in self._sentinels:
                sentinel.ask(self.slice_roundtrips, tuple(self.groups) if by_sentinel else ())
            if by_sentinel:
                counted = self._count_in_pause()
            answers = [sentinel.answer() for sentinel in self._sentinels]
        except (OSError, ValueError):
            self._signal(signal.SIGCONT)  # a sentinel that failed mid-slice may have left them stopped
            for cpu in self.cpus:
                host_sentinel.discard(cpu)
            self._signal(signal.SIGCONT)  # again: a stopping sentinel may have stopped them as it was ended
            raise
        if not by_sentinel:
            self._signal(signal.SIGCONT)
        paused_ns = answers[0][1] if by_sentinel else time.monotonic_ns() - began
        return began, paused_ns, [total for total, _ in answers], counted

    def _count_in_pause(self) -> int | None:
        """The client's received segments, read while the cell is held for a slice; None when they are not read
        (a failed reading ends the window's intervals, and says why)."""
        if self._held is None or self._counted_from is None or self._intervals is not None:
            return None
        try:
            return self._held.segments_in()
        except Exception as exc:  # noqa: BLE001 - a reading never leaves the cell stopped or the pauses ended
            self._intervals = {"error": f"the client's connections could not be read: {exc}"}
            return None
