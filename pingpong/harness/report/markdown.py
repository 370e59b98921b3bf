"""A run as Markdown: the matrix, the ratios to the fastest pair, the WebSocket cost, the workload's figures, the
flags and every cell's details (a pure function of the record and its summaries)."""

from __future__ import annotations

from pingpong.harness.analysis.costs import websocket_costs
from pingpong.harness.analysis.host_modes import probe_figures
from pingpong.harness.analysis.host_wakeup import HostWakeup
from pingpong.harness.analysis.host_pace import reference_pace_text, run_pace
from pingpong.harness.analysis.pace import pace_figures
from pingpong.harness.analysis.plain_twins import allocators_text, plain_twins
from pingpong.harness.analysis.precision import paced_precision, precision_reach
from pingpong.harness.analysis.stats import NOISY_CV
from pingpong.harness.analysis.summary import Summaries, workload_kind
from pingpong.harness.analysis.workers import workers_figures
from pingpong.harness.report import workloads as workload_report
from pingpong.harness.report.formatting import (COST_PARTS, CV_MEANING, HALF_WIDTH_MEANING, NEGATIVE_COST_TEXT,
                                                NODELAY_TEXT, axes, axis_loops, cv_text, excess_by_cell, fastest_cell,
                                                faults_text, floors, format_difference, format_duration_ns,
                                                format_optional, format_rate, format_ratio, format_ratio_to_reference,
                                                half_width_text, interval_legend, latency_name, matrix_cell_text,
                                                interpreter_text, per_worker_text, percentiles, placement_text,
                                                young_generation_text,
                                                rate_unit,
                                                relative_to_fastest,
                                                rounds_text, short_extensions, switches_text, time_budgets,
                                                topology_line, usual_label, with_loop, workload_title)
from pingpong.harness.report import profile_report
from pingpong.harness.report import workers as workers_report
from pingpong.harness.results.records import RunResult

def cost_section(run: RunResult, servers: list[str], clients: list[str]) -> list[str]:
    """'WebSocket cost': per WebSocket cell, µs per roundtrip beyond the floors, in columns that add up: server part
    + client part + other = end to end."""
    costs = websocket_costs(run)
    if not costs:
        return []
    measured = [part for split in costs.values() for name, part in split.parts() if name != "other" and part]
    usual = usual_label(measured)
    lines = ["", "WebSocket cost per roundtrip, in µs beyond the raw-TCP floors of the cell's own runtimes: server "
             "part + client part + other = end to end. Server part, client part and end to end are each the median "
             "of the per-round differences (each round measures every cell once); "
             f"{interval_legend(measured)}. Other is end to end less both parts; its bracket is the end-to-end "
             "bracket less both parts' brackets, which holds the remainder at least as often as all three hold "
             f"theirs at once (its coverage is given). {NEGATIVE_COST_TEXT} — where a floor cell was not "
             "measured.", ""]
    lines += [f"- {name[0].upper() + name[1:]}: {meaning}." for _, name, meaning in COST_PARTS]
    lines += ["", "| server | client | " + " | ".join(name for _, name, _ in COST_PARTS) + " |",
              "|---|---|" + "---:|" * len(COST_PARTS)]
    for server in servers:
        for client in clients:
            split = costs.get((server, client))
            if split is None:
                continue
            figures = [getattr(split, part) for part, _, _ in COST_PARTS]
            lines.append(f"| {server} | {client} | " + " | ".join(
                "—" if figure is None else format_difference(figure, usual) for figure in figures) + " |")
    return lines


def plain_section(run: RunResult, summaries: Summaries) -> list[str]:
    """'Plain programs beside the drivers': each plain program over its driver twin, per server, and why."""
    twins = plain_twins(run, summaries)
    if not twins:
        return []
    ratios = [twin.ratio for twin in twins]
    usual = usual_label(ratios)
    lines = ["", "Plain programs beside the drivers: a program as people write it, measured from outside, over the "
             "suite's driver client of the same library on the same server (the median of the per-round ratios; "
             f"{interval_legend(ratios)}), with each one's client page faults and CPU per roundtrip; "
             f"{allocators_text(twins[0])}:",
             "", "| server | plain / driver | plain ÷ driver | page faults per roundtrip, plain / driver "
             "| client µs per roundtrip, plain / driver | what differs |", "|---|---|---:|---:|---:|---|"]
    for twin in twins:
        lines.append(f"| {twin.server} | {twin.plain} / {twin.driver} | {format_ratio(twin.ratio, usual)} | "
                     f"{format_optional(twin.plain_faults_per_roundtrip, '{:.2f}')} / "
                     f"{format_optional(twin.driver_faults_per_roundtrip, '{:.2f}')} | "
                     f"{format_optional(twin.plain_cpu_us_per_roundtrip, '{:.0f}')} / "
                     f"{format_optional(twin.driver_cpu_us_per_roundtrip, '{:.0f}')} | {twin.cause} |")
    return lines


