"""The measured window, sampled from outside the processes measured: each side's CPU, page faults, scheduling and
sockets, the kernel's TCP counters and the CPUs' steal time at the window's edges (WindowSamples), and the server
with every idle connection held, sampled before the go (HeldSample)."""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pingpong.contract import READY_EVENT, WINDOW_END_EVENT, WINDOW_START_EVENT
from pingpong.harness.measure.boundary import HeldSample, WindowSamples
from pingpong.harness.measure.start_barrier import window_spread
from pingpong.harness.settings.cell import CellSettings, cpus_for
from pingpong.harness.measure.pacer import GUARD_S, Pacer, signalled_sqpoll_reason, unpaced_reason
from pingpong.harness.measure.warmup_helpers import HelpersAcross, HelpersStayPut, WarmupHelpers
from pingpong.harness.settings.cell import our_cpus
from pingpong.harness.system import broker as redis_broker
from pingpong.harness.system import cpu, kernel_signals, listeners, profilers, scheduling, wakeup_trace
from pingpong.harness.system.syscall_trace import SyscallTracer


# the readings that bound the window's interior and its parts, as shares of its planned length: a cost that grows
# with the roundtrips shows in every part, one the window pays once (a heap that grows, a garbage collector's new
# pages) in one, and what a client does at the window's edges in none
INTERIOR_EDGES = (0.25, 0.5, 0.75)
# the pacer's slice before the warm-up (pacer.Pacer.warm_slice) is taken only with a warm-up this long at least: a
# shorter one could let the client's window begin during the slice, a pause no count would leave out
WARM_SLICE_MIN_WARMUP_S = 0.05


def window_share(received_at_start: int | None, received_when_attached: int | None,
                 received_at_end: int | None) -> float | None:
    """The share of a window's roundtrips made after a tracer or profiler was attached, from the bytes the clients
    received by the window's start, by the attach and by the window's end (every roundtrip brings the same bytes);
    None when a reading is missing or nothing was received. Attaching takes a while inside the window, and the
    pair's pace differs before and after it (strace slows it several times over; py-spy's attach may stall it), so
    the window's mean rate times the attached time does not count the roundtrips attached."""
    if None in (received_at_start, received_when_attached, received_at_end):
        return None
    total = received_at_end - received_at_start
    if total <= 0:
        return None
    return min(1.0, max(0.0, (received_at_end - received_when_attached) / total))


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
        self.established = listeners.established_connections(self.port, self.server_pid)

    def sample(self) -> HeldSample:
        return HeldSample(self.memory_before, self.memory_held, self.established)


