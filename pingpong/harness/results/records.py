"""The result record of a run: typed in memory, versioned JSON on disk, raw figures of every attempt kept."""

from __future__ import annotations

import copy
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from pingpong.contract import FORMER_SETTING_NAMES
from pingpong.harness.results.stored import read_json
from pingpong.harness.system.scheduling import Scheduling

# Written into every results file; raise it when a field changes meaning or goes away. 2: a cell's summary gives
# its rate's interval as interval_low/high/coverage/kind and precision (1 had a bootstrap ci_low/ci_high). 3: what
# the run learned is beside its settings, not in them: "rounds_outcome" (2 had stopped_by, measuring_s and
# server_start_s in configuration["rounds"]) and "topology" (2 had it as environment["cluster"]).
# 4: an attempt's roundtrips_per_s is its rate at the reference pace when its window had the host's pace in it
# (host_pace with pauses), beside raw_roundtrips_per_s, running_s and sentinel_roundtrips_per_roundtrip; a version-3
# file's rates are raw, and read as they are (a window without host_pace).
FORMAT_VERSION = 4
# What load() accepts: the current version and any older one it can still read. Summaries are never read back
# (they are recomputed from the attempts), so a version-1 file renders with today's statistics; a version-2 file's
# outcome and topology are read into their own fields (_moved_out_of_settings).
READABLE_FORMAT_VERSIONS = (1, 2, 3, 4)
SUITE = "websocket-pingpong-bench"
# What a configuration key means in a file written before the key existed: the behaviour then (resume and the
# combination of runs compare settings with it)
ABSENT_MEANS = {"load_per_worker": False, "warmup_helpers": "measured", "young_generation": "grows"}


def recorded_setting(run: "RunResult", key: str) -> Any:
    """A configuration key of a run, or what its absence means in a file written before the key existed."""
    return run.configuration.get(key, ABSENT_MEANS.get(key))


# The status of an attempt set aside because its host probe ran in the host's slow mode (its unit was measured
# again); its figures stay in the file, but it is neither a round of its cell nor a failure. Files from before the
# in-window pace (2026-11-27) only: the probe (PINGPONG_HOST_PROBE) is retired.
HOST_SLOW_STATUS = "host-slow"


