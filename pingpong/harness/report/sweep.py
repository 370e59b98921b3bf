"""Runs over lists of settings (--loop, --compression, --tls, --payload-size, --payload-kind, --pairs): every point
is a matrix, all measured in the same rounds (measure/engine.py); then an index and a table of every cell across the
points. Pure functions; commands/run.py measures and writes."""

from __future__ import annotations

import statistics
from dataclasses import asdict, fields
from typing import Any

from pingpong.harness.analysis.per_cpu import server_cpu_rates_by_round
from pingpong.harness.analysis.stats import Ratio, paired_ratio
from pingpong.harness.analysis.summary import workload_kind
from pingpong.harness.analysis.workers import WorkersFigures, cell_figures, pair_latency_by_round
from pingpong.harness.report import workers as workers_report
from pingpong.harness.report import workloads as workload_report
from pingpong.harness.report.formatting import (format_duration_ns, format_rate, format_ratio, point_label,
                                                unit_for_kind, usual_label)

SWEEP_FORMAT_VERSION = 2  # 2: a cell's interval_low/high/coverage/kind (1: a bootstrap ci_low/ci_high)
DIMENSIONS = ("python", "placement", "room_placement", "loop", "compression", "tls", "malloc", "young_generation",
              "workers", "payload_size", "payload_kind", "pairs", "receivers", "idle_connections", "rate")


def point_suffix(point: dict[str, Any], swept: list[str]) -> str:
    """The file-name suffix of a point's results, from the swept settings: -size1024-text-ascii, -loop-uvloop."""
    parts = {"loop": lambda v: f"loop-{v}", "compression": lambda v: f"compression-{v}",
             "tls": lambda v: "tls" if v else "plain", "malloc": lambda v: f"malloc-{v}",
             "young_generation": lambda v: f"young-{v}",
             "payload_size": lambda v: f"size{v}",
             "payload_kind": str, "pairs": lambda v: f"pairs{v}", "receivers": lambda v: f"receivers{v}",
             "idle_connections": lambda v: f"idle{v}", "rate": lambda v: f"rate{v:g}",
             "workers": lambda v: f"workers{v}", "placement": lambda v: f"placement-{v}",
             "room_placement": lambda v: f"rooms-{v}", "python": lambda v: f"python-{v}"}
    return "".join(f"-{parts[dimension](point[dimension])}" for dimension in swept) or "-point"


def swept_dimensions(points: list[dict[str, Any]]) -> list[str]:
    return [dimension for dimension in DIMENSIONS if len({point.get(dimension) for point in points}) > 1]


def sweep_index(members: list[tuple[dict[str, Any], Any, dict, str]]) -> dict[str, Any]:
    """The sweep's record: its points with their results files, and each cell's figures at each point.

    members: (point, RunResult, summaries, results file name) per point, in the order measured.
    """
    points = [dict(point, results=file_name) for point, _, _, file_name in members]
    cells: dict[str, list[dict[str, Any]]] = {}
    first_rates = {(cell.server, cell.client): cell.rates_by_round() for cell in members[0][1].cells} \
        if members else {}
    first_pairs = {(cell.server, cell.client): pair_latency_by_round(cell.attempts) for cell in members[0][1].cells} \
        if members else {}
    first_cpu_rates = {(cell.server, cell.client): server_cpu_rates_by_round(cell) for cell in members[0][1].cells} \
        if members else {}
    for point, run, summaries, _ in members:
        for (server, client), summary in summaries.items():
            if summary.status == "skipped":
                continue
            rates = summary.roundtrips_per_s
            latency = summary.latency
            cell = run.cell(server, client)
            cells.setdefault(f"{server} × {client}", []).append({
                **{dimension: point.get(dimension) for dimension in DIMENSIONS},
                "median": rates.median if rates else None,
                "interval_low": rates.interval_low if rates else None,
                "interval_high": rates.interval_high if rates else None,
                "interval_coverage": rates.interval_coverage if rates else None,
                "interval_kind": rates.interval_kind if rates else None,
                "n": rates.n if rates else 0,
                "p50_ns": latency.p50_ns if latency else None,
                "p99_ns": latency.p99_ns if latency else None,
                "client_cpu_utilization": summary.client_cpu.utilization,
                "server_cpu_utilization": summary.server_cpu.utilization,
                "status": summary.status,
                "ratio_to_first_point": to_first_point(cell.rates_by_round(), first_rates.get((server, client))),
                "server_cpu_us_per_roundtrip": summary.server_cpu.us_per_roundtrip,
                "server_cpu_rate_ratio_to_first_point": to_first_point(server_cpu_rates_by_round(cell),
                                                                       first_cpu_rates.get((server, client))),
                "workload": summary.workload,
                "idle_memory_by_round": workload_report.idle_memory_by_round(cell),
                **workers_entry(server, client, cell.attempts),
                **pair_latency_entry(cell.attempts, first_pairs.get((server, client)) or {}),
            })
    first = members[0][1] if members else None
    return {"format_version": SWEEP_FORMAT_VERSION, "kind": "sweep",
            "workload": first.configuration.get("workload", "pingpong") if first else "pingpong",
            "workload_kind": workload_kind(first.configuration) if first else "pingpong",
            "saturation_p99_ms": first.configuration.get("saturation_p99_ms") if first else None,
            # --load-per-worker: each point's pairs are per worker (its file records the attempt's, N times them)
            "load_per_worker": bool(first.configuration.get("load_per_worker")) if first else False,
            "swept": swept_dimensions([point for point, *_ in members]),
            "points": points, "cells": cells,
            "interrupted": any(run.interrupted for _, run, _, _ in members)}