def render_markdown(run: RunResult, summaries: Summaries) -> str:
    servers, clients = axes(run)
    unit = rate_unit(run)
    lines = matrix_section(run, summaries, servers, clients, unit)
    lines += relative_section(run, summaries, servers, clients, unit)
    lines += cost_section(run, servers, clients)
    lines += plain_section(run, summaries)
    lines += workload_report.run_section(summaries, unit)
    lines += workers_report.markdown_section(workers_figures(run))
    lines += flagged_section(run, summaries)
    lines += per_cell_section(run, summaries, unit)
    lines += time_budget_section(summaries)
    lines += profile_report.run_markdown_lines(run.profiles)
    lines += problems_section(summaries)
    return "\n".join(lines) + "\n"


def matrix_section(run: RunResult, summaries: Summaries, servers: list[str], clients: list[str],
                   unit: str) -> list[str]:
    """The title, the run's machine and settings, the legend and the matrix of medians."""
    config = run.configuration
    env = run.environment
    title = workload_title(config)
    pairs = config.get("pairs", 1)
    server_loops, client_loops = axis_loops(summaries)
    lines = [
        f"# {title}, server × client",
        "",
        f"Run started {run.started_at}" + (f", finished {run.finished_at}" if run.finished_at else ", unfinished")
        + (" (interrupted)" if run.interrupted else "") + ".",
        f"Machine: {env.get('cpu_model')}, {env.get('cpu_count')} CPUs, Linux {env.get('kernel')}; "
        f"Python {env.get('python', {}).get('version')}, Node.js {env.get('node')}; "
        f"suite {str(env.get('suite_commit'))[:10]}{' (modified)' if env.get('suite_dirty') else ''}."
        + switches_text(env) + (f" {topology_line(run.topology)}" if run.topology else ""),
        f"Settings: {rounds_text(run)}; each attempt {config['duration_s']:g} s after {config['warmup_s']:g} s "
        "warmup; "
        f"loop {config['loop']}; compression {config['compression']}; payload {config['payload_size']} bytes "
        f"{config['payload_kind']}; " + (f"{pairs} pairs per cell{per_worker_text(config)}, each in its own room, "
                                          f"driven by "
                                          f"{config.get('client_processes', 1)} client process(es); "
                                          if pairs != 1 else "")
        + ("TLS (wss://); " if config.get("tls") else "")
        + placement_text(config) + young_generation_text(config) + ".",
        *([f"Interpreter: {interpreter}."] if (interpreter := interpreter_text(config, env)) else []),
        *([f"Precision: {reach.sentence()}."] if (reach := precision_reach(run)) else []),
        *([f"Precision, paced and raw: {both.sentence()}."] if (both := paced_precision(run)) else []),
        *([f"Pace: {pace.sentence()}."] if (pace := run_pace(run)) else []),
        *([f"Host: {host.sentence()}."] if (host := HostWakeup.from_json(run.host_wakeup)) else []),
        *([f"Host probe: {probed.sentence()}."] if (probed := probe_figures(run)) else []),
        *([f"CPU pace: {paced.sentence()}."] if (paced := pace_figures(run)) else []),
        "",
        f"Each cell: median {unit}{reference_pace_text(run)} over the repeats, its CV, p99 "
        + latency_name(config) + " latency "
        f"(all repeats merged). {CV_MEANING}; (noisy) = CV ≥ {NOISY_CV:.0%}; ᶻ = permessage-deflate negotiated; "
        "⚑ = flagged as odd (reasons below); ᵐ = a side's allocator not settled in some attempt (below); — = not measured (see below). Each server and client is named with "
        "the event loop it reported running on.",
        "",
        "| server \\ client | " + " | ".join(with_loop(client, client_loops) for client in clients) + " |",
        "|---|" + "---:|" * len(clients),
    ]
    for server in servers:
        row = [matrix_cell_text(summaries[(server, client)]) if (server, client) in summaries else "—"
               for client in clients]
        lines.append(f"| {with_loop(server, server_loops)} | " + " | ".join(row) + " |")
    return lines