@dataclass(frozen=True)
class Attempt:
    """One repeat of one cell: a fresh server process and one client run against it."""

    repeat: int  # 1-based
    status: str  # ok, or why not: not-ready, verification-failed, client-failed, timeout, server-crashed, error
    reason: str | None  # one line, for any status but ok
    started_at: str  # UTC, ISO 8601
    port: int | None = None
    server_cpus: list[int] | None = None  # CPUs the server was pinned to; None when not pinned
    client_cpus: list[int] | None = None
    # where the sides ran (settings/cell.py): same-cpu (one CPU for both, the orchestrator elsewhere), split (each
    # side on CPUs of its own), shared (both on every CPU: the server's --workers N took them all) or unpinned; None
    # in files from before placement was a setting (they were split)
    cpu_placement: str | None = None
    server_pid: int | None = None  # leader of the server's process group (checked to be gone after the attempt)
    client_pid: int | None = None
    ready_after_s: float | None = None  # from server start to its first completed WebSocket handshake
    roundtrips: int | None = None  # completed in the measured window (after warmup), counted by the driver
    elapsed_s: float | None = None  # length of the measured window, timed by the driver's monotonic clock
    # the headline: with the host's pace measured in the window (host_pace), the rate at the reference pace
    # (analysis/host_pace.py: raw_roundtrips_per_s x the window's sentinel ns per roundtrip / REFERENCE_SENTINEL_NS);
    # without it (host_pace {"off": ...}, files from before it), the raw rate roundtrips / elapsed_s
    roundtrips_per_s: float | None = None
    # the raw rate of a paced window: roundtrips per second the cell ran, its pauses left out (roundtrips / running_s)
    raw_roundtrips_per_s: float | None = None
    running_s: float | None = None  # elapsed_s less the window's pauses
    # the unit a reader can carry to another host: the cell's roundtrip measured in host-sentinel roundtrips timed in
    # the same window (1e9 / raw_roundtrips_per_s / the sentinel's ns per roundtrip)
    sentinel_roundtrips_per_roundtrip: float | None = None
    # a window with slices whose rate is not taken to the reference pace, and why: on one CPU, a cell busy less than
    # a quarter of its running time waits on timers or another host, which a pause does not stop
    # (analysis/host_pace.py)
    pace_not_applied: str | None = None
    # the host's pace in the window (measure/pacer.py): the CPUs, the slices' length, the pauses and their time, the
    # sentinel's ns per roundtrip over them (per CPU and each slice's), or {"off": why the window had none}
    host_pace: dict[str, Any] | None = None
    latency_histogram: str | None = None  # HdrHistogram of roundtrip durations (ns), compressed base64
    server_cpu_s: float | None = None  # CPU time (user+system) of the server's process tree over the window
    client_cpu_s: float | None = None  # the same for the client's process tree
    cpu_source: str | None = None  # where both came from: process-clock or schedstat (ns), stat-ticks (10 ms)
    # minor page faults of each side's process tree over the window (/proc/PID/stat minflt): a side that maps and
    # unmaps memory for every message shows about one per message (docs/methodology.md, "The allocator's state")
    server_minor_faults: int | None = None
    client_minor_faults: int | None = None
    # the same over the window's interior (a quarter to three quarters of its length), and that part's share of the
    # window's wall time: {"server": n, "client": n, "share": 0.5}. Whether a side stayed settled is judged on it
    # (analysis/summary.py): what a client does once at the window's edges (a first touch as it opens, the report it
    # builds as the end is sampled) is not a cost per roundtrip. None in files from before it
    interior_minor_faults: dict[str, Any] | None = None
    # the client's helper threads during its warm-up (measure/warmup_helpers.py): {"moved", "off_s",
    # "back_before_window_s", "all_on_measured"}, or {"off": why they stayed on the measured CPU}; None in files
    # from before 2026-11-29 (every thread stayed on the measured CPU) and for a cluster's attempts
    warmup_helpers: dict[str, Any] | None = None
    # how the kernel scheduled each side's threads over the window (system/scheduling.py): run delay (runnable,
    # waiting for a CPU), voluntary and involuntary context switches, user and system clock ticks, summed over the
    # threads present at both edges. None in files from before these readings, and for a --cluster run's server
    server_scheduling: Scheduling | None = None
    client_scheduling: Scheduling | None = None
    # seconds of each CPU's steal time over the window (/proc/stat): the hypervisor ran something else while this
    # guest's CPU was ready; {"cpu0": 0.0, "cpu1": 0.012}. A disturbed round shows here, on a shared VM.
    cpu_steal_s: dict[str, float] | None = None
    # the pace of the sides' CPUs right after the window: ns of CPU per iteration of a fixed loop run on each,
    # {"cpu1": 92.1}; files from before the in-window pace (2026-11-27) only (host_pace supersedes it)
    cpu_pace_ns: dict[str, float] | None = None
    window_wall_s: float | None = None  # wall time between the orchestrator's two CPU samples
    # Several client processes (released together by the start barrier): processes, and the spread in s of their
    # ready, window-start and window-end events as they reached the orchestrator (start_barrier.window_spread).
    window_spread: dict[str, Any] | None = None
    server_peak_rss_bytes: int | None = None  # sum of VmHWM over the server's process tree
    tcp_counters: dict[str, int] | None = None  # deltas of /proc/net/snmp and /proc/net/netstat over the window
    sockets: dict[str, Any] | None = None  # per side: TCP_NODELAY of each connection as the kernel has it
    syscalls: dict[str, Any] | None = None  # per side: strace -c counts over the window (diagnose only)
    # per side: the CPU profile taken over the window (diagnose --profile only): system/profilers.Capture's fields
    profiles: dict[str, Any] | None = None
    signal_sampling_s: float | None = None  # orchestrator CPU time spent sampling inside the window (at its start)
    server_exit_code: int | None = None
    client_exit_code: int | None = None
    server_stderr_tail: str | None = None  # kept when the attempt failed or the server did not stop cleanly
    client_stderr_tail: str | None = None
    client_report: dict[str, Any] | None = None  # the driver's JSON (its histogram moved to latency_histogram)
    server_info: dict[str, Any] | None = None  # what the server reported about itself from its running loop
    # The workload's own figures (workload_figures.py): "broadcast" (deliveries, latency to the first and the last
    # receiver), "open_loop" (offered and achieved rates, send lag), "idle" (connections held, server memory)
    workload_figures: dict[str, Any] | None = None
    # --cluster: where each side ran (hosts, whether they share a network), the hosts' clock offsets, the window's
    # edges on the orchestrator's clock, and each side's kernel TCP counters from its own host
    placement: dict[str, Any] | None = None
    # --workers (a server with the manifest's "workers" feature): count, the Redis broker (version, and its own
    # PUBLISH calls and CPU over the window) and each worker's counts of messages relayed in-process and through
    # the broker (measure/local.workers_record; docs/results-format.md)
    workers: dict[str, Any] | None = None
    # PINGPONG_HOST_PROBE=1, files from before the in-window pace (2026-11-27) only: the host sentinel's slice on each
    # measured CPU just before the client's go and just after it ended, each CPU's fast level, and whether either ran
    # in the host's slow mode
    host_probe: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def set_aside(self) -> bool:
        """Measured, but in the host's slow mode by its probe, and measured again: not the cell's (files from before
        the in-window pace, 2026-11-27)."""
        return self.status == HOST_SLOW_STATUS

    @property
    def paced(self) -> bool:
        """Whether roundtrips_per_s is at the reference pace (the window had the host's pace in it)."""
        return self.raw_roundtrips_per_s is not None

    @property
    def raw_rate(self) -> float | None:
        """Roundtrips per second the cell ran: a paced window's raw rate (its pauses left out), else the rate."""
        return self.raw_roundtrips_per_s if self.paced else self.roundtrips_per_s

    @property
    def pace_scale(self) -> float:
        """What turns a time per roundtrip measured in this window into one at the reference pace: the raw rate over
        the paced one (1 for a window without the host's pace)."""
        if not self.paced or not self.roundtrips_per_s:
            return 1.0
        return self.raw_roundtrips_per_s / self.roundtrips_per_s

    @property
    def sampled_wall_s(self) -> float | None:
        """The running time between the orchestrator's two samples of the window: its wall time less its pauses."""
        if self.window_wall_s is None:
            return None
        # only a paced window's pauses are left out: a cell waiting on timers (pace_not_applied) went on through them
        paused = ((self.host_pace or {}).get("paused_s") or 0.0) if self.paced else 0.0
        return self.window_wall_s - paused

    @property
    def sampled_roundtrips(self) -> float | None:
        """The roundtrips of the window the orchestrator sampled (several client processes share one): its raw rate
        over its running time; None when either is unknown."""
        if not self.raw_rate or not self.sampled_wall_s:
            return None
        return self.raw_rate * self.sampled_wall_s

    def scheduling(self, side: str) -> Scheduling | None:
        """The server's or the client's scheduling over the window."""
        return self.server_scheduling if side == "server" else self.client_scheduling


