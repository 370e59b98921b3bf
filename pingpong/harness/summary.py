"""Derived figures of a cell, computed from its raw attempts: pure functions, recomputable from any results file."""

from __future__ import annotations

import statistics
from dataclasses import asdict
from typing import Any

from pingpong.harness import anomalies, histograms
from pingpong.contract import DEFAULT_PAYLOAD_SIZE
from pingpong.harness.results import Cell, RunResult
from pingpong.harness.stats import summarize

SATURATED_UTILIZATION = 0.8  # a side using >= 80% of one CPU over the window is treated as the bottleneck


def summarize_cell(cell: Cell) -> dict[str, Any]:
    summary: dict[str, Any] = {"status": cell.status}
    if cell.skipped:
        summary["reason"] = cell.skipped
        return summary
    failures = [f"repeat {a.repeat}: {a.status}: {a.reason}" for a in cell.attempts if not a.ok]
    if failures:
        summary["failures"] = failures
    good = [attempt for attempt in cell.attempts if attempt.ok]
    if not good:
        return summary
    rates = summarize([attempt.roundtrips_per_s for attempt in good])
    summary["roundtrips_per_s"] = asdict(rates)
    summary["noisy"] = rates.noisy
    encoded = [attempt.latency_histogram for attempt in good if attempt.latency_histogram]
    if encoded:
        summary["latency"] = histograms.latency_summary(histograms.merge(encoded))
    for side in ("server", "client"):
        per_roundtrip = [getattr(a, f"{side}_cpu_s") / a.roundtrips * 1e6 for a in good
                         if getattr(a, f"{side}_cpu_s") is not None and a.roundtrips]
        utilization = [getattr(a, f"{side}_cpu_s") / a.window_wall_s for a in good
                       if getattr(a, f"{side}_cpu_s") is not None and a.window_wall_s]
        summary[f"{side}_cpu_us_per_roundtrip"] = statistics.median(per_roundtrip) if per_roundtrip else None
        summary[f"{side}_cpu_utilization"] = statistics.median(utilization) if utilization else None
    summary["bottleneck"] = bottleneck(summary["server_cpu_utilization"], summary["client_cpu_utilization"])
    peaks = [a.server_peak_rss_bytes for a in good if a.server_peak_rss_bytes]
    summary["server_peak_rss_bytes"] = max(peaks) if peaks else None
    sampling = [a.signal_sampling_s for a in good if a.signal_sampling_s is not None]
    summary["signal_sampling_ms"] = statistics.median(sampling) * 1e3 if sampling else None
    summary.update(observed_settings(good[-1]))
    summary.update(tcp_signals(good))
    summary.update(socket_signals(good[-1], summary))
    return summary


MESSAGES_PER_ROUNDTRIP = 4  # A -> server, server -> B, B -> server, server -> A: each a send() with data


def tcp_signals(good: list) -> dict[str, Any]:
    """The kernel's TCP counters per roundtrip (median over repeats), from deltas over each measured window.

    The orchestrator's samples bracket the driver's window; roundtrips in the sampled interval are estimated as
    the driver's rate times the sampled wall time.
    """
    per_roundtrip: dict[str, list[float]] = {}
    for attempt in good:
        counters = attempt.tcp_counters
        if not counters or not attempt.window_wall_s or not attempt.roundtrips_per_s:
            continue
        roundtrips = attempt.roundtrips_per_s * attempt.window_wall_s
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


def socket_signals(attempt, summary: dict[str, Any]) -> dict[str, Any]:
    """TCP_NODELAY of each side's connections as the kernel has it (read from outside every runtime).

    Falls back to the client's own report where the kernel could not be asked.
    """
    found: dict[str, Any] = {}
    for side in ("server", "client"):
        reading = (attempt.sockets or {}).get(side) or {}
        values = reading.get("tcp_nodelay")
        if values:
            found[f"{side}_tcp_nodelay"] = all(values)
        elif side == "client":
            found["client_tcp_nodelay"] = summary.get("client_tcp_nodelay")
        else:
            found["server_tcp_nodelay"] = None
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


def summarize_run(run: RunResult) -> dict[tuple[str, str], dict[str, Any]]:
    """Every cell's summary, with the anomaly flags that need the whole matrix."""
    summaries = {(cell.server, cell.client): summarize_cell(cell) for cell in run.cells}
    anomalies.annotate(summaries, run.configuration.get("payload_size", DEFAULT_PAYLOAD_SIZE),
                       run.configuration.get("workload", "pingpong"))
    return summaries
