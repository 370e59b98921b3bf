"""What the workloads beyond one closed-loop pair add to a report (pure functions over summaries and sweep indexes).

- idle connections: the server's memory per idle connection, a least-squares slope of its memory growth against
  the connections held, fitted in each round (every round measures every point on a fresh server), so the slope
  gets the order-statistic interval of its median over rounds;
- open loop: latency from the intended send time at each offered rate, and the rate at which each pair saturates
  (its p99 passes the threshold, or it answers less than 95% of what is offered);
- broadcast: deliveries per second and the latency to the first and the last receiver at each number of receivers.
"""

from __future__ import annotations

from typing import Any, Callable

from pingpong.harness.analysis.stats import Ratio, median_with_interval
from pingpong.harness.report.formatting import format_duration_ns, format_rate, point_label

MEMORY_KEYS = ("pss_bytes", "rss_bytes")


def idle_memory_by_round(cell) -> dict[str, dict[str, Any]] | None:
    """{round: {"pss_bytes", "rss_bytes": growth with every connection held, "established": kernel count}} of a
    cell's good attempts with idle figures; None when it has none (JSON keys are strings)."""
    found = {}
    for attempt in cell.attempts:
        idle = (attempt.workload_figures or {}).get("idle") if attempt.ok else None
        if not idle or not idle.get("server_memory_growth"):
            continue
        found[str(attempt.repeat)] = {**{key: idle["server_memory_growth"].get(key) for key in MEMORY_KEYS},
                                      "established": idle.get("server_connections_established")}
    return found or None


def least_squares_slope(points: list[tuple[float, float]]) -> float | None:
    """The slope of the least-squares line through (x, y) points; None with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


def memory_fit(entries: list[dict[str, Any]], key: str = "pss_bytes") -> dict[str, Any] | None:
    """Bytes of server memory per idle connection for one cell of a sweep over --idle-connections.

    Each round's slope is fitted over that round's points (connections held, memory growth); the result is the
    median of the rounds' slopes with its order-statistic interval, beside the slope of all points together.
    """
    by_round: dict[str, list[tuple[float, float]]] = {}
    for entry in entries:
        for round_key, figures in (entry.get("idle_memory_by_round") or {}).items():
            if figures.get(key) is not None and entry.get("idle_connections") is not None:
                by_round.setdefault(round_key, []).append((entry["idle_connections"], figures[key]))
    slopes = [slope for slope in (least_squares_slope(points) for points in by_round.values()) if slope is not None]
    pooled = least_squares_slope([point for points in by_round.values() for point in points])
    if not slopes:
        return None
    per_round = median_with_interval(slopes)
    return {"memory": key, "bytes_per_connection": per_round.value, "interval_low": per_round.low,
            "interval_high": per_round.high, "interval_coverage": per_round.coverage,
            "interval_kind": per_round.kind, "rounds": per_round.n, "pooled_slope": pooled,
            "largest_held": max(entry["idle_connections"] for entry in entries
                                if entry.get("idle_memory_by_round"))}


def saturation_of(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Over a cell's offered rates, lowest first: the first that saturates it and the highest below that which
    does not. None when the cell has no open-loop figures."""
    rated = sorted((entry for entry in entries if (entry.get("workload") or {}).get("open_loop")),
                   key=lambda entry: entry["workload"]["open_loop"]["rate_per_pair"])
    if not rated:
        return None
    sustained, saturating = None, None
    for entry in rated:
        figures = entry["workload"]["open_loop"]
        if figures["saturated"]:
            saturating = figures
            break
        sustained = figures
    return {"sustained_rate_per_pair": sustained["rate_per_pair"] if sustained else None,
            "saturating_rate_per_pair": saturating["rate_per_pair"] if saturating else None,
            "because": saturating["saturated_because"] if saturating else None,
            "highest_offered_per_pair": rated[-1]["workload"]["open_loop"]["rate_per_pair"]}


def sweep_sections(index: dict[str, Any], swept: list[str], labels: list[str]) -> list[str]:
    """The Markdown a sweep index gets for its workload: memory fits, saturation, broadcast latencies."""
    lines: list[str] = []
    if "idle_connections" in swept:
        lines += _memory_section(index)
    if any((entry.get("workload") or {}).get("open_loop") for entries in index["cells"].values()
           for entry in entries):
        lines += _open_loop_section(index, swept, labels)
    if any((entry.get("workload") or {}).get("broadcast") for entries in index["cells"].values()
           for entry in entries):
        lines += _broadcast_section(index, swept, labels)
    return lines