@dataclass
class Cell:
    """One server x client pair: its attempts, or why it is not measured."""

    server: str
    client: str
    skipped: str | None = None  # reason the pair is not measured (unavailable, incompatible, unsupported setting)
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.skipped:
            return "skipped"
        if not self.attempts:
            return "pending"
        counted = [attempt for attempt in self.attempts if not attempt.set_aside]
        if not counted:  # set aside and not yet measured again
            return "pending"
        good = sum(attempt.ok for attempt in counted)
        return "ok" if good == len(counted) else "failed" if good == 0 else "partial"

    def rates(self) -> list[float]:
        return [attempt.roundtrips_per_s for attempt in self.attempts if attempt.ok]

    def rates_by_round(self) -> dict[int, float]:
        """{repeat: roundtrips_per_s} over good attempts: a run measures repeat r of every cell in round r."""
        return {attempt.repeat: attempt.roundtrips_per_s for attempt in self.attempts if attempt.ok}


@dataclass(frozen=True)
class RoundsOutcome:
    """How a run's rounds ended, recorded once they have: the results file's "rounds_outcome",
    {"stopped_by": ..., "measuring_s": ..., "server_start_s": ...} (null while the rounds run)."""

    stopped_by: str | None  # precise, budget, max-rounds, rounds or interrupted (None: stopped by an error)
    measuring_s: float | None  # wall time of the rounds, s (to 0.1 s)
    server_start_s: float | None  # the median server start (readiness and verification) the budget used, s


