"""A run as CSV: one row per cell with every derived figure (a pure function of the record and its summaries)."""

from __future__ import annotations

import csv
import io

from pingpong.harness.analysis.summary import Summaries
from pingpong.harness.report.formatting import percentiles
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


def render_csv(run: RunResult, summaries: Summaries) -> str:
    output = io.StringIO()
    writer = csv.DictWriter(output, fieldnames=CSV_COLUMNS, lineterminator="\n")
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
        })
    return output.getvalue()