def relative_section(run: RunResult, summaries: Summaries, servers: list[str], clients: list[str],
                     unit: str) -> list[str]:
    """Every cell relative to the fastest WebSocket pair, paired by round."""
    lines: list[str] = []
    fastest = fastest_cell(run, summaries)
    if fastest:
        ratios = relative_to_fastest(run, summaries)
        rate = summaries[fastest].roundtrips_per_s.median
        floor_text = "; ".join(f"{server} × {client} {format_rate(value)}" for (server, client), value
                               in floors(run, summaries))
        usual = usual_label(ratios.values())
        lines += ["", f"Fastest WebSocket pair: **{fastest[0]} server × {fastest[1]} client**, {format_rate(rate)} "
                  f"{unit}" + (f" (raw-TCP floors, without WebSocket: {floor_text})" if floor_text else "") + ". "
                  "Every cell relative to it: the median of its per-round ratios to the fastest's rate (each round "
                  f"measures every cell once); {interval_legend(ratios.values())}:", "",
                  "| server \\ client | " + " | ".join(clients) + " |", "|---|" + "---:|" * len(clients)]
        for server in servers:
            row = [format_ratio_to_reference(ratios[(server, client)], usual, (server, client) == fastest)
                   if (server, client) in ratios else "—" for client in clients]
            lines.append(f"| {server} | " + " | ".join(row) + " |")
    return lines


def per_cell_section(run: RunResult, summaries: Summaries, unit: str) -> list[str]:
    """One row per measured cell with every derived figure."""
    config = run.configuration
    per = "delivery" if workload_kind(config) == "broadcast" else "rt"
    # runs saved before page faults were sampled render as they always did, without the column
    faults = any(summary.cpu(side).minor_faults_per_roundtrip is not None
                 for summary in summaries.values() for side in ("server", "client"))
    lines = ["", "## Per cell", "",
              "CPU is user+system time of each side's process tree over the measured window; utilization is that "
              "CPU time over wall time (1.0 = one core busy). The bottleneck is the side at ≥ 80% of a core; "
              f"'neither' means the pair waits rather than computes. {HALF_WIDTH_MEANING} (in brackets, how often "
              f"such an interval holds the true median); {CV_MEANING}.", "",
              f"| server | client | {unit} median [min–max] | n | ± (coverage) | CV | p50 | p90 | p99 | p99.9 | max "
              f"| server µs/{per} | client µs/{per} | server util | client util | bottleneck | server peak RSS "
              "| loops (server/client) | compression | TCP_NODELAY (server/client) | TCP segments/message "
              "| delayed ACKs/rt |" + (" page faults/rt (server/client) |" if faults else ""),
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|---|---:|"
              "---:|" + ("---:|" if faults else "")]
    for (server, client), summary in summaries.items():
        if not summary.measured:
            continue
        rates = summary.roundtrips_per_s
        lines.append("| " + " | ".join([
            server, client,
            f"{format_rate(rates.median)} [{format_rate(rates.minimum)}–{format_rate(rates.maximum)}]",
            str(rates.n),
            half_width_text(rates.precision, rates.interval_coverage),
            cv_text(rates.cv).removeprefix("CV "),
            *(format_duration_ns(value) for value in percentiles(summary.latency)),
            format_optional(summary.server_cpu.us_per_roundtrip, "{:.1f}"),
            format_optional(summary.client_cpu.us_per_roundtrip, "{:.1f}"),
            format_optional(summary.server_cpu.utilization, "{:.2f}"),
            format_optional(summary.client_cpu.utilization, "{:.2f}"),
            summary.bottleneck or "–",
            format_optional(summary.server_peak_rss_bytes and summary.server_peak_rss_bytes / 2**20, "{:.0f} MiB"),
            f"{summary.server_loop or '?'}/{summary.client_loop or '?'}",
            short_extensions(summary.compression_negotiated),
            f"{NODELAY_TEXT[summary.server_tcp_nodelay]}/{NODELAY_TEXT[summary.client_tcp_nodelay]}",
            format_optional(summary.segments_per_message, "{:.2f}"),
            format_optional(summary.delayed_acks_per_roundtrip, "{:.3f}"),
            *([faults_text(summary)] if faults else []),
        ]) + " |")
    return lines