OUTCOME_KEYS = tuple(f.name for f in fields(RoundsOutcome))  # format 2 kept them in configuration["rounds"]


@dataclass
class RunResult:
    """Everything a run measured and how: the file format of results/*.json. What was asked (configuration) is
    settled before the rounds start; what the run learns (rounds_outcome, topology) has fields of its own."""

    started_at: str
    command_line: list[str]
    configuration: dict[str, Any]  # every setting that shapes the figures (RunConfiguration.recorded())
    environment: dict[str, Any]  # machine, kernel, runtimes, suite commit
    implementations: dict[str, dict[str, Any]]  # role -> name -> manifest entry and availability
    cells: list[Cell]
    finished_at: str | None = None
    interrupted: bool = False
    rounds_outcome: RoundsOutcome | None = None  # why and when the rounds stopped (set when they end)
    # --cluster: the scheduler, the hosts with their roles, the links between them and the raw-TCP floor across
    # the link (cluster.measurer's Cluster.topology() and measure_floor); None on one machine
    topology: dict[str, Any] | None = None
    # run --profile: per profiled cell ("server × client"), its profiles set against a healthy pair's
    # (commands/run_profiles.py), or {"note": why not}; None without --profile
    profiles: dict[str, Any] | None = None
    # what one cross-CPU wakeup costs on this host, from the C floor in both placements before the rounds
    # (analysis/host_wakeup.HostWakeup.to_json); None when not measured (--host-figure, files from before it)
    host_wakeup: dict[str, Any] | None = None
    format_version: int = FORMAT_VERSION
    suite: str = SUITE

    def cell(self, server: str, client: str) -> Cell:
        for cell in self.cells:
            if cell.server == server and cell.client == client:
                return cell
        raise KeyError(f"no cell {server} x {client}")

    def to_dict(self, summaries: dict[tuple[str, str], Any] | None = None) -> dict[str, Any]:
        """The results file's content; summaries (summary.CellSummary per cell) are saved as their to_json().

        What asdict() would give, but each attempt (frozen: a changed one is a new object) is converted once per
        run, not at every save: the record is saved after every round, and converting hundreds of attempts took
        0.1 s. The attempts' dicts are shared between calls: read them, never change them."""
        converted = getattr(self, "_attempt_dicts", {})
        kept: dict[int, tuple[Attempt, dict[str, Any]]] = {}
        data: dict[str, Any] = {}
        for run_field in fields(self):
            if run_field.name == "rounds_outcome":
                data["rounds_outcome"] = asdict(self.rounds_outcome) if self.rounds_outcome else None
                continue
            if run_field.name != "cells":
                data[run_field.name] = copy.deepcopy(getattr(self, run_field.name))  # as asdict() copies it
                continue
            data["cells"] = []
            for cell in self.cells:
                attempts = []
                for attempt in cell.attempts:
                    entry = converted.get(id(attempt))
                    if entry is None or entry[0] is not attempt:
                        entry = (attempt, asdict(attempt))
                    kept[id(attempt)] = entry
                    attempts.append(entry[1])
                cell_data = {cell_field.name: copy.deepcopy(getattr(cell, cell_field.name))
                             for cell_field in fields(cell) if cell_field.name != "attempts"}
                cell_data["attempts"] = attempts
                cell_data["status"] = cell.status
                if summaries and (cell.server, cell.client) in summaries:
                    cell_data["summary"] = summaries[(cell.server, cell.client)].to_json()
                data["cells"].append(cell_data)
        self._attempt_dicts = kept
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunResult":
        version = data.get("format_version")
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise ValueError(f"results format version {version} is newer than this suite reads "
                             f"(up to {FORMAT_VERSION}); update the suite to read this file")
        if version not in READABLE_FORMAT_VERSIONS:
            raise ValueError(f"results format version {version!r} is not supported "
                             f"(this suite reads versions {', '.join(map(str, READABLE_FORMAT_VERSIONS))})")
        attempt_fields = {f.name for f in fields(Attempt)}
        cells = [Cell(server=c["server"], client=c["client"], skipped=c.get("skipped"),
                      attempts=[attempt_from_dict(a, attempt_fields) for a in c.get("attempts", [])])
                 for c in data["cells"]]
        # read into today's record: the attempts are the same in every readable version, and the summaries are
        # recomputed, so a file saved again (report --format json) is of the current version
        if version in (1, 2):
            data = _moved_out_of_settings(data)
        run_fields = {f.name for f in fields(cls)} - {"cells", "format_version", "rounds_outcome"}
        outcome = data.get("rounds_outcome")
        return cls(cells=cells, rounds_outcome=RoundsOutcome(**outcome) if outcome else None,
                   **{k: v for k, v in data.items() if k in run_fields})