def _bytes(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value / 1024:,.1f} KiB" if abs(value) >= 1024 else f"{value:,.0f} B"


def _memory_section(index: dict[str, Any]) -> list[str]:
    lines = ["", "Server memory per idle connection: the slope of the server process tree's memory growth (from "
             "before the client started to every connection held, a fresh server each attempt) against the idle "
             "connections held, fitted per round; the median of the rounds' slopes, its interval, and the slope of "
             "all points pooled. PSS splits shared pages among the processes that share them; RSS counts them "
             "whole.", "",
             "| cell | PSS per connection | interval | RSS per connection | pooled PSS slope | largest N held | "
             "pair's rate at largest N / at none | held (kernel, server side) |",
             "|---|---:|---|---:|---:|---:|---:|---|"]
    first_is_none = bool(index.get("points")) and index["points"][0].get("idle_connections") == 0
    for cell, entries in index["cells"].items():
        pss, rss = memory_fit(entries, "pss_bytes"), memory_fit(entries, "rss_bytes")
        if pss is None:
            lines.append(f"| {cell} | — | — | — | — | — | — | — |")
            continue
        largest = max((entry for entry in entries if entry.get("idle_memory_by_round")),
                      key=lambda entry: entry["idle_connections"])
        against_none = largest.get("ratio_to_first_point") if first_is_none else None
        rate_ratio = (f"{against_none['value']:.2f}×" + (f" [{against_none['low']:.2f}–{against_none['high']:.2f}]"
                                                         if against_none.get("low") is not None else "")
                      if against_none else "—")
        ratio = Ratio(pss["bytes_per_connection"], pss["interval_low"], pss["interval_high"],
                      pss["interval_coverage"], pss["interval_kind"], pss["rounds"])
        interval = (f"{_bytes(ratio.low)}–{_bytes(ratio.high)}, {ratio.label()}" if ratio.low is not None
                    else ratio.label())
        held = "; ".join(f"{entry['idle_connections']:,}: "
                         + "/".join(str(figures.get("established")) for figures in
                                    (entry.get("idle_memory_by_round") or {}).values())
                         for entry in entries if entry.get("idle_memory_by_round"))
        lines.append(f"| {cell} | {_bytes(pss['bytes_per_connection'])} | {interval} | "
                     f"{_bytes(rss['bytes_per_connection']) if rss else '—'} | {_bytes(pss['pooled_slope'])} | "
                     f"{pss['largest_held']:,} | {rate_ratio} | {held} |")
    lines += ["", "Held: the ESTABLISHED connections on the server's port in the kernel's table, per round, with "
              "every idle connection and the measured pair open (N + 2). The pair's rate at the largest N over its "
              "rate with none held is paired by round"
              + (" (the median of the per-round ratios, its interval in brackets)." if first_is_none else
                 ": it needs 0 first in the list of --idle-connections (e.g. 0,1000,2000), so it is not shown.")]
    return lines


def _open_loop_section(index: dict[str, Any], swept: list[str], labels: list[str]) -> list[str]:
    threshold = index.get("saturation_p99_ms")

    def text(entry: dict[str, Any]) -> str:
        figures = (entry.get("workload") or {}).get("open_loop")
        if not figures:
            return "—"
        return (f"{figures.get('achieved_share'):.0%} · {format_duration_ns(figures.get('p50_ns'))} · "
                f"{format_duration_ns(figures.get('p99_ns'))}" + (" ⚠" if figures["saturated"] else ""))

    lines = ["", "Open loop: each pair's A sends on a fixed schedule whatever the replies; latency runs from each "
             "message's intended send time (no coordinated omission). Each value: achieved/offered · p50 · p99. "
             f"A rate saturates a pair when its p99 exceeds {threshold:g} ms or it answers less than 95% of the "
             "offered rate (⚠).", "", *_point_table(index, swept, labels, text)]
    lines += ["", "Where each pair saturates (messages/s offered per pair):", "",
              "| cell | sustained | saturates at | because |", "|---|---:|---:|---|"]
    for cell, entries in index["cells"].items():
        found = saturation_of(entries)
        if found is None:
            continue
        sustained, saturating = found["sustained_rate_per_pair"], found["saturating_rate_per_pair"]
        highest = format_rate(found["highest_offered_per_pair"])
        lines.append(f"| {cell} | {format_rate(sustained) if sustained else '—'} | "
                     f"{format_rate(saturating) if saturating else 'not up to ' + highest} | "
                     f"{found['because'] or '—'} |")
    return lines


