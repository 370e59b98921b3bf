"""The attempt boundary as typed data: what the processes of an attempt leave behind, and the outcome judged from it.

The same records come from this machine (measure/local.py) and from a cluster's hosts (cluster/host_agent.py sends
ClientRun and WindowSamples as their JSON mapping, to_dict(); the orchestrator reads them back with from_dict()).
measure/judge.py turns them into an Outcome, a pure function of the records and the settings; an Attempt (the
results file's record) is built from the attempt's Turn and its Outcome by attempt_from().

JSON mapping (every field is a plain JSON value; absent figures are null):
- ClientRun: {"index": int, "pid": int, "exit_code": int|null (null: it had not ended when it was stopped),
  "stdout": str (the client report, docs/contract.md), "stderr_tail": str}
- WindowSamples: {"cpu_source": str|null, "server_cpu_s", "client_cpu_s": float|null, "server_minor_faults",
  "client_minor_faults": int|null, "server_scheduling", "client_scheduling": {"run_delay_ns", "voluntary_switches",
  "involuntary_switches", "user_ticks", "system_ticks", "threads": int}|null (system/scheduling.py),
  "cpu_steal_s": {cpu: s}|null, "spread": {...}|null, "wall_s": float|null, "server_peak_rss_bytes": int|null,
  "tcp_counters": {name: delta}|null, "sockets": {"server"?: ..., "client": ...}|null, "syscalls": {...}|null,
  "sampling_s": float|null, "start_wall_ns", "end_wall_ns": int|null, "connection_counters": {name: delta}|null,
  "profiles": {"server"?, "client"?: system/profilers.Capture's fields}|null, "broker": {...}|null,
  "cpu_pace_ns": {cpu: ns}|null, "host_pace": {...}|null (measure/pacer.Pacer.record, or {"off": why}),
  "interior_minor_faults": {"server", "client": int|null, "share": float}|null, "warmup_helpers": {...}|null
  (measure/warmup_helpers.py)};
  the Attempt fields they become are documented in docs/results-format.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from pingpong.harness.results.records import Attempt
from pingpong.harness.system.scheduling import Scheduling


@dataclass(frozen=True)
class ClientRun:
    """One client process of an attempt once it has ended (or been stopped): what the judge reads of it."""

    index: int  # its place among the attempt's client processes (share order)
    pid: int
    exit_code: int | None  # None: it had not ended when it was stopped
    stdout: str  # exactly one JSON object when it keeps the contract: the client report
    stderr_tail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ClientRun":
        return cls(**{f.name: data[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class WindowSamples:
    """What the orchestrator (or a host's agent) sampled at the measured window's edges, outside the processes."""

    cpu_source: str | None = None  # process-clock, schedstat or stat-ticks (cpu.py)
    server_cpu_s: float | None = None  # CPU time of the server's process tree over the window
    client_cpu_s: float | None = None  # the same for every client process tree
    server_minor_faults: int | None = None
    client_minor_faults: int | None = None
    # each side's run delay, context switches and user/system ticks over the window (None: not read, e.g. a cluster
    # run's server, sampled on its own host without them)
    server_scheduling: Scheduling | None = None
    client_scheduling: Scheduling | None = None
    cpu_steal_s: dict[str, float] | None = None  # each CPU's steal time over the window
    spread: dict[str, Any] | None = None  # several client processes: how far apart their events came
    wall_s: float | None = None  # between the two samples
    server_peak_rss_bytes: int | None = None
    tcp_counters: dict[str, int] | None = None  # deltas of the kernel's TCP counters
    sockets: dict[str, Any] | None = None  # per side: TCP_NODELAY of each connection as the kernel has it
    syscalls: dict[str, Any] | None = None  # per side: strace -c counts (diagnose only)
    profiles: dict[str, Any] | None = None  # per side: the profiler's capture (diagnose --profile only)
    sampling_s: float | None = None  # CPU time the sampling took inside the window
    start_wall_ns: int | None = None  # the window's edges on the sampling host's wall clock
    end_wall_ns: int | None = None
    # a client measured from outside: its connections' kernel counters over the window (kernel_signals.counters_delta,
    # with wall_s between the two readings and the connections open at each), or {"error": why not}
    connection_counters: dict[str, Any] | None = None
    # --workers: the Redis broker over the window (system/broker.window_figures: publishes, cpu_s,
    # cpu_us_per_publish), sampled with the sides' CPU; None without a broker
    broker: dict[str, Any] | None = None
    # the pace of the sides' CPUs right after the window (a fixed Python loop timed on each): {"cpu1": ns per
    # iteration}; files from before the in-window pace (2026-11-27) only
    cpu_pace_ns: dict[str, float] | None = None
    # the host's pace in the window (measure/pacer.py's record), or {"off": why the window had no slices}
    host_pace: dict[str, Any] | None = None
    # page faults in the window's interior, a quarter to three quarters of its length: {"server": n, "client": n,
    # "share": that part of the window's wall time}
    interior_minor_faults: dict[str, Any] | None = None
    # the client's helper threads during its warm-up (measure/warmup_helpers.py's record, or {"off": why})
    warmup_helpers: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "WindowSamples":
        values = {f.name: data.get(f.name) for f in fields(cls)}
        for side in ("server", "client"):
            values[f"{side}_scheduling"] = Scheduling.from_dict(values[f"{side}_scheduling"])
        return cls(**values)


@dataclass(frozen=True)
class HeldSample:
    """The server with every idle connection open, sampled just before the go (outside any measured window)."""

    memory_before: dict[str, int] | None  # its process tree's memory before the clients started
    memory_held: dict[str, int] | None  # and with all their connections open
    established: int | None  # the connections the kernel lists on its port


@dataclass(frozen=True)
class ClientFacts:
    """The client side of an outcome: the first (or failing) client process, its exit code, report and stderr."""

    pid: int | None = None
    exit_code: int | None = None
    stderr_tail: str | None = None
    report: dict[str, Any] | None = None  # the driver's JSON (its histogram moved to the measured figures)


@dataclass(frozen=True)
class ServerFacts:
    """The server side of an outcome, as far as it was known when the outcome was judged."""

    ready_after_s: float | None = None  # from its start to its first completed handshake
    info: dict[str, Any] | None = None  # what it reported about itself (contract INFO_FILE_ENV)
    stderr_tail: str | None = None  # kept when the attempt failed


@dataclass(frozen=True)
class Measured:
    """The figures of an attempt that succeeded."""

    roundtrips: int
    elapsed_s: float
    roundtrips_per_s: float
    latency_histogram: str | None  # HdrHistogram of roundtrip durations (ns), compressed base64
    workload_figures: dict[str, Any] | None = None  # workload_figures.py: broadcast, open_loop, idle
    # a window with the host's pace in it (analysis/host_pace.py): roundtrips_per_s is the rate at the reference
    # pace, raw_roundtrips_per_s the roundtrips per second the cell ran (its pauses left out), running_s that time
    raw_roundtrips_per_s: float | None = None
    running_s: float | None = None
    sentinel_roundtrips_per_roundtrip: float | None = None
    pace_not_applied: str | None = None  # a paced window whose rate stays raw, and why (host_pace.wait_bound)


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended: ok with its figures, or the first failure with its one-line reason."""

    status: str  # ok, not-ready, port-conflict, verification-failed, client-failed, timeout, server-crashed, error
    reason: str | None = None
    client: ClientFacts = ClientFacts()
    server: ServerFacts = ServerFacts()
    measured: Measured | None = None
    window: WindowSamples | None = None
    placement: dict[str, Any] | None = None  # --cluster: where each side ran (cluster/measurer.py)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def prefixed(self, prefix: str) -> "Outcome":
        """The same outcome with its reason said of one client process (or of one host)."""
        return replace(self, reason=f"{prefix}{self.reason}")


def failed(status: str, reason: str, server: ServerFacts = ServerFacts(),
           client: ClientFacts = ClientFacts()) -> Outcome:
    return Outcome(status=status, reason=reason, client=client, server=server)


@dataclass(frozen=True)
class Turn:
    """Which attempt this is and where it ran: its round, when it started, the server's port, pid and CPUs."""

    repeat: int
    started_at: str  # UTC, ISO 8601
    port: int | None = None
    server_pid: int | None = None
    server_cpus: list[int] | None = None
    client_cpus: list[int] | None = None
    cpu_placement: str | None = None  # same-cpu, split or unpinned (settings/cell.placement_of)


def attempt_from(turn: Turn, outcome: Outcome, server_exit_code: int | None = None) -> Attempt:
    """The results file's record of one attempt, from its turn and its outcome."""
    window = outcome.window or WindowSamples()
    measured = outcome.measured
    return Attempt(
        repeat=turn.repeat, status=outcome.status, reason=outcome.reason, started_at=turn.started_at,
        port=turn.port, server_cpus=turn.server_cpus, client_cpus=turn.client_cpus, cpu_placement=turn.cpu_placement,
        server_pid=turn.server_pid,
        client_pid=outcome.client.pid, ready_after_s=outcome.server.ready_after_s,
        roundtrips=measured and measured.roundtrips, elapsed_s=measured and measured.elapsed_s,
        roundtrips_per_s=measured and measured.roundtrips_per_s,
        raw_roundtrips_per_s=measured and measured.raw_roundtrips_per_s,
        running_s=measured and measured.running_s,
        sentinel_roundtrips_per_roundtrip=measured and measured.sentinel_roundtrips_per_roundtrip,
        pace_not_applied=measured and measured.pace_not_applied,
        host_pace=window.host_pace, interior_minor_faults=window.interior_minor_faults,
        warmup_helpers=window.warmup_helpers, latency_histogram=measured and measured.latency_histogram,
        server_cpu_s=window.server_cpu_s, client_cpu_s=window.client_cpu_s,
        cpu_source=window.cpu_source if window.server_cpu_s is not None else None,
        server_minor_faults=window.server_minor_faults, client_minor_faults=window.client_minor_faults,
        server_scheduling=window.server_scheduling, client_scheduling=window.client_scheduling,
        cpu_steal_s=window.cpu_steal_s, cpu_pace_ns=window.cpu_pace_ns, window_wall_s=window.wall_s,
        window_spread=window.spread,
        server_peak_rss_bytes=window.server_peak_rss_bytes, tcp_counters=window.tcp_counters,
        sockets=window.sockets, syscalls=window.syscalls, profiles=window.profiles,
        signal_sampling_s=window.sampling_s,
        server_exit_code=server_exit_code, client_exit_code=outcome.client.exit_code,
        server_stderr_tail=outcome.server.stderr_tail, client_stderr_tail=outcome.client.stderr_tail,
        client_report=outcome.client.report, server_info=outcome.server.info,
        workload_figures=measured and measured.workload_figures, placement=outcome.placement)
