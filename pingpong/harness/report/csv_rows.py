"""A run as CSV: one row per cell with every derived figure (a pure function of the record and its summaries).

The columns are CSV_COLUMNS; a run with time budgets (each side's scheduling read at the window's edges) adds
TIME_BUDGET_COLUMNS after the page faults, a run with raw-TCP floors adds COST_COLUMNS at the end (the WebSocket
cost, analysis/costs.py), and a run with --workers N > 1 adds WORKERS_COLUMNS after those (the broker and its hop,
analysis/workers.py), so files saved before those readings export as they always did."""

from __future__ import annotations

import csv
import io

from pingpong.harness.analysis.costs import CostSplit, websocket_costs
from pingpong.harness.analysis.stats import Difference, Ratio
from pingpong.harness.analysis.summary import SIDES, CellSummary, Summaries
from pingpong.harness.analysis.workers import WorkersFigures, workers_figures
from pingpong.harness.report.formatting import percentiles, time_budgets
from pingpong.harness.results.records import RunResult

CSV_COLUMNS = ["server", "client", "status", "n", "roundtrips_per_s_median", "roundtrips_per_s_min",
               "roundtrips_per_s_max", "roundtrips_per_s_cv", "interval_low", "interval_high", "interval_coverage",
               "interval_kind", "precision", "noisy", "p50_ns", "p90_ns", "p99_ns", "p99.9_ns", "max_ns",
               "server_cpu_us_per_roundtrip", "client_cpu_us_per_roundtrip", "server_cpu_utilization",
               "client_cpu_utilization", "server_minor_faults_per_roundtrip", "client_minor_faults_per_roundtrip",
               "bottleneck", "server_peak_rss_bytes", "server_loop", "client_loop",
               "compression_negotiated", "server_tcp_nodelay", "client_tcp_nodelay", "segments_per_message",
               "delayed_acks_per_roundtrip", "retransmits_per_roundtrip", "expected_roundtrips_per_s", "flags",
               "reason"]
# each side's time budget (analysis/time_budget.py), µs or switches per roundtrip: (column suffix, TimeBudget field)
TIME_BUDGET_PARTS = (("user_us_per_roundtrip", "user_us"), ("system_us_per_roundtrip", "system_us"),
                     ("run_delay_us_per_roundtrip", "run_delay_us"), ("blocked_us_per_roundtrip", "blocked_us"),
                     ("voluntary_switches_per_roundtrip", "voluntary_switches"),
                     ("involuntary_switches_per_roundtrip", "involuntary_switches"),
                     ("main_thread_us_per_roundtrip", "main_thread_cpu_us"),
                     ("other_threads_us_per_roundtrip", "other_threads_cpu_us"))
TIME_BUDGET_COLUMNS = [f"{side}_{suffix}" for side in SIDES for suffix, _ in TIME_BUDGET_PARTS]
# the WebSocket cost, µs per roundtrip beyond the floors (server + client + other = end_to_end), each with its
# interval and the interval's coverage (for other a lower bound): websocket_cost_<part>_us, _low_us, _high_us, _coverage
COST_FIGURES = ("server", "client", "other", "end_to_end")
COST_COLUMNS = [f"websocket_cost_{part}_{suffix}" for part in COST_FIGURES
                for suffix in ("us", "low_us", "high_us", "coverage")]

# --workers N > 1, per cell over its good attempts with a workers record (analysis/workers.py): N and those attempts;
# the broker's PUBLISH calls per roundtrip, its CPU µs per publish and the share of deliveries that came through it
# (medians over the attempts); the pairs by placement over every attempt and the attempts that had both kinds; and the
# broker hop's cost, the median of those attempts' figures with its interval and the interval's coverage: hop_ratio (a
# split pair's rate over a local pair's), hop_us (µs per roundtrip a split pair takes beyond a local pair's) and
# hop_p50_us (µs a split pair's median latency lies above a local pair's); then the subscribers a PUBLISH reached (a
# median over the attempts) and the messages published in local pairs' rooms (summed over the attempts); and
# room_placement (kernel or room)
WORKERS_COLUMNS = ["workers", "attempts_with_workers", "publishes_per_roundtrip", "broker_cpu_us_per_publish",
                   "crossed_broker_share", "local_pairs", "split_pairs", "unplaced_pairs", "attempts_with_both",
                   "hop_ratio", "hop_ratio_low", "hop_ratio_high", "hop_ratio_coverage",
                   "hop_us", "hop_low_us", "hop_high_us", "hop_coverage",
                   "hop_p50_us", "hop_p50_low_us", "hop_p50_high_us", "hop_p50_coverage",
                   "deliveries_per_publish", "local_pair_publishes", "room_placement"]


def csv_columns(with_time_budgets: bool, with_costs: bool = False, with_workers: bool = False) -> list[str]:
    """CSV_COLUMNS, with TIME_BUDGET_COLUMNS after the page faults when the run has time budgets, COST_COLUMNS at
    the end when it has WebSocket costs, and WORKERS_COLUMNS after them when a cell ran more than one worker."""
    columns = CSV_COLUMNS
    if with_time_budgets:
        after = CSV_COLUMNS.index("client_minor_faults_per_roundtrip") + 1
        columns = CSV_COLUMNS[:after] + TIME_BUDGET_COLUMNS + CSV_COLUMNS[after:]
    return columns + (COST_COLUMNS if with_costs else []) + (WORKERS_COLUMNS if with_workers else [])