def _broadcast_section(index: dict[str, Any], swept: list[str], labels: list[str]) -> list[str]:
    def text(entry: dict[str, Any]) -> str:
        figures = (entry.get("workload") or {}).get("broadcast")
        return broadcast_text(figures, entry.get("server_cpu_us_per_roundtrip")) if figures else "—"

    return ["", "Broadcast: the sender sends the next message once every receiver has the last one. Each value: "
            "latency to the first receiver p50 / p99 · to the last receiver p50 / p99 · server CPU µs per "
            "delivered message.", "", *_point_table(index, swept, labels, text)]


def _point_table(index: dict[str, Any], swept: list[str], labels: list[str],
                 text: Callable[[dict[str, Any]], str]) -> list[str]:
    """A Markdown table: a row per cell, a column per point, each value text(the cell's entry at that point)."""
    lines = ["| cell | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for cell, entries in index["cells"].items():
        by_label = {point_label(entry, swept): entry for entry in entries}
        lines.append(f"| {cell} | " + " | ".join(text(by_label.get(label) or {}) for label in labels) + " |")
    return lines


def broadcast_text(figures: dict[str, Any], server_us_per_delivery: float | None) -> str:
    first, last = figures.get("latency_first") or {}, figures.get("latency_last") or {}
    cpu = f" · {server_us_per_delivery:.1f} µs" if server_us_per_delivery is not None else ""
    return (f"{format_duration_ns(first.get('p50_ns'))} / {format_duration_ns(first.get('p99_ns'))} · "
            f"{format_duration_ns(last.get('p50_ns'))} / {format_duration_ns(last.get('p99_ns'))}{cpu}")


def cell_figures(summaries: dict) -> list[tuple[tuple[str, str], str]]:
    """For a single-point run: each measured cell's workload figures as one line of text (none for plain
    ping-pong): what the terminal lists and the Markdown tabulates."""
    found = []
    for key, summary in summaries.items():
        workload = summary.workload
        if not workload:
            continue
        parts = []
        if "broadcast" in workload:
            figures = workload["broadcast"]
            last = figures.get("latency_last") or {}
            parts.append(f"{figures['receivers']} receivers, {format_rate(figures['messages_per_s'])} messages/s = "
                         f"{format_rate(figures['deliveries_per_s'])} deliveries/s, last receiver p99 "
                         f"{format_duration_ns(last.get('p99_ns'))}; first / last receiver p50 / p99: "
                         + broadcast_text(figures, summary.server_cpu.us_per_roundtrip) + " per delivery")
        if "open_loop" in workload:
            figures = workload["open_loop"]
            parts.append(f"{format_rate(figures['achieved_per_s'])} of {format_rate(figures['offered_per_s'])}/s "
                         f"offered ({figures['achieved_share']:.0%}), p50 {format_duration_ns(figures['p50_ns'])}, "
                         f"p99 {format_duration_ns(figures['p99_ns'])} from the intended send time: "
                         + (f"saturated ({figures['saturated_because']})" if figures["saturated"] else "keeps up")
                         + f"; client send lag up to {format_duration_ns(figures['send_lag_max_ns'])}")
        if "idle" in workload:
            parts.append(idle_text(workload["idle"]))
        found.append((key, "; ".join(parts)))
    return found


def idle_text(figures: dict[str, Any]) -> str:
    """One point of idle connections: how many were held and how the server's memory moved. Never a figure per
    connection: one difference is not a fit (memory moves by itself too, and can even shrink)."""
    growth = figures.get("server_pss_growth_bytes")
    moved = ("not sampled" if growth is None else
             f"grew by {_bytes(growth)}" if growth >= 0 else f"shrank by {_bytes(-growth)}")
    return (f"{figures['opened']:,} idle connections held (kernel, server side: "
            f"{', '.join(str(count) for count in figures['server_connections_established'])}); server PSS {moved} "
            f"with them held. Memory per connection needs a list of --idle-connections (e.g. 0,1000,2000): a fit "
            "over several counts, not one difference")


def run_section(summaries: dict, unit: str) -> list[str]:
    """For a single-point run: each measured cell's workload figures in one table (nothing for plain ping-pong)."""
    rows = [f"| {server} × {client} | {text} |" for (server, client), text in cell_figures(summaries)]
    if not rows:
        return []
    return ["", f"Workload figures ({unit}; medians over the rounds, latency histograms merged):", "",
            "| cell | figures |", "|---|---|", *rows]
