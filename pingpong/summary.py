"""Derived figures of a cell, computed from its raw attempts: pure functions, recomputable from any results file."""

from __future__ import annotations

import statistics
from dataclasses import asdict
from typing import Any

from pingpong import histograms
from pingpong.results import Cell, RunResult
from pingpong.stats import summarize

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
    summary.update(observed_settings(good[-1]))
    return summary


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
    return {(cell.server, cell.client): summarize_cell(cell) for cell in run.cells}