def to_first_point(by_round: dict[int, float], first: dict[int, float] | None) -> dict[str, Any] | None:
    """A figure's per-round values over the first point's, paired by round (the Ratio as saved), or None when the
    two share no round."""
    first = first or {}
    return asdict(paired_ratio(by_round, first)) if by_round.keys() & first.keys() else None


def workers_entry(server: str, client: str, attempts) -> dict[str, Any]:
    """{"workers_figures": ...} for a point measured with more than one worker (analysis/workers.py); else {}."""
    figures = cell_figures(server, client, attempts)
    return {"workers_figures": figures.to_json()} if figures is not None else {}


def pair_latency_entry(attempts, first: dict[int, tuple[float, float]]) -> dict[str, Any]:
    """With several pairs whose every pair reported its own histogram: each pair's median latency at this point,
    {"pair_latency": the median over rounds of the median pair's p50 and of the slowest pair's, and the median pair's
    p50 over the first point's paired by round}; else {}."""
    by_round = pair_latency_by_round(attempts)
    if not by_round:
        return {}
    rounds = sorted(by_round.keys() & first.keys())
    ratio = (paired_ratio({r: by_round[r][0] for r in rounds}, {r: first[r][0] for r in rounds})
             if rounds else None)
    return {"pair_latency": {
        "median_pair_p50_ns": statistics.median(value for value, _ in by_round.values()),
        "slowest_pair_p50_ns": statistics.median(worst for _, worst in by_round.values()),
        "rounds": len(by_round),
        "median_pair_p50_ratio_to_first_point": asdict(ratio) if ratio is not None else None}}


