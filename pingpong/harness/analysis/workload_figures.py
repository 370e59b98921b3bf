"""The figures of the workloads beyond one closed-loop pair, from the client reports of one attempt (pure functions).

- broadcast: one sender, N receivers in its room, spread over client processes. Each process reports, per message,
  when its first and its last receiver had it (CLOCK_MONOTONIC, shared by the processes of one host); the sender
  reports when it sent each one. Joined here: the latency to the first and to the last receiver of every message
  in the window, and the deliveries (messages x receivers) per second.
- open loop (--rate): offered against achieved rate, and how late the client itself sent (its own saturation).
- idle connections: how many the clients held, how many the kernel lists on the server's port, and the server's
  memory before the clients started and with every connection open.
"""

from __future__ import annotations

from typing import Any

from pingpong.harness.results import histograms

TIMESTAMP_KEYS = ("send_ns", "first_ns", "last_ns")  # per-message arrays: used here, not kept in the results file


class WorkloadError(Exception):
    """The reports of one attempt do not add up (a receiver missed or gained a message): the attempt fails."""


def without_timestamps(report: dict[str, Any]) -> dict[str, Any]:
    """A client report without its per-message timestamp arrays (thousands of numbers per process)."""
    broadcast = report.get("broadcast")
    if not isinstance(broadcast, dict):
        return report
    return {**report, "broadcast": {key: value for key, value in broadcast.items() if key not in TIMESTAMP_KEYS}}


def encode_values(values_ns: list[int]) -> str | None:
    """Raw durations (ns) as a compressed HdrHistogram; None for none."""
    if not values_ns:
        return None
    histogram = histograms.empty_histogram()
    for value in values_ns:
        histogram.record_value(min(max(int(value), 1), histograms.HISTOGRAM_HIGHEST_NS))
    return histogram.encode().decode("ascii")


