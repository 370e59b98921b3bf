"""Derived figures of a cell, computed from its raw attempts: pure functions, recomputable from any results file.

The figures are typed records (CellSummary, with Latency, SideCpu and time_budget.TimeBudget inside). In a results
file each cell carries its summary as CellSummary.to_json(): one flat object whose keys are listed, with unit and
meaning, beside the fields below. A figure that could not be measured is None (null), never a fake zero.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from pingpong.contract import DEFAULT_PAYLOAD_SIZE
from pingpong.harness.analysis import anomalies, workload_figures
from pingpong.harness.analysis.stats import RATE_DISTURBED_SIDE, Summary, summarize
from pingpong.harness.analysis.time_budget import TimeBudget, time_budget
from pingpong.harness.results import histograms
from pingpong.harness.results.records import Cell, RunResult
from pingpong.harness.settings.cell import DEFAULT_SATURATION_P99_MS

SATURATED_UTILIZATION = 0.8  # a side using >= 80% of one CPU over the window is treated as the bottleneck
SIDES = ("server", "client")


@dataclass(frozen=True)
class Latency:
    """Roundtrip latency of every good attempt, histograms merged (JSON "latency"; only "count" when it is 0)."""

    count: int  # "count": roundtrips recorded
    p50_ns: int | None = None  # "p50_ns": median roundtrip duration, ns
    p90_ns: int | None = None  # "p90_ns"
    p99_ns: int | None = None  # "p99_ns"
    p99_9_ns: int | None = None  # "p99.9_ns"
    max_ns: int | None = None  # "max_ns": slowest roundtrip, ns
    mean_ns: float | None = None  # "mean_ns"
    slow_share: float | None = None  # "slow_share": fraction of roundtrips slower than 35 ms (a delayed-ACK stall)

    def to_json(self) -> dict[str, Any]:
        if self.count == 0:
            return {"count": 0}
        return {"count": self.count, "p50_ns": self.p50_ns, "p90_ns": self.p90_ns, "p99_ns": self.p99_ns,
                "p99.9_ns": self.p99_9_ns, "max_ns": self.max_ns, "mean_ns": self.mean_ns,
                "slow_share": self.slow_share}


@dataclass(frozen=True)
class SideCpu:
    """One side's CPU over the measured window, median over good attempts; None where it was not sampled."""

    us_per_roundtrip: float | None = None  # "<side>_cpu_us_per_roundtrip": user+system µs of its process tree
    utilization: float | None = None  # "<side>_cpu_utilization": CPU time / wall time (1.0 = one core busy)
    # "<side>_minor_faults_per_roundtrip": minor page faults of its process tree per roundtrip (about 1 per message
    # received when its allocator maps and unmaps each read buffer)
    minor_faults_per_roundtrip: float | None = None
    # "<side>_faults_checked": attempts whose window counted its page faults; "<side>_unsettled_attempts": those whose
    # faults that grow with the roundtrips cost SETTLED_COST_SHARE of a roundtrip or more at the run's cost of a fault
    # (without that figure, older files: more than SETTLED_FAULTS_PER_ROUNDTRIP); "<side>_max_faults_per_
    # roundtrip": the most any attempt had; "<side>_max_fault_cost_share": the largest share of its roundtrip they cost
    faults_checked: int = 0
    unsettled_attempts: int = 0
    max_faults_per_roundtrip: float | None = None
    max_fault_cost_share: float | None = None
    # "<side>_interior_faults_per_roundtrip": the median attempt's faults per roundtrip that grow with the roundtrips
    # (interior_faults_per_roundtrip): what the flag of a side mapping fresh memory per message reads
    interior_faults_per_roundtrip: float | None = None


SETTLED_FAULTS_PER_ROUNDTRIP = anomalies.SETTLED_FAULTS_PER_ROUNDTRIP
SETTLED_COST_SHARE = anomalies.SETTLED_COST_SHARE