def time_budget_section(summaries: Summaries) -> list[str]:
    """'## Where a roundtrip's time goes': each side's CPU (user, system), run delay and blocked time per roundtrip,
    and its context switches; absent for runs saved before these readings."""
    budgets = time_budgets(summaries)
    if not budgets:
        return []
    lines = ["", "## Where a roundtrip's time goes", "",
             "Each side's share of a roundtrip (1e6 / the cell's median rate), in µs: its CPU time, split into user "
             "and system time by the share of its clock ticks over all the cell's rounds (ticks are 10 ms, so the "
             "split is coarse; the CPU time is not); its run delay, runnable but waiting for a CPU; and the rest, "
             "blocked: waiting on the other side, the kernel's network path, a wake-up. The CPU time is also split by "
             "thread: each process's main thread, where its event loop runs and whose CPU, run delay and blocked "
             "time add up to the roundtrip, and its other threads (a thread pool's zlib, GC, the JIT), which run "
             "beside it (blocked is below 0 only when a side's main threads are several processes at once: several "
             "client processes or workers). Context switches per roundtrip: voluntary (it blocked) "
             "and involuntary (preempted). Medians over the rounds, of the threads present at both edges of the "
             "window (docs/methodology.md, \"Where a roundtrip's time goes\").", "",
             "| server | client | side | roundtrip µs | user µs | system µs | main thread µs | other threads µs "
             "| run delay µs | blocked µs | voluntary switches/rt | involuntary switches/rt |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (server, client), side, budget in budgets:
        lines.append("| " + " | ".join([
            server, client, side, f"{budget.roundtrip_us:.1f}", format_optional(budget.user_us, "{:.1f}"),
            format_optional(budget.system_us, "{:.1f}"), format_optional(budget.main_thread_cpu_us, "{:.1f}"),
            format_optional(budget.other_threads_cpu_us, "{:.1f}"), f"{budget.run_delay_us:.1f}",
            f"{budget.blocked_us:.1f}",
            f"{budget.voluntary_switches:.2f}", f"{budget.involuntary_switches:.2f}"]) + " |")
    return lines


def problems_section(summaries: Summaries) -> list[str]:
    """The cells not measured, and every failed attempt's reason."""
    lines: list[str] = []
    problems = [(key, s) for key, s in summaries.items() if s.status in ("skipped", "failed", "partial")]
    if problems:
        lines += ["", "## Not measured or failed", ""]
        for (server, client), summary in problems:
            if summary.status == "skipped":
                lines.append(f"- {server} × {client}: not measured: {summary.reason}")
            for failure in summary.failures:
                lines.append(f"- {server} × {client}: {failure}")
    return lines


def flagged_section(run: RunResult, summaries: Summaries) -> list[str]:
    """'## Flagged cells': each odd cell with its one-line reasons, and how to dig further."""
    flagged = [(key, summary.flags) for key, summary in summaries.items() if summary.flags]
    if not flagged:
        return ["", "No cell is flagged: every measured cell is within 3× of what its server and client predict, "
                "and no signal rule fired."]
    lines = ["", "## Flagged cells", "",
             "A cell is flagged when it runs under 1/3 of the rate its row and column predict (log-space model "
             "rate ≈ server factor × client factor, fitted without it), or when one of its signals is out of "
             "line. `python run_bench.py diagnose SERVER CLIENT` measures a flagged cell in depth.", ""]
    excess = excess_by_cell(run, summaries)
    for (server, client), flags in flagged:
        beyond = excess.get((server, client))
        lines.append(f"- **{server} × {client}**: " + "; ".join(flags)
                     + (f". It costs {beyond.text()}" if beyond else ""))
    return lines + unsettled_section(summaries)


def unsettled_section(summaries: Summaries) -> list[str]:
    """'## Allocators not settled': each cell (ᵐ) where a side's page faults cost more of a roundtrip than a settled
    allocator's do (summary.side_cpu), in how many attempts, and why."""
    unsettled = [(key, summary.unsettled) for key, summary in summaries.items() if summary.unsettled]
    if not unsettled:
        return []
    lines = ["", "## Allocators not settled", "",
             "Every process runs with glibc's malloc thresholds fixed (--malloc settled); a side whose page faults in "
             "an attempt's window (those that grow with the roundtrips) still cost 1% of a roundtrip or more, at the "
             "run's measured cost of a fault (files without it: more than 0.1 faults per roundtrip), is named here, "
             "with why.", ""]
    lines += [f"- **{server} × {client}**: " + "; ".join(notes) for (server, client), notes in unsettled]
    return lines