SCHEDULING_FIELDS = ("server_scheduling", "client_scheduling")  # typed records inside an attempt


def attempt_from_dict(data: dict[str, Any], attempt_fields: set[str]) -> Attempt:
    """An attempt read from a file: its known fields, reported settings under today's names, scheduling typed."""
    values = {name: _current_names(name, value) for name, value in data.items() if name in attempt_fields}
    for name in SCHEDULING_FIELDS:
        values[name] = Scheduling.from_dict(values.get(name))
    return Attempt(**values)


def _moved_out_of_settings(data: dict[str, Any]) -> dict[str, Any]:
    """A format-2 file's run as format 3 has it: configuration["rounds"]'s stopped_by, measuring_s and
    server_start_s as "rounds_outcome", environment["cluster"] as "topology" (a copy; data is left as it is)."""
    configuration, environment = dict(data["configuration"]), dict(data["environment"])
    rounds = configuration.get("rounds")
    outcome = None
    if isinstance(rounds, dict) and any(key in rounds for key in OUTCOME_KEYS):
        outcome = {key: rounds.get(key) for key in OUTCOME_KEYS}
        configuration["rounds"] = {key: value for key, value in rounds.items() if key not in OUTCOME_KEYS}
    topology = environment.pop("cluster", None)
    return {**data, "configuration": configuration, "environment": environment, "rounds_outcome": outcome,
            "topology": topology}


def _current_names(field_name: str, value: Any) -> Any:
    """A saved attempt field with the reported settings under the contract's names (older files used others)."""
    if field_name != "client_report" or not isinstance(value, dict) or not isinstance(value.get("settings"), dict):
        return value
    settings = {FORMER_SETTING_NAMES.get(name, name): setting for name, setting in value["settings"].items()}
    return {**value, "settings": settings}


def write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader (or a crash) never sees half a file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def load(path: Path) -> RunResult:
    """A saved run, from its plain or compressed JSON file (stored.read_json)."""
    return RunResult.from_dict(read_json(path))