def broadcast(reports: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The attempt's report (deliveries as its "roundtrips", latency to the last receiver as its histogram) and the
    broadcast figures, from the sender process's report (first) and each receivers process's report."""
    sender = reports[0]
    parts = [report.get("broadcast") or {} for report in reports]
    if parts[0].get("role") != "sender" or any(part.get("role") != "receivers" for part in parts[1:]):
        raise WorkloadError("broadcast: the first client process must report role sender and the others receivers")
    send_ns = parts[0].get("send_ns") or []
    first_index, count = int(parts[0].get("window_first", 0)), int(parts[0].get("window_count", 0))
    if count < 1 or first_index + count > len(send_ns):
        raise WorkloadError(f"broadcast: the sender's window ({count} messages from #{first_index}) is not within "
                            f"the {len(send_ns)} messages it sent")
    for index, part in enumerate(parts):
        for key in ("first_ns", "last_ns"):
            received = len(part.get(key) or [])
            if received != len(send_ns):
                raise WorkloadError(f"broadcast: client process {index}'s receivers report {received} messages, "
                                    f"the sender sent {len(send_ns)}")
    receivers = sum(int(part.get("receivers", 0)) for part in parts)
    to_first, to_last = [], []
    for message in range(first_index, first_index + count):
        sent = send_ns[message]
        to_first.append(min(part["first_ns"][message] for part in parts) - sent)
        to_last.append(max(part["last_ns"][message] for part in parts) - sent)
    if min(to_first) < 0:
        raise WorkloadError("broadcast: a receiver had a message before it was sent (the processes do not share "
                            "one monotonic clock)")
    elapsed_s = float(sender["elapsed_s"])
    deliveries = count * receivers
    report = {**without_timestamps(sender), "roundtrips": deliveries, "roundtrips_per_s": deliveries / elapsed_s,
              "latency": {"unit": "ns", "recorded": True, "hdr_histogram": encode_values(to_last)},
              "client_processes": len(reports),
              "per_process": [without_timestamps(r).get("broadcast") for r in reports]}
    figures = {"broadcast": {
        "receivers": receivers, "messages": count, "deliveries": deliveries, "elapsed_s": elapsed_s,
        "messages_per_s": count / elapsed_s, "deliveries_per_s": deliveries / elapsed_s,
        "receivers_per_process": [int(part.get("receivers", 0)) for part in parts],
        "latency_first_histogram": encode_values(to_first),
        "latency_last_histogram": encode_values(to_last),
        "cycle_histogram": (sender.get("latency") or {}).get("hdr_histogram"),
    }}
    return report, figures


def open_loop(reports: list[dict[str, Any]], rate_per_pair: float) -> dict[str, Any]:
    """Offered and achieved rates summed over the client processes; the client's worst and mean send lag.

    The achieved rate is each process's window messages answered over the time from the window's start to the last
    answer (its roundtrips_per_s): under saturation the answers trail the window, and counting only those that came
    within it would understate what the server delivered."""
    parts = [report.get("open_loop") or {} for report in reports]
    sent = sum(int(part.get("sent", 0)) for part in parts)

    def total(key: str) -> float:
        return sum(float(part.get(key) or 0) for part in parts)

    lag_mean = (sum(float(part.get("send_lag_mean_ns") or 0) * int(part.get("sent", 0)) for part in parts) / sent
                if sent else None)
    return {"rate_per_pair": rate_per_pair, "offered_per_s": total("offered_per_s"),
            "achieved_per_s": sum(float(report.get("roundtrips_per_s") or 0) for report in reports),
            "answered_in_window_per_s": total("achieved_per_s"), "sent": sent, "answered": int(total("answered")),
            "answered_in_window": int(total("answered_in_window")),
            "send_lag_max_ns": max((int(part.get("send_lag_max_ns") or 0) for part in parts), default=None),
            "send_lag_mean_ns": lag_mean}


def idle(reports: list[dict[str, Any]], requested: int, memory_before: dict[str, int] | None,
         memory_held: dict[str, int] | None, established: int | None) -> dict[str, Any]:
    """Idle connections asked for and held by the clients, the kernel's count on the server's port, server memory."""
    held = [report.get("idle_connections") or {} for report in reports]
    growth = ({key: memory_held[key] - memory_before[key] for key in memory_held if key in memory_before}
              if memory_before and memory_held else None)
    return {"requested": requested, "opened": sum(int(part.get("opened", 0)) for part in held),
            "open_s": max((float(part.get("open_s") or 0) for part in held), default=None),
            "client_open_files_limit": next((part.get("nofile_limit") for part in held if part.get("nofile_limit")),
                                            None),
            "server_connections_established": established,
            "server_memory_before": memory_before, "server_memory_held": memory_held,
            "server_memory_growth": growth}


def summarize_workload(good: list, saturation_p99_ms: float) -> dict[str, Any] | None:
    """A cell's workload figures over its good attempts (medians across rounds; histograms merged); None for the
    plain closed-loop ping-pong."""
    figures = [attempt.workload_figures for attempt in good if attempt.workload_figures]
    if not figures:
        return None
    summary: dict[str, Any] = {}
    if all("broadcast" in figure for figure in figures):
        parts = [figure["broadcast"] for figure in figures]
        summary["broadcast"] = {
            "receivers": parts[0]["receivers"],
            "messages_per_s": _median([part["messages_per_s"] for part in parts]),
            "deliveries_per_s": _median([part["deliveries_per_s"] for part in parts]),
            "latency_first": _latency([part.get("latency_first_histogram") for part in parts]),
            "latency_last": _latency([part.get("latency_last_histogram") for part in parts]),
        }
    if all("open_loop" in figure for figure in figures):
        parts = [figure["open_loop"] for figure in figures]
        offered = _median([part["offered_per_s"] for part in parts])
        achieved = _median([part["achieved_per_s"] for part in parts])
        latency = _latency([attempt.latency_histogram for attempt in good])
        summary["open_loop"] = {
            "rate_per_pair": parts[0]["rate_per_pair"], "offered_per_s": offered, "achieved_per_s": achieved,
            "achieved_share": achieved / offered if offered else None,
            "p50_ns": latency.get("p50_ns"), "p99_ns": latency.get("p99_ns"), "p99.9_ns": latency.get("p99.9_ns"),
            "send_lag_max_ns": max(part.get("send_lag_max_ns") or 0 for part in parts),
            **saturation(latency.get("p99_ns"), achieved / offered if offered else None, saturation_p99_ms),
        }
        lag_ms = summary["open_loop"]["send_lag_max_ns"] / 1e6
        if summary["open_loop"]["saturated"] and lag_ms > saturation_p99_ms:  # the client's own limit, not the pair's
            summary["open_loop"]["saturated_because"] += f"; the client itself sent up to {lag_ms:,.1f} ms late"
    if all("idle" in figure for figure in figures):
        parts = [figure["idle"] for figure in figures]
        growth = [part["server_memory_growth"] for part in parts if part.get("server_memory_growth")]
        summary["idle"] = {
            "requested": parts[0]["requested"],
            "opened": min(part["opened"] for part in parts),
            "server_connections_established": [part.get("server_connections_established") for part in parts],
            "open_s": _median([part["open_s"] for part in parts if part.get("open_s") is not None]),
            "server_rss_growth_bytes": _median([g["rss_bytes"] for g in growth if "rss_bytes" in g]),
            "server_pss_growth_bytes": _median([g["pss_bytes"] for g in growth if "pss_bytes" in g]),
            "server_pss_held_bytes": _median([part["server_memory_held"]["pss_bytes"] for part in parts
                                              if part.get("server_memory_held")]),
        }
    return summary or None


# An offered rate saturates a pair when its p99 passes the threshold or it answers less than this share of it.
ACHIEVED_SHARE_FLOOR = 0.95


def saturation(p99_ns: float | None, achieved_share: float | None, saturation_p99_ms: float) -> dict[str, Any]:
    """Whether one offered rate saturated the pair, and why (the rule in docs/workloads.md)."""
    reasons = []
    if p99_ns is not None and p99_ns > saturation_p99_ms * 1e6:
        reasons.append(f"p99 {p99_ns / 1e6:,.1f} ms > {saturation_p99_ms:g} ms")
    if achieved_share is not None and achieved_share < ACHIEVED_SHARE_FLOOR:
        reasons.append(f"achieved {achieved_share:.0%} of the offered rate")
    return {"saturated": bool(reasons), "saturated_because": "; ".join(reasons) or None}


def _median(values: list[float]) -> float | None:
    import statistics

    return statistics.median(values) if values else None


def _latency(encoded: list[str | None]) -> dict[str, Any]:
    present = [value for value in encoded if value]
    return histograms.latency_summary(histograms.merge(present)) if present else {"count": 0}