@dataclass(frozen=True)
class CellSummary:
    """A cell's figures. Skipped: status and reason. No good attempt: status and failures. Otherwise all figures.

    The JSON mapping (to_json) is flat; each field's comment names its key. Anomaly fields (expected rate, flags)
    are filled in by anomalies.annotate, which needs the whole matrix.
    """

    status: str  # "status": ok, partial, failed, skipped, pending (Cell.status)
    reason: str | None = None  # "reason": why a skipped cell is not measured (skipped cells only)
    failures: tuple[str, ...] = ()  # "failures": "repeat N: status: reason" per failed attempt (absent when none)
    roundtrips_per_s: Summary | None = None  # "roundtrips_per_s": over good attempts; None (absent) when none
    latency: Latency | None = None  # "latency": absent when no attempt recorded a histogram
    server_cpu: SideCpu = SideCpu()  # "server_cpu_us_per_roundtrip", "server_cpu_utilization"
    client_cpu: SideCpu = SideCpu()  # "client_cpu_us_per_roundtrip", "client_cpu_utilization"
    # "server_time_budget", "client_time_budget": where a roundtrip's time goes on each side (time_budget.py); None
    # (absent) when no attempt read the side's scheduling (files from before the readings; a cluster run's server)
    server_time_budget: TimeBudget | None = None
    client_time_budget: TimeBudget | None = None
    bottleneck: str | None = None  # "bottleneck": server, client, both, neither, or unknown
    server_peak_rss_bytes: int | None = None  # "server_peak_rss_bytes": max over attempts of the tree's VmHWM sum
    signal_sampling_ms: float | None = None  # "signal_sampling_ms": orchestrator CPU ms spent sampling in the window
    server_loop: str | None = None  # "server_loop": event loop the server reported running on
    client_loop: str | None = None  # "client_loop": event loop the client driver reported
    compression_negotiated: str | None = None  # "compression_negotiated": extensions header(s); None when none
    client_tcp_nodelay: bool | None = None  # "client_tcp_nodelay": all client sockets (kernel, else driver's report)
    address_family: str | None = None  # "address_family": ipv4, ipv6 (comma-joined when mixed)
    tcp_per_roundtrip: dict[str, float] | None = None  # "tcp_per_roundtrip": kernel TCP counter deltas / roundtrip
    segments_per_message: float | None = None  # "segments_per_message": Tcp.OutSegs / 4 messages per roundtrip
    delayed_acks_per_roundtrip: float | None = None  # "delayed_acks_per_roundtrip": TcpExt.DelayedACKs
    retransmits_per_roundtrip: float | None = None  # "retransmits_per_roundtrip": Tcp.RetransSegs
    server_tcp_nodelay: bool | None = None  # "server_tcp_nodelay": all server sockets, read from the kernel
    server_sockets_note: str | None = None  # "server_sockets_note": why the kernel could not be asked
    client_sockets_note: str | None = None  # "client_sockets_note"
    expected_roundtrips_per_s: float | None = None  # "expected_roundtrips_per_s": the matrix model's prediction
    rate_vs_expected: float | None = None  # "rate_vs_expected": observed median / expected
    flags: tuple[str, ...] | None = None  # "flags": one-line anomaly reasons; None (absent) until annotated
    # "unsettled": per side whose allocator did not stay settled in some attempt (page faults in its window's interior
    # that cost SETTLED_COST_SHARE of a roundtrip or more: side_cpu), one line saying in how many and why;
    # filled in by anomalies.annotate (it knows the runtimes), absent when every attempt was settled
    unsettled: tuple[str, ...] = ()
    # "workload": the figures of broadcast, open loop or idle connections (workload_figures.summarize_workload)
    workload: dict[str, Any] | None = None

    @property
    def measured(self) -> bool:
        """Whether any attempt succeeded, so the figures exist."""
        return self.roundtrips_per_s is not None

    @property
    def noisy(self) -> bool | None:
        """"noisy": the rate's coefficient of variation reaches stats.NOISY_CV; None when not measured."""
        return self.roundtrips_per_s.noisy if self.roundtrips_per_s is not None else None

    def cpu(self, side: str) -> SideCpu:
        return self.server_cpu if side == "server" else self.client_cpu

    def time_budget(self, side: str) -> TimeBudget | None:
        return self.server_time_budget if side == "server" else self.client_time_budget

    def tcp_nodelay(self, side: str) -> bool | None:
        return self.server_tcp_nodelay if side == "server" else self.client_tcp_nodelay

    def to_json(self) -> dict[str, Any]:
        """The summary as saved in a results file, keys in the order files have always had them."""
        data: dict[str, Any] = {"status": self.status}
        if self.status == "skipped":
            data["reason"] = self.reason
            return data
        if self.failures:
            data["failures"] = list(self.failures)
        if self.roundtrips_per_s is None:
            return data
        data["roundtrips_per_s"] = asdict(self.roundtrips_per_s)
        data["noisy"] = self.noisy
        if self.latency is not None:
            data["latency"] = self.latency.to_json()
        for side in SIDES:
            data[f"{side}_cpu_us_per_roundtrip"] = self.cpu(side).us_per_roundtrip
            data[f"{side}_cpu_utilization"] = self.cpu(side).utilization
            if self.cpu(side).minor_faults_per_roundtrip is not None:
                data[f"{side}_minor_faults_per_roundtrip"] = self.cpu(side).minor_faults_per_roundtrip
                data[f"{side}_interior_faults_per_roundtrip"] = self.cpu(side).interior_faults_per_roundtrip
                data[f"{side}_max_faults_per_roundtrip"] = self.cpu(side).max_faults_per_roundtrip
                if self.cpu(side).max_fault_cost_share is not None:
                    data[f"{side}_max_fault_cost_share"] = self.cpu(side).max_fault_cost_share
                data[f"{side}_faults_checked"] = self.cpu(side).faults_checked
                data[f"{side}_unsettled_attempts"] = self.cpu(side).unsettled_attempts
        for side in SIDES:
            if self.time_budget(side) is not None:
                data[f"{side}_time_budget"] = self.time_budget(side).to_json()
        data.update(bottleneck=self.bottleneck, server_peak_rss_bytes=self.server_peak_rss_bytes,
                    signal_sampling_ms=self.signal_sampling_ms, server_loop=self.server_loop,
                    client_loop=self.client_loop, compression_negotiated=self.compression_negotiated,
                    client_tcp_nodelay=self.client_tcp_nodelay, address_family=self.address_family,
                    tcp_per_roundtrip=self.tcp_per_roundtrip)
        if self.tcp_per_roundtrip is not None:
            data.update(segments_per_message=self.segments_per_message,
                        delayed_acks_per_roundtrip=self.delayed_acks_per_roundtrip,
                        retransmits_per_roundtrip=self.retransmits_per_roundtrip)
        data.update(server_tcp_nodelay=self.server_tcp_nodelay, server_sockets_note=self.server_sockets_note,
                    client_sockets_note=self.client_sockets_note)
        if self.expected_roundtrips_per_s is not None:
            data.update(expected_roundtrips_per_s=self.expected_roundtrips_per_s,
                        rate_vs_expected=self.rate_vs_expected)
        if self.flags is not None:
            data["flags"] = list(self.flags)
        if self.unsettled:
            data["unsettled"] = list(self.unsettled)
        if self.workload is not None:
            data["workload"] = self.workload
        return data