def pair_latency_table(index: dict[str, Any], swept: list[str], labels: list[str]) -> list[str]:
    """Each pair's latency at each point (the points whose pairs reported their own histograms): the median pair's
    p50 · the slowest pair's, and the median pair's p50 over the first point's, paired by round."""
    entries = {(cell, point_label(entry, swept)): entry.get("pair_latency")
               for cell, found in index["cells"].items() for entry in found}
    if not any(entries.values()):
        return []
    ratios = [saved_ratio(found["median_pair_p50_ratio_to_first_point"]) for found in entries.values()
              if found and found.get("median_pair_p50_ratio_to_first_point")]
    usual = usual_label(ratios)
    lines = ["", "Each pair's latency (every pair's own histogram): the median pair's p50 · the slowest pair's "
             "p50, medians over the rounds; beneath, the median pair's p50 over the first point's, the median of "
             "the per-round ratios" + (f"; brackets: {usual}" if usual else "") + ":", "",
             "| cell | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for cell in index["cells"]:
        row = []
        for number, label in enumerate(labels):
            found = entries.get((cell, label))
            if not found:
                row.append("—")
                continue
            text = (f"{format_duration_ns(found['median_pair_p50_ns'])} · "
                    f"{format_duration_ns(found['slowest_pair_p50_ns'])}")
            ratio = saved_ratio(found.get("median_pair_p50_ratio_to_first_point"))
            if number > 0 and ratio is not None:
                text += f" ({format_ratio(ratio, usual)})"
            row.append(text)
        lines.append(f"| {cell} | " + " | ".join(row) + " |")
    return lines


def workers_section(index: dict[str, Any]) -> list[str]:
    """The points with more than one worker: the broker's work and one hop's cost per cell (report/workers.py)."""
    figures = [WorkersFigures.from_json(entry["workers_figures"]) for entries in index["cells"].values()
               for entry in entries if entry.get("workers_figures")]
    return workers_report.markdown_section(figures, "Workers (the points with more than one):")


def render_sweep_markdown(index: dict[str, Any]) -> str:
    """Rows: cells; columns: the sweep's points; each value the median rate with its p99 latency."""
    swept = index["swept"] or ["payload_size"]
    unit = unit_for_kind(index.get("workload_kind", index["workload"]))
    labels = [point_label(point, swept) for point in index["points"]]
    lines = [f"# Sweep over {', '.join(d.replace('_', ' ') for d in swept)}: {unit} per cell", "",
             f"Each value: median {unit} over the rounds · p99 latency. A point's full matrix is in its own "
             "results file:", ""]
    lines += [f"- {label}: `{point['results']}`" for label, point in zip(labels, index["points"])]
    lines += ["", "| cell | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for cell, entries in index["cells"].items():
        by_label = {point_label(entry, swept): entry for entry in entries}
        row = []
        for label in labels:
            entry = by_label.get(label)
            if entry is None:
                row.append("—")
            elif entry["median"] is None:
                row.append("failed")
            else:
                row.append(f"{format_rate(entry['median'])} · {format_duration_ns(entry['p99_ns'])}")
        lines.append(f"| {cell} | " + " | ".join(row) + " |")
    lines += ["", "CPU utilization, server / client (CPU time over wall time; 1.00 is one core saturated), to see "
              "which side saturates first:", "",
              "| cell | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for cell, entries in index["cells"].items():
        by_label = {point_label(entry, swept): entry for entry in entries}
        row = []
        for label in labels:
            entry = by_label.get(label) or {}
            server, client = entry.get("server_cpu_utilization"), entry.get("client_cpu_utilization")
            row.append("—" if server is None or client is None else f"{server:.2f} / {client:.2f}")
        lines.append(f"| {cell} | " + " | ".join(row) + " |")
    lines += ratio_table(index, swept, labels)
    if "workers" in swept:
        lines += ratio_table(index, swept, labels, per_server_cpu=True)
    lines += workload_report.sweep_sections(index, swept, labels)
    lines += pair_latency_table(index, swept, labels)
    lines += workers_section(index)
    if index.get("interrupted"):
        lines += ["", "The sweep was interrupted: later points are missing."]
    return "\n".join(lines) + "\n"


def saved_ratio(data: dict[str, Any] | None) -> Ratio | None:
    """A Ratio saved with asdict() in the index, back as the record (None stays None)."""
    if data is None:
        return None
    return Ratio(**{f.name: data[f.name] for f in fields(Ratio) if f.name in data})


def ratio_table(index: dict[str, Any], swept: list[str], labels: list[str], per_server_cpu: bool = False) -> list[str]:
    """Each point's rate over the first point's, per cell: the median of the per-round ratios (every round measures
    every point), with its order-statistic interval; the first point is the reference and has no column. With
    per_server_cpu (a sweep over --workers), the rate per server CPU (roundtrips per second of the server's CPU time)
    instead: what a design keeps of each core as N grows (docs/workloads.md, "Every core"); a sweep saved before it
    has none."""
    if len(labels) < 2:
        return []
    key = "server_cpu_rate_ratio_to_first_point" if per_server_cpu else "ratio_to_first_point"
    ratios = {(cell, point_label(entry, swept)): saved_ratio(entry.get(key))
              for cell, entries in index["cells"].items() for entry in entries}
    if per_server_cpu and not any(ratio is not None for ratio in ratios.values()):
        return []
    usual = usual_label(ratio for ratio in ratios.values() if ratio is not None)
    heading = (f"Rate per server CPU (roundtrips per second of the server's own CPU time, a broker's not counted), "
               f"paired by round against the first point ({labels[0]}): the median of the per-round ratios"
               if per_server_cpu else
               f"Paired by round against the first point ({labels[0]}): the median of the per-round ratios of each "
               "cell's rate (every round measures every point, so the machine's drift cancels)")
    lines = ["", heading + (f"; brackets: {usual}" if usual else "") + ":", "",
             "| cell | " + " | ".join(labels[1:]) + " |", "|---|" + "---:|" * (len(labels) - 1)]
    for cell in index["cells"]:
        row = [format_ratio(ratios[(cell, label)], usual) if ratios.get((cell, label)) is not None else "—"
               for label in labels[1:]]
        lines.append(f"| {cell} | " + " | ".join(row) + " |")
    return lines