class WindowWatcher:
    """Reads the drivers' events and samples both sides when the measured window opens and closes.

    One thread reads: it times each event as it arrives and hands each READY_EVENT to on_ready (the start
    barrier). The other samples, per window: CPU, minor page faults and scheduling (run delay, context switches,
    user and system ticks: system/scheduling.py) of both sides' process trees, each CPU's steal time, the kernel's
    TCP counters, TCP_NODELAY of both sides' sockets as the kernel has it (forced on first when
    settings.force_nodelay), and strace counts when settings.trace_syscalls. With several client processes, the
    sampled window runs from the last one's start to the first one's end: the time when all of them measure
    (released together by the start barrier, their windows differ by `spread`). Sampling happens in the
    orchestrator, outside the processes measured.
    """

    def __init__(self, read_fd: int, server_pid: int | None, client_pids: list[int], port: int,
                 settings: CellSettings,
                 work_dir: Path, on_ready: Callable[[], None] | None = None,
                 window_processes: int | None = None, count_connections: bool = False,
                 runtimes: tuple[str, str] | None = None, broker: redis_broker.Broker | None = None,
                 warmup_helpers: WarmupHelpers | HelpersStayPut | HelpersAcross | None = None) -> None:
        self.server_pid = server_pid
        # the client's helper threads during its warm-up (measure/warmup_helpers.py), or why they stay put; with
        # placement helpers-across, both sides' helper threads on the other side's CPUs
        self.warmup_helpers = warmup_helpers
        # --workers: the Redis broker between the server's workers, sampled at the edges (PUBLISH calls, CPU)
        self.broker = broker
        self.broker_figures: dict[str, Any] | None = None
        # (server, client): the runtimes whose profilers settings.profile_dir asks for (system/profilers.py)
        self.runtimes = runtimes
        self.profiles: dict[str, Any] | None = None
        # a client measured from outside (measure/outside.py): its connections' kernel counters at the edges
        self.count_connections = count_connections
        self.connection_counters: dict[str, Any] | None = None
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
        # each side's run delay, context switches and user/system ticks over the window (read unless
        # PINGPONG_SCHEDULING_READINGS=off: benchmarks/budget_overhead.py measures their cost against it)
        self.reads_scheduling = scheduling.readings_on()
        self.server_scheduling: scheduling.Scheduling | None = None
        self.client_scheduling: scheduling.Scheduling | None = None
        self.cpu_steal_s: dict[str, float] | None = None
        self.wall_s: float | None = None
        self.server_peak_rss_bytes: int | None = None
        self.tcp_counters: dict[str, int] | None = None
        self.sockets: dict[str, Any] | None = None
        self.syscalls: dict[str, Any] | None = None
        self.sampling_s: float | None = None  # CPU time this thread spent sampling inside the window (at its start)
        # page faults in the window's interior (from a quarter of its length to three quarters), per side, and that
        # part's share of the window: what grows with the roundtrips, apart from what the clients do at the window's
        # edges (a first touch as it opens, the report they build as the end is sampled)
        self._interior: list[tuple] = []
        self.interior_minor_faults: dict[str, Any] | None = None
        # the CPUs the cell runs on: where the host sentinel times the host's pace in the window
        server_cpus, client_cpus = cpus_for(settings)
        self.pace_cpus = (server_cpus or set()) | (client_cpus or set())
        # the host's pace in the window (measure/pacer.py): the cell paused for slices of the host sentinel on its
        # CPUs; host_pace is the pacer's record, or {"off": why} for a window measured without slices
        pace_cpus = sorted(self.pace_cpus or our_cpus())
        groups = [pid for pid in (server_pid, *client_pids) if pid is not None]
        off = unpaced_reason(settings, server_pid is not None) or signalled_sqpoll_reason(pace_cpus, groups)
        self.pacer = None if off else Pacer(pace_cpus, groups)
        self.host_pace: dict[str, Any] | None = {"off": off} if off else None
        if self.pacer is not None:
            self.pacer.prepare()
        # PINGPONG_COUNT_WAKEUPS=1: the sides' threads' wakeups over the window (system/wakeup_trace.py)
        self.wakeup_trace = wakeup_trace.WakeupTrace() if wakeup_trace.wanted() else None
        if self.wakeup_trace is not None:
            self.wakeup_trace.prepare()
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
    def warmup_helpers_record(self) -> dict[str, Any] | None:
        """What the attempt keeps of its client's helper threads in the warm-up: measure/warmup_helpers.py's
        record, {"off": why not}, or None (not asked for: a cluster's host)."""
        return self.warmup_helpers.record() if self.warmup_helpers is not None else None

    def samples(self) -> WindowSamples:
        """What was sampled (after join): the record the judge reads."""
        return WindowSamples(
            cpu_source=self.cpu_source.name, server_cpu_s=self.server_cpu_s, client_cpu_s=self.client_cpu_s,
            server_minor_faults=self.server_minor_faults, client_minor_faults=self.client_minor_faults,
            server_scheduling=self.server_scheduling, client_scheduling=self.client_scheduling,
            cpu_steal_s=self.cpu_steal_s, spread=self.spread, wall_s=self.wall_s,
            server_peak_rss_bytes=self.server_peak_rss_bytes, tcp_counters=self.tcp_counters, sockets=self.sockets,
            syscalls=self.syscalls, profiles=self.profiles, sampling_s=self.sampling_s,
            start_wall_ns=self.start_wall_ns,
            end_wall_ns=self.end_wall_ns, connection_counters=self.connection_counters, broker=self.broker_figures,
            host_pace=self.host_pace, interior_minor_faults=self.interior_minor_faults,
            warmup_helpers=self.warmup_helpers_record)

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
                        if (self.pacer is not None and len(self.ready_at) == 1 and not self.starts_at
                                and self.settings.warmup_s >= WARM_SLICE_MIN_WARMUP_S):
                            self._events.put(READY_EVENT)  # the pacer's slice before the warm-up, in _watch
                        if self.warmup_helpers is not None:
                            self.warmup_helpers.released()
                        if self.on_ready is not None:
                            self.on_ready()
                        continue
                    if event == WINDOW_START_EVENT and self.warmup_helpers is not None:
                        self.warmup_helpers.window_started()  # at the latest: its timer brought them back before
                    (self.starts_at if event == WINDOW_START_EVENT else self.ends_at).append(arrived)
                    self._events.put(event)
        finally:
            if self.warmup_helpers is not None:
                self.warmup_helpers.close()
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

    def _held_connections(self) -> Callable[[], kernel_signals.HeldConnections] | None:
        """What opens the clients' connections for the pacer to read between its pauses (in its own thread, so the
        window's start is not held up); None for idle connections by the thousand, whose borrowing would not be
        cheap."""
        if self.settings.idle_connections or self.port is None:
            return None
        return lambda: kernel_signals.HeldConnections(
            [pid for tree in self._trees()[1] for pid in tree], self.port)

    def _client_sockets(self, client_trees: list[list[int]], force: bool) -> dict[str, Any]:
        return kernel_signals.merge_socket_readings(
            [kernel_signals.inspect_sockets(tree, self.port, force) for tree in client_trees], force)

    def _watch(self) -> None:
        start = None
        broker_from = None
        counted_from = None
        scheduled_from = None
        starts = ends = 0
        tracers: dict[str, SyscallTracer] = {}
        profiling: dict[str, Any] = {}
        # the clients' bytes received at the window's start, once the tracers and once the profilers were attached
        received_from = traced_received = profiled_received = None
        checkpoints: list[float] = []  # when the window's interior begins and ends (monotonic): faults read there
        try:
            while True:
                try:
                    event = self._events.get(timeout=max(0.0, checkpoints[0] - time.monotonic())
                                             if checkpoints else None)
                except queue.Empty:  # an edge of the window's interior: what each side has faulted so far
                    checkpoints.pop(0)
                    self._read_interior(server_tree, client_pids)
                    continue
                if event is None:
                    break
                if event == READY_EVENT:  # a first client connected: one slice before its warm-up (pacer.warm_slice)
                    if self.pacer is not None and not self.starts_at:  # before the window (timed as it arrives)
                        # no later than halfway through the warm-up: a watcher that comes late takes no slice
                        self.pacer.warm_slice(not_after=self.ready_at[0] + self.settings.warmup_s / 2)
                    continue
                if event == WINDOW_START_EVENT:
                    starts += 1
                    if starts < self.window_processes:
                        continue
                    trees = None
                    if self.wakeup_trace is not None:  # first and last: the trace spans the window
                        trees = self._trees()
                        self.wakeup_trace.start(
                            {"server": wakeup_trace.threads_of(trees[0]) if self.server_pid is not None else set(),
                             "client": wakeup_trace.threads_of([pid for tree in trees[1] for pid in tree])})
                    # The pauses first, from the last process's start to before the first's end: the samples
                    # below read counters, which a paused cell does not move (a multi-process cell's samples took
                    # long enough under load to leave no time for a pause when they came first)
                    if self.pacer is not None:
                        self.pacer.start(min(self.starts_at) + self.settings.duration_s - GUARD_S,
                                         event_at=self.starts_at[-1], connections=self._held_connections())
                    # Inside the measured window, so kept cheap (sampling_s records how cheap): CPU and
                    # counters first, then the scheduling figures, then each connection's TCP_NODELAY (forced
                    # first, if asked).
                    sampling_began = time.thread_time()
                    self.start_wall_ns = time.time_ns()
                    server_tree, client_trees = trees or self._trees()
                    client_pids = [pid for tree in client_trees for pid in tree]
                    counted_from = self._count_connections(client_pids)
                    start = (time.monotonic(), cpu.sample(server_tree, self.cpu_source),
                             cpu.sample(client_pids, self.cpu_source), kernel_signals.read_tcp_counters(),
                             cpu.minor_faults(server_tree), cpu.minor_faults(client_pids),
                             kernel_signals.read_cpu_steal())
                    scheduled_from = self._read_scheduling(server_tree, client_pids)
                    broker_from = self.broker.sample() if self.broker is not None else None
                    if self.settings.idle_connections or self.settings.sample_server_memory:
                        self._inspect_pair_sockets_only(client_trees)
                    else:
                        self._inspect_sockets(server_tree, client_trees, force=self.settings.force_nodelay)
                    self.sampling_s = time.thread_time() - sampling_began
                    if self.settings.trace_syscalls or (self.settings.profile_dir and self.runtimes):
                        received_from = self._client_bytes_received(client_pids)
                    if self.settings.trace_syscalls:
                        tracers = {side: SyscallTracer(pid, self.work_dir / f"strace-{side}.txt")
                                   for side, pid in (("server", self.server_pid),
                                                     ("client", self.client_pids[0]))}
                        traced_from = time.monotonic()  # both tracers attached (or gave up)
                        traced_received = self._client_bytes_received(client_pids)
                    if self.settings.profile_dir and self.runtimes:
                        profiling = self._start_profilers()
                        profiled_received = self._client_bytes_received(client_pids)
                    checkpoints = [self.starts_at[-1] + share * self.settings.duration_s for share in INTERIOR_EDGES]
                elif event == WINDOW_END_EVENT:
                    ends += 1
                    if ends >= self.window_processes and self.wall_s is not None:
                        self.ended.set()  # the last process measuring has closed its window too
                    if start is None or self.wall_s is not None:
                        continue
                    if self.wakeup_trace is not None:
                        self.wakeup_trace.halt()
                    if self.pacer is not None:  # first: nothing is sampled while the cell may be paused
                        self.host_pace = self.pacer.stop()
                    checkpoints = []
                    # the same pids as at the start; one that exited meanwhile drops out of the delta
                    if counted_from is not None:
                        self.connection_counters = self._counted_window(counted_from, client_pids)
                    server_end = cpu.sample(server_tree, self.cpu_source)
                    client_end = cpu.sample(client_pids, self.cpu_source)
                    if self.broker is not None:
                        self.broker_figures = redis_broker.window_figures(broker_from, self.broker.sample())
                    counters_end = kernel_signals.read_tcp_counters()
                    faults_end = cpu.minor_faults(server_tree), cpu.minor_faults(client_pids)
                    self.cpu_steal_s = kernel_signals.steal_seconds(start[6], kernel_signals.read_cpu_steal())
                    self.wall_s = time.monotonic() - start[0]
                    self.end_wall_ns = time.time_ns()
                    # after the window's length is taken, as at its start after the CPU: both readings lag the CPU
                    # samples by about the same time
                    scheduled_to = self._read_scheduling(server_tree, client_pids)
                    woken_counts = self.wakeup_trace.stop() if self.wakeup_trace is not None else None
                    if self.server_pid is not None:
                        self.server_cpu_s = cpu.window_cpu_s(start[1], server_end)
                        self.server_minor_faults = cpu.faults_delta(start[4], faults_end[0])
                    self.client_cpu_s = cpu.window_cpu_s(start[2], client_end)
                    self.client_minor_faults = cpu.faults_delta(start[5], faults_end[1])
                    self._interior_faults(start[0])
                    if scheduled_from is not None and scheduled_to is not None:
                        if self.server_pid is not None:
                            self.server_scheduling = scheduling.delta(scheduled_from[0], scheduled_to[0])
                        self.client_scheduling = scheduling.delta(scheduled_from[1], scheduled_to[1])
                        if woken_counts is not None:
                            self.server_scheduling = scheduling.with_wakeups(self.server_scheduling,
                                                                             woken_counts["server"])
                            self.client_scheduling = scheduling.with_wakeups(self.client_scheduling,
                                                                             woken_counts["client"])
                    if self.wakeup_trace is not None and self.wakeup_trace.error is not None:
                        print(f"pingpong: {self.wakeup_trace.error}; this window's wakeups are not counted",
                              file=sys.stderr)
                    self.tcp_counters = kernel_signals.counter_deltas(start[3], counters_end)
                    if tracers or profiling:  # the client's traffic read once more before they are stopped
                        received_to = self._client_bytes_received(client_pids)
                    if tracers:
                        share = window_share(received_from, traced_received, received_to)
                        self._stop_tracers(tracers, time.monotonic() - traced_from, share)
                    tracers = {}
                    if profiling:
                        share = window_share(received_from, profiled_received, received_to)
                        self.profiles = {side: capture | ({"window_share": share} if not capture.get("error") else {})
                                         for side, capture in self._stop_profilers(profiling).items()}
                    profiling = {}
                    if self.server_pid is not None:
                        self.server_peak_rss_bytes = cpu.peak_rss_bytes(self.server_pid)
                    if ends >= self.window_processes:
                        self.ended.set()
        finally:
            if self.pacer is not None:
                self.pacer.stop()  # however the events ended, the cell is left running
            if tracers:
                self._stop_tracers(tracers, None)
            if self.wakeup_trace is not None:
                self.wakeup_trace.stop()  # a window that did not end: the instance is removed all the same
            if profiling:
                self._stop_profilers(profiling)
            self.ended.set()

    def _read_interior(self, server_tree: list[int], client_pids: list[int]) -> None:
        """Both sides' page faults now, at an edge of the window's interior."""
        if self.wall_s is None:
            self._interior.append((time.monotonic(), cpu.minor_faults(server_tree) if self.server_pid is not None
                                   else None, cpu.minor_faults(client_pids)))

    def _interior_faults(self, began: float) -> None:
        """The page faults of the window's interior, in total and in each of its parts (between the readings), and
        their shares of the window's wall time (began: the window's first sample)."""
        if len(self._interior) != len(INTERIOR_EDGES):
            return
        length = self.wall_s or time.monotonic() - began
        if length <= 0:
            return
        parts = list(zip(self._interior, self._interior[1:]))
        server = [cpu.faults_delta(a[1], b[1]) if a[1] is not None else None for a, b in parts]
        client = [cpu.faults_delta(a[2], b[2]) for a, b in parts]
        self.interior_minor_faults = {
            "server": None if None in server else sum(server), "client": None if None in client else sum(client),
            "share": round((self._interior[-1][0] - self._interior[0][0]) / length, 4),
            "server_parts": server, "client_parts": client,
            "part_shares": [round((b[0] - a[0]) / length, 4) for a, b in parts]}

    def _read_scheduling(self, server_tree: list[int], client_pids: list[int]) -> tuple[
            scheduling.SchedulingSample, scheduling.SchedulingSample] | None:
        """Both sides' scheduling figures now (server, client), or None when the readings are off."""
        if not self.reads_scheduling:
            return None
        return scheduling.sample(server_tree), scheduling.sample(client_pids)

    def _count_connections(self, client_pids: list[int]) -> tuple[float, int, dict[int, dict[str, int]] | str] | None:
        """The clients' connections' kernel counters now, with when they were read on the monotonic and the wall
        clock (or why they could not be read)."""
        if not self.count_connections:
            return None
        try:
            counters = kernel_signals.connection_counters(client_pids, self.port)
        except (OSError, ValueError) as exc:
            counters = f"the client's sockets could not be read: {exc}"
        return time.monotonic(), time.time_ns(), counters

    def _counted_window(self, counted_from: tuple[float, int, dict[int, dict[str, int]] | str],
                        client_pids: list[int]) -> dict[str, Any]:
        """The counters' growth over the window, and the window's length between the two readings."""
        began, began_ns, before = counted_from
        ended, ended_ns, after = self._count_connections(client_pids)
        problem = before if isinstance(before, str) else after if isinstance(after, str) else None
        if problem:
            return {"error": problem}
        return kernel_signals.counters_delta(before, after) | {
            "wall_s": ended - began, "edges_wall_ns": [began_ns, ended_ns], "connections_at_start": len(before),
            "connections_at_end": len(after)}

    def _start_profilers(self) -> dict[str, Any]:
        """A profiler on each side (the server's root process, the first client process), started at once."""
        folder = Path(self.settings.profile_dir)
        sides = [("server", self.runtimes[0], self.server_pid), ("client", self.runtimes[1], self.client_pids[0])]
        started: dict[str, Any] = {}

        def start(side: str, runtime: str, pid: int | None) -> None:
            if pid is None:
                started[side] = profilers.Capture(side, runtime, error="the server runs on another host")
                return
            started[side] = profilers.start_profiler(side, runtime, pid, folder / side, {self.port})

        threads = [threading.Thread(target=start, args=side, daemon=True) for side in sides]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return started

    def _stop_profilers(self, profiling: dict[str, Any]) -> dict[str, Any]:
        """Each side's capture (stopped at once, so both end with the window) as its JSON mapping."""
        captures: dict[str, Any] = {}

        def stop(side: str) -> None:
            captures[side] = profilers.stop_profiler(profiling[side]).to_dict()

        threads = [threading.Thread(target=stop, args=(side,), daemon=True) for side in profiling]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return captures

    def _client_bytes_received(self, client_pids: list[int]) -> int | None:
        """The bytes the clients' connections to the server have received so far (the kernel's count), or None
        when their sockets cannot be read."""
        try:
            counters = kernel_signals.connection_counters(client_pids, self.port)
        except (OSError, ValueError):
            return None
        return sum(connection["bytes_received"] for connection in counters.values()) if counters else None

    def _stop_tracers(self, tracers: dict[str, SyscallTracer], traced_wall_s: float | None,
                      window_share: float | None = None) -> None:
        """Detach strace; traced_wall_s is how long both were attached, and window_share the share of the window's
        roundtrips made meanwhile (None when unknown), to turn counts into per-roundtrip figures."""
        self.syscalls = {}
        for side, tracer in tracers.items():
            counts = tracer.stop()
            self.syscalls[side] = ({"calls": counts, "traced_wall_s": traced_wall_s, "window_share": window_share}
                                   if counts is not None else {"error": tracer.error})