Summaries = dict[tuple[str, str], CellSummary]


def summarize_cell(cell: Cell, saturation_p99_ms: float = DEFAULT_SATURATION_P99_MS,
                   us_per_fault: float | None = None) -> CellSummary:
    """A cell's summary over its good attempts; us_per_fault, the run's cost of a page fault (system/page_faults.py),
    judges whether each side's allocator stayed settled (side_cpu)."""
    if cell.skipped:
        return CellSummary(status=cell.status, reason=cell.skipped)
    failures = tuple(f"repeat {a.repeat}: {a.status}: {a.reason}" for a in cell.attempts
                     if not a.ok and not a.set_aside)
    good = [attempt for attempt in cell.attempts if attempt.ok]
    if not good:
        return CellSummary(status=cell.status, failures=failures)
    encoded = [attempt.latency_histogram for attempt in good if attempt.latency_histogram]
    cpu = {side: side_cpu(good, side, us_per_fault) for side in SIDES}
    peaks = [a.server_peak_rss_bytes for a in good if a.server_peak_rss_bytes]
    sampling = [a.signal_sampling_s for a in good if a.signal_sampling_s is not None]
    observed = observed_settings(good[-1])
    sockets = socket_signals(good[-1], observed["client_tcp_nodelay"])
    rates = summarize([attempt.roundtrips_per_s for attempt in good], RATE_DISTURBED_SIDE)
    budgets = {side: time_budget(good, side, cpu[side].us_per_roundtrip, rates.median) for side in SIDES}
    return CellSummary(
        status=cell.status, failures=failures, roundtrips_per_s=rates,
        latency=latency_of(histograms.merge(encoded)) if encoded else None,
        server_cpu=cpu["server"], client_cpu=cpu["client"],
        server_time_budget=budgets["server"], client_time_budget=budgets["client"],
        bottleneck=bottleneck(cpu["server"].utilization, cpu["client"].utilization),
        server_peak_rss_bytes=max(peaks) if peaks else None,
        signal_sampling_ms=statistics.median(sampling) * 1e3 if sampling else None,
        workload=workload_figures.summarize_workload(good, saturation_p99_ms),
        **{**observed, **tcp_signals(good), **sockets})