def cost_figures(split: CostSplit | None) -> dict[str, float | None]:
    """The cell's COST_COLUMNS (empty for a cell without a cost, or a figure without its floor)."""
    figures: dict[str, float | None] = {}
    for part in COST_FIGURES:
        figure = getattr(split, part) if split is not None else None
        for suffix, field in (("us", "value"), ("low_us", "low"), ("high_us", "high"), ("coverage", "coverage")):
            figures[f"websocket_cost_{part}_{suffix}"] = None if figure is None else getattr(figure, field)
    return figures


def workers_columns(figures: WorkersFigures | None) -> dict[str, float | None]:
    """The cell's WORKERS_COLUMNS (empty for a cell without figures, or a figure no attempt had)."""
    if figures is None:
        return dict.fromkeys(WORKERS_COLUMNS)

    def parts(figure: Ratio | Difference | None) -> tuple[float | None, ...]:
        return (None,) * 4 if figure is None else (figure.value, figure.low, figure.high, figure.coverage)

    medians = (figures.publishes_per_roundtrip, figures.cpu_us_per_publish, figures.crossed_broker_share)
    return dict(zip(WORKERS_COLUMNS, (
        figures.workers, figures.attempts, *(None if median is None else median.value for median in medians),
        figures.local_pairs, figures.split_pairs, figures.unplaced_pairs, figures.both_kinds,
        *parts(figures.hop_ratio), *parts(figures.hop_us), *parts(figures.hop_p50_us),
        None if figures.deliveries_per_publish is None else figures.deliveries_per_publish.value,
        figures.local_pair_publishes, figures.room_placement or "kernel"), strict=True))


def time_budget_figures(summary: CellSummary) -> dict[str, float | None]:
    """The cell's TIME_BUDGET_COLUMNS (empty for a side without a budget)."""
    figures: dict[str, float | None] = {}
    for side in SIDES:
        budget = summary.time_budget(side)
        for suffix, part in TIME_BUDGET_PARTS:
            figures[f"{side}_{suffix}"] = None if budget is None else getattr(budget, part)
    return figures


def render_csv(run: RunResult, summaries: Summaries) -> str:
    output = io.StringIO()
    with_time_budgets = bool(time_budgets(summaries))
    costs = websocket_costs(run)
    workers = {(figures.server, figures.client): figures for figures in workers_figures(run)}
    writer = csv.DictWriter(output, fieldnames=csv_columns(with_time_budgets, bool(costs), bool(workers)),
                            lineterminator="\n")
    writer.writeheader()
    for (server, client), summary in summaries.items():
        rates = summary.roundtrips_per_s
        writer.writerow({
            "server": server, "client": client, "status": summary.status, "n": rates and rates.n,
            "roundtrips_per_s_median": rates and rates.median, "roundtrips_per_s_min": rates and rates.minimum,
            "roundtrips_per_s_max": rates and rates.maximum, "roundtrips_per_s_cv": rates and rates.cv,
            "interval_low": rates and rates.interval_low, "interval_high": rates and rates.interval_high,
            "interval_coverage": rates and rates.interval_coverage, "interval_kind": rates and rates.interval_kind,
            "precision": rates and rates.precision, "noisy": summary.noisy,
            **dict(zip(("p50_ns", "p90_ns", "p99_ns", "p99.9_ns", "max_ns"), percentiles(summary.latency))),
            "server_cpu_us_per_roundtrip": summary.server_cpu.us_per_roundtrip,
            "client_cpu_us_per_roundtrip": summary.client_cpu.us_per_roundtrip,
            "server_cpu_utilization": summary.server_cpu.utilization,
            "client_cpu_utilization": summary.client_cpu.utilization,
            "server_minor_faults_per_roundtrip": summary.server_cpu.minor_faults_per_roundtrip,
            "client_minor_faults_per_roundtrip": summary.client_cpu.minor_faults_per_roundtrip,
            "bottleneck": summary.bottleneck, "server_peak_rss_bytes": summary.server_peak_rss_bytes,
            "server_loop": summary.server_loop, "client_loop": summary.client_loop,
            "compression_negotiated": summary.compression_negotiated,
            "server_tcp_nodelay": summary.server_tcp_nodelay, "client_tcp_nodelay": summary.client_tcp_nodelay,
            "segments_per_message": summary.segments_per_message,
            "delayed_acks_per_roundtrip": summary.delayed_acks_per_roundtrip,
            "retransmits_per_roundtrip": summary.retransmits_per_roundtrip,
            "expected_roundtrips_per_s": summary.expected_roundtrips_per_s,
            "flags": "; ".join(summary.flags or ()) or None,
            "reason": summary.reason or "; ".join(summary.failures) or None,
            **(time_budget_figures(summary) if with_time_budgets else {}),
            **(cost_figures(costs.get((server, client))) if costs else {}),
            **(workers_columns(workers.get((server, client))) if workers else {}),
        })
    return output.getvalue()