def latency_of(histogram) -> Latency:
    figures = histograms.latency_summary(histogram)
    return Latency(count=figures["count"], p50_ns=figures.get("p50_ns"), p90_ns=figures.get("p90_ns"),
                   p99_ns=figures.get("p99_ns"), p99_9_ns=figures.get("p99.9_ns"), max_ns=figures.get("max_ns"),
                   mean_ns=figures.get("mean_ns"), slow_share=figures.get("slow_share"))


def cpu_us_per_roundtrip(attempt, side: str) -> float | None:
    """µs of one side's CPU (user+system of its process tree) per roundtrip in an attempt, at the reference pace
    when its window had the host's pace in it (Attempt.pace_scale); None if not sampled."""
    cpu_s = getattr(attempt, f"{side}_cpu_s")
    if cpu_s is None or not attempt.roundtrips:
        return None
    roundtrips = attempt.sampled_roundtrips or attempt.roundtrips  # several client processes share one window
    return cpu_s / roundtrips * 1e6 * attempt.pace_scale


def interior_faults_per_roundtrip(attempt, side: str) -> float | None:
    """Page faults per roundtrip that grow with the roundtrips: the fewer of the two parts of the window's interior
    (a quarter to a half of its length, a half to three quarters), each over its own roundtrips. A cost per message
    shows in both; one the window pays once (a heap that grows, a garbage collector's new pages) in one at most; what
    a client does at the window's edges (a first touch as it opens, the report it builds while the end is sampled:
    about 60 faults for the websockets client) in neither. Any of those, divided by the roundtrips of a slow window,
    would cross the settled line on a slow host. The whole window's faults for files from before the readings."""
    interior = attempt.interior_minor_faults or {}
    roundtrips = attempt.sampled_roundtrips
    parts, shares = interior.get(f"{side}_parts"), interior.get("part_shares")
    if not parts or None in parts or not shares:
        faults = getattr(attempt, f"{side}_minor_faults", None)
        return faults / roundtrips if faults is not None and roundtrips else None
    if not roundtrips or not all(shares):
        return None
    return min(count / (roundtrips * share) for count, share in zip(parts, shares))


def fault_cost_share(attempt, faults_per_roundtrip: float, us_per_fault: float) -> float | None:
    """What a side's faults per roundtrip cost as a share of the roundtrip the cell ran (its raw rate: the faults
    took their µs at the host's pace of that window, as the roundtrips did)."""
    rate = attempt.raw_rate
    return faults_per_roundtrip * us_per_fault * rate / 1e6 if rate else None


def side_cpu(good: list, side: str, us_per_fault: float | None = None) -> SideCpu:
    """Median CPU per roundtrip, CPU/wall and page faults per roundtrip of one side over the good attempts that
    sampled them. Whether each stayed settled is judged on the faults of the window's interior: with the run's cost
    of a fault, on what they cost (SETTLED_COST_SHARE of the roundtrip or more); without it (older files), on their
    number (SETTLED_FAULTS_PER_ROUNDTRIP)."""
    samples = [(getattr(a, f"{side}_cpu_s"), a) for a in good if getattr(a, f"{side}_cpu_s") is not None]
    per_roundtrip = [value for a in good if (value := cpu_us_per_roundtrip(a, side)) is not None]
    utilization = [cpu_s / a.sampled_wall_s for cpu_s, a in samples if a.sampled_wall_s]
    faults = [getattr(a, f"{side}_minor_faults") / a.sampled_roundtrips for a in good
              if getattr(a, f"{side}_minor_faults", None) is not None and a.sampled_roundtrips]
    interior_of = [(value, a) for a in good if (value := interior_faults_per_roundtrip(a, side)) is not None]
    interior = [value for value, _ in interior_of]
    if us_per_fault:
        shares = [share for value, a in interior_of
                  if (share := fault_cost_share(a, value, us_per_fault)) is not None]
        unsettled = sum(share >= SETTLED_COST_SHARE for share in shares)
    else:
        shares = []
        unsettled = sum(value > SETTLED_FAULTS_PER_ROUNDTRIP for value in interior)
    return SideCpu(us_per_roundtrip=statistics.median(per_roundtrip) if per_roundtrip else None,
                   utilization=statistics.median(utilization) if utilization else None,
                   minor_faults_per_roundtrip=statistics.median(faults) if faults else None,
                   faults_checked=len(interior),
                   unsettled_attempts=unsettled,
                   max_faults_per_roundtrip=max(interior) if interior else None,
                   max_fault_cost_share=max(shares) if shares else None,
                   interior_faults_per_roundtrip=statistics.median(interior) if interior else None)


MESSAGES_PER_ROUNDTRIP = 4  # A -> server, server -> B, B -> server, server -> A: each a send() with data


def tcp_signals(good: list) -> dict[str, Any]:
    """The kernel's TCP counters per roundtrip (median over repeats), from deltas over each measured window.

    The orchestrator's samples bracket the driver's window; roundtrips in the sampled interval are estimated as
    the driver's rate times the sampled wall time.
    """
    per_roundtrip: dict[str, list[float]] = {}
    for attempt in good:
        counters = attempt.tcp_counters
        roundtrips = attempt.sampled_roundtrips
        if not counters or not roundtrips:
            continue
        for name, delta in counters.items():
            per_roundtrip.setdefault(name, []).append(delta / roundtrips)
    if not per_roundtrip:
        return {"tcp_per_roundtrip": None}
    medians = {name: statistics.median(values) for name, values in per_roundtrip.items()}
    segments = medians.get("Tcp.OutSegs")
    return {
        "tcp_per_roundtrip": medians,
        "segments_per_message": segments / MESSAGES_PER_ROUNDTRIP if segments is not None else None,
        "delayed_acks_per_roundtrip": medians.get("TcpExt.DelayedACKs"),
        "retransmits_per_roundtrip": medians.get("Tcp.RetransSegs"),
    }


def socket_signals(attempt, reported_client_nodelay: bool | None) -> dict[str, Any]:
    """TCP_NODELAY of each side's connections as the kernel has it (read from outside every runtime).

    Falls back to the client's own report where the kernel could not be asked.
    """
    found: dict[str, Any] = {}
    for side in SIDES:
        reading = (attempt.sockets or {}).get(side) or {}
        values = reading.get("tcp_nodelay")
        if values:
            found[f"{side}_tcp_nodelay"] = all(values)
        else:
            found[f"{side}_tcp_nodelay"] = reported_client_nodelay if side == "client" else None
        found[f"{side}_sockets_note"] = reading.get("error")
    return found


def bottleneck(server_utilization: float | None, client_utilization: float | None) -> str:
    """Which side saturates its CPU: 'server', 'client', 'both', or 'neither' (the pair is waiting, not computing)."""
    if server_utilization is None or client_utilization is None:
        return "unknown"
    server_busy = server_utilization >= SATURATED_UTILIZATION
    client_busy = client_utilization >= SATURATED_UTILIZATION
    if server_busy and client_busy:
        return "both"
    if server_busy or client_busy:
        return "server" if server_busy else "client"
    return "neither"


def observed_settings(attempt) -> dict[str, Any]:
    """What actually ran, as each side reported it: loops, negotiated extensions, TCP_NODELAY, address family."""
    report = attempt.client_report or {}
    info = attempt.server_info or {}
    connections = report.get("connections") or []
    extensions = sorted({c.get("extensions") for c in connections if c.get("extensions")})
    nodelay = {c.get("tcp_nodelay") for c in connections}
    return {
        "server_loop": info.get("loop"),
        "client_loop": report.get("loop"),
        "compression_negotiated": ", ".join(extensions) if extensions else None,
        "client_tcp_nodelay": None if None in nodelay or not nodelay else all(nodelay),
        "address_family": ",".join(sorted({c.get("family") or "?" for c in connections})) or None,
    }


def summarize_run(run: RunResult) -> Summaries:
    """Every cell's summary, with the anomaly flags that need the whole matrix."""
    threshold = run.configuration.get("saturation_p99_ms") or DEFAULT_SATURATION_P99_MS
    fault_us = us_per_fault(run.environment)
    summaries = {(cell.server, cell.client): summarize_cell(cell, threshold, fault_us) for cell in run.cells}
    runtimes = {(role, name): entry.get("runtime") for role, entries in run.implementations.items()
                for name, entry in entries.items()}
    return anomalies.annotate(summaries, run.configuration.get("payload_size", DEFAULT_PAYLOAD_SIZE),
                              workload_kind(run.configuration), runtimes, run.configuration.get("malloc"),
                              run.configuration.get("young_generation"))


def us_per_fault(environment: dict[str, Any] | None) -> float | None:
    """The cost of a page fault a run measured (environment["page_fault"], system/page_faults.py), or None (files
    from before 2026-11-28 23:50 UTC have none)."""
    record = (environment or {}).get("page_fault") or {}
    value = record.get("us_per_fault")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def workload_kind(configuration: dict[str, Any]) -> str:
    """pingpong, handshake, broadcast, or open-loop (the ping-pong at a --rate): what the anomaly rules and the
    reports' units go by. Idle connections leave the pair's closed-loop ping-pong as it is."""
    workload = configuration.get("workload", "pingpong")
    return "open-loop" if workload == "pingpong" and configuration.get("rate") is not None else workload
