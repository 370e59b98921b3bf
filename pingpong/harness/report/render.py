"""Tables of a run (Markdown, CSV): pure functions of the results and their per-cell summaries."""

from __future__ import annotations

import csv
import io
from collections import Counter
from typing import Iterable

from pingpong.harness.analysis.costs import websocket_costs
from pingpong.harness.results.records import RunResult
from pingpong.harness.analysis.stats import NOISY_CV, Ratio, paired_ratio, percent
from pingpong.harness.analysis.summary import CellSummary, Summaries, workload_kind


def axes(run: RunResult) -> tuple[list[str], list[str]]:
    """Servers (rows) and clients (columns) in the order the run first met them."""
    servers: list[str] = []
    clients: list[str] = []
    for cell in run.cells:
        if cell.server not in servers:
            servers.append(cell.server)
        if cell.client not in clients:
            clients.append(cell.client)
    return servers, clients


def axis_loops(summaries: Summaries) -> tuple[dict[str, str], dict[str, str]]:
    """The event loop each server (row) and each client (column) reported running on in its measured cells.

    A name that ran on more than one loop in the run (it reported different ones in different cells) gets them
    all, 'asyncio/uvloop'; one that never reported its loop, or was never measured, gets none.
    """
    found: tuple[dict[str, set[str]], dict[str, set[str]]] = ({}, {})
    for (server, client), summary in summaries.items():
        if not summary.measured:
            continue
        for names, name, loop in ((found[0], server, summary.server_loop), (found[1], client, summary.client_loop)):
            if loop:
                names.setdefault(name, set()).add(loop)
    servers, clients = ({name: "/".join(sorted(loops)) for name, loops in side.items()} for side in found)
    return servers, clients


def with_loop(name: str, loops: dict[str, str]) -> str:
    """'sanic (uvloop)': a row's or column's name with the loop it ran on, or the name alone when not known."""
    return f"{name} ({loops[name]})" if name in loops else name


def format_rate(value: float) -> str:
    return f"{value:,.0f}"


def format_duration_ns(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 1e9:
        return f"{value / 1e9:.2f} s"
    if value >= 1e6:
        return f"{value / 1e6:.2f} ms"
    return f"{value / 1e3:.0f} µs"


def matrix_cell_text(summary: CellSummary) -> str:
    """'3,712 ±1.2% · p99 410 µs', with '(noisy)' past the noise threshold and failures spelled out."""
    status = summary.status
    if status == "skipped":
        return "—"
    if not summary.measured:
        first = (summary.failures or ("no attempt",))[0]
        return f"FAILED ({first.split(': ')[1] if ': ' in first else first})"
    rates = summary.roundtrips_per_s
    text = format_rate(rates.median)
    if rates.cv is not None:
        text += f" ±{rates.cv * 100:.1f}%"
    if summary.latency is not None and summary.latency.count:
        text += f" · p99 {format_duration_ns(summary.latency.p99_ns)}"
    if summary.noisy:
        text += " (noisy)"
    if summary.compression_negotiated:
        text += " ᶻ"
    if summary.flags:
        text += " ⚑"
    if status == "partial":
        text += f" ({len(summary.failures)} failed)"
    return text


def is_floor(run: RunResult, server: str) -> bool:
    """Whether a server is a raw-TCP floor (the same relay without WebSocket), as the run's manifest says."""
    return run.implementations.get("server", {}).get(server, {}).get("protocol") == "raw-tcp"


def fastest_cell(run: RunResult, summaries: Summaries) -> tuple[str, str] | None:
    """The fastest measured WebSocket pair (the raw-TCP floors are not contenders); None when none was measured."""
    measured = [(s.roundtrips_per_s.median, key) for key, s in summaries.items()
                if s.measured and not is_floor(run, key[0])]
    return max(measured)[1] if measured else None


def floors(run: RunResult, summaries: Summaries) -> list[tuple[tuple[str, str], float]]:
    """The measured raw-TCP floor cells and their median rates, in the run's order."""
    return [(key, s.roundtrips_per_s.median) for key, s in summaries.items() if s.measured and is_floor(run, key[0])]


def relative_to_fastest(run: RunResult, summaries: Summaries) -> dict[tuple[str, str], Ratio]:
    """Each measured cell's rate over the fastest cell's: the median of the per-round ratios, with its interval.

    A run measures every cell once per round, so a cell and the fastest are paired by round (stats.paired_ratio);
    a cell with no good round in common with the fastest is left out.
    """
    fastest = fastest_cell(run, summaries)
    if fastest is None:
        return {}
    reference = run.cell(*fastest).rates_by_round()
    return {(cell.server, cell.client): paired_ratio(cell.rates_by_round(), reference)
            for cell in run.cells if cell.rates_by_round().keys() & reference.keys()}


def usual_label(ratios: Iterable[Ratio]) -> str | None:
    """The label most of these ratios' intervals have (a table states it once); None when none has an interval."""
    labels = Counter(ratio.label() for ratio in ratios if ratio.low is not None)
    return labels.most_common(1)[0][0] if labels else None


def interval_legend(ratios: Iterable[Ratio]) -> str:
    """What a table's brackets are, with their coverage; brackets that differ (fewer values) carry their own."""
    ratios = list(ratios)
    usual = usual_label(ratios)
    if usual is None:
        return "no intervals (one value each)"
    others = sum(ratio.low is not None and ratio.label() != usual for ratio in ratios)
    return f"brackets: {usual}" + (f"; {others} bracket(s) from fewer values give their own coverage" if others else "")


def format_ratio(ratio: Ratio, usual: str | None = None) -> str:
    """'0.95× [0.90–1.00]'; the bracket names its coverage when its label is not the table's usual one."""
    if ratio.low is None:
        return f"{ratio.value:.2f}×"
    own = f", {ratio.coverage_text()}" if ratio.label() != usual else ""
    return f"{ratio.value:.2f}× [{ratio.low:.2f}–{ratio.high:.2f}{own}]"


COST_PARTS = (
    ("server", "Server part: the WebSocket server's CPU time per roundtrip over its runtime's raw-TCP floor server's, "
               "the floor facing the C floor client"),
    ("client", "Client part: the WebSocket client's CPU time per roundtrip over its runtime's raw-TCP floor client's, "
               "the floor facing the C floor server"),
    ("end_to_end", "End to end: the rate of the same two runtimes' raw-TCP floors paired, over the cell's rate (how "
                   "many times slower the pair is than its runtimes without WebSocket)"),
)


def cost_section(run: RunResult, servers: list[str], clients: list[str]) -> list[str]:
    """'WebSocket cost': the server part, the client part and the end-to-end figure, one matrix each."""
    costs = websocket_costs(run)
    every = [getattr(split, part) for split in costs.values() for part, _ in COST_PARTS
             if getattr(split, part) is not None]
    usual = usual_label(every)
    lines = []
    for part, caption in COST_PARTS:
        ratios = {key: getattr(split, part) for key, split in costs.items() if getattr(split, part) is not None}
        rows = [server for server in servers if any((server, client) in ratios for client in clients)]
        columns = [client for client in clients if any((server, client) in ratios for server in servers)]
        if not rows:
            continue
        lines += ["", f"{caption}:", "", "| server \\ client | " + " | ".join(columns) + " |",
                  "|---|" + "---:|" * len(columns)]
        for server in rows:
            lines.append(f"| {server} | " + " | ".join(format_ratio(ratios[(server, client)], usual)
                                                       if (server, client) in ratios else "—"
                                                       for client in columns) + " |")
    if lines:
        lines[:0] = ["", "WebSocket cost, against the raw-TCP floors of the same runtimes: the median of the "
                     f"per-round ratios (each round measures every cell once); {interval_legend(every)}; — where a "
                     "floor cell was not measured:"]
    return lines


def rounds_text(config: dict) -> str:
    """How many rounds the run measured and how: '6–20 rounds until ±3% within 270 s (stopped: precise), one
    server process per round, order seed 7'; older files, without a rounds record: '3 repeats'."""
    rounds = config.get("rounds")
    repeat = config.get("repeat")
    if not rounds:
        return f"{repeat} repeat{'s' if repeat != 1 else ''}"
    if rounds.get("precision") is not None:
        budget = f" within {rounds['budget_s']:g} s" if rounds.get("budget_s") is not None else ""
        text = (f"{rounds['min_rounds']}–{rounds['max_rounds']} rounds until ±{rounds['precision']:.1%}{budget}"
                + (f" (stopped: {rounds['stopped_by']})" if rounds.get("stopped_by") else ""))
    else:
        text = f"{rounds['min_rounds']} round{'s' if rounds['min_rounds'] != 1 else ''}"
    return (text + (", a fresh server per attempt" if rounds.get("fresh_server") else
                    ", one server process per server and round") + f", order seed {rounds.get('seed')}")


# Per workload kind (summary.workload_kind): the unit of a cell's rate, the report's title, what its latency times.
WORKLOAD_TEXTS = {
    "pingpong": ("roundtrips/s", "WebSocket ping-pong: roundtrips per second", "roundtrip"),
    "handshake": ("handshakes/s", "WebSocket handshakes: connections opened, one roundtrip, closed, per second",
                  "handshake-cycle"),
    "broadcast": ("deliveries/s", "WebSocket broadcast: messages delivered per second (one sender, each message to "
                                  "every receiver before the next)", "to-the-last-receiver"),
    "open-loop": ("answered/s", "WebSocket open-loop ping-pong: latency and roundtrips answered at a fixed offered "
                                "rate", "from-the-intended-send-time"),
}


def unit_for_kind(kind: str) -> str:
    return WORKLOAD_TEXTS.get(kind, WORKLOAD_TEXTS["pingpong"])[0]


def workload_title(config: dict) -> str:
    """The report's title: the workload, with its receivers, offered rate or idle connections."""
    kind = workload_kind(config)
    title = WORKLOAD_TEXTS.get(kind, WORKLOAD_TEXTS["pingpong"])[1]
    details = []
    if kind == "broadcast":
        details.append(f"{config.get('receivers', 1)} receivers")
    if kind == "open-loop":
        details.append(f"{config['rate']:g} messages/s offered per pair")
    if config.get("idle_connections"):
        details.append(f"{config['idle_connections']:,} idle connections held")
    return title + (f" ({'; '.join(details)})" if details else "")


def latency_name(config: dict) -> str:
    return WORKLOAD_TEXTS.get(workload_kind(config), WORKLOAD_TEXTS["pingpong"])[2]


def rate_unit(run: RunResult) -> str:
    return unit_for_kind(workload_kind(run.configuration))


class Headline:
    """What a matrix shows per cell for the run's workload: its rate (roundtrips, handshakes or deliveries per
    second), or, in an open loop, where every cell answers the rate it is offered, the p99 latency from the intended
    send time at that rate. The terminal, the HTML heat map and the PNG heat map all show this one figure."""

    def __init__(self, run: RunResult) -> None:
        config = run.configuration
        self.kind = workload_kind(config)
        self.latency = self.kind == "open-loop"
        self.unit = "p99" if self.latency else rate_unit(run)
        self.higher_is_better = not self.latency
        self.label = (f"p99 latency from the intended send time at {config.get('rate', 0):g} messages/s offered "
                      "per pair" if self.latency else f"median {self.unit}")

    def value(self, summary: CellSummary | None) -> float | None:
        """The figure of a measured cell (ns for a latency), None otherwise."""
        if summary is None or not summary.measured:
            return None
        if self.latency:
            return summary.latency.p99_ns if summary.latency is not None and summary.latency.count else None
        return summary.roundtrips_per_s.median

    def short(self, value: float) -> str:
        """The figure in at most 6 characters: '7.3k', '6.9ms', '412µs'."""
        if not self.latency:
            return short_rate(value)
        if value >= 1e9:
            return f"{value / 1e9:.1f}s"
        if value >= 1e6:
            return f"{value / 1e6:.1f}ms" if value < 99.95e6 else f"{value / 1e6:.0f}ms"
        return f"{value / 1e3:.0f}µs"

    def long(self, value: float) -> str:
        return format_duration_ns(value) if self.latency else format_rate(value)


def short_rate(value: float) -> str:
    """A rate in at most 5 characters: 850, 7.3k, 23.1k, 231k, 1.23M."""
    if value < 999.5:
        return f"{value:.0f}"
    if value < 99_950:
        return f"{value / 1e3:.1f}k"
    if value < 999_500:
        return f"{value / 1e3:.0f}k"
    return f"{value / 1e6:.2f}M"


def topology_line(cluster: dict) -> str:
    """Where a --cluster run's sides ran, the link between them, and the raw-TCP floor's round trip across it."""
    hosts = cluster.get("hosts") or []

    def named(role: str) -> str:
        return ", ".join(f"{host['address']} ({host.get('hostname')})" for host in hosts if host["role"] == role)
    floor = cluster.get("floor") or {}
    floor_text = (f"raw-TCP floor across it {floor['p50_us']:g} µs p50 round trip "
                  f"({floor['roundtrips_per_s']:,.0f} roundtrips/s)" if "p50_us" in floor
                  else f"raw-TCP floor not measured ({floor.get('error')})")
    return (f"Cluster {cluster.get('scheduler')}: servers on {named('server')}; clients on {named('client')}; "
            f"link {cluster.get('link')}; {floor_text}.")


def render_markdown(run: RunResult, summaries: Summaries) -> str:
    servers, clients = axes(run)
    config = run.configuration
    env = run.environment
    unit = rate_unit(run)
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
        + (f" {topology_line(env['cluster'])}" if env.get("cluster") else ""),
        f"Settings: {rounds_text(config)}; each attempt {config['duration_s']:g} s after {config['warmup_s']:g} s "
        "warmup; "
        f"loop {config['loop']}; compression {config['compression']}; payload {config['payload_size']} bytes "
        f"{config['payload_kind']}; " + (f"{pairs} pairs per cell, each in its own room, driven by "
                                          f"{config.get('client_processes', 1)} client process(es); "
                                          if pairs != 1 else "")
        + ("TLS (wss://); " if config.get("tls") else "")
        + ("server and client pinned to separate CPUs" if config.get("pinned") else "not pinned") + ".",
        "",
        f"Each cell: median {unit} over the repeats, ± coefficient of variation, p99 "
        + latency_name(config) + " latency "
        f"(all repeats merged). (noisy) = CV ≥ {NOISY_CV:.0%}; ᶻ = permessage-deflate negotiated; "
        "⚑ = flagged as odd (reasons below); — = not measured (see below). Each server and client is named with "
        "the event loop it reported running on.",
        "",
        "| server \\ client | " + " | ".join(with_loop(client, client_loops) for client in clients) + " |",
        "|---|" + "---:|" * len(clients),
    ]
    for server in servers:
        row = [matrix_cell_text(summaries[(server, client)]) if (server, client) in summaries else "—"
               for client in clients]
        lines.append(f"| {with_loop(server, server_loops)} | " + " | ".join(row) + " |")

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
            row = [format_ratio(ratios[(server, client)], usual) if (server, client) in ratios else "—"
                   for client in clients]
            lines.append(f"| {server} | " + " | ".join(row) + " |")

    lines += cost_section(run, servers, clients)
    from pingpong.harness.report import workloads as workload_report  # it formats with this module's helpers

    lines += workload_report.run_section(summaries, unit)

    lines += flagged_section(summaries)

    per = "delivery" if workload_kind(config) == "broadcast" else "rt"
    # runs saved before page faults were sampled render as they always did, without the column
    faults = any(summary.cpu(side).minor_faults_per_roundtrip is not None
                 for summary in summaries.values() for side in ("server", "client"))
    lines += ["", "## Per cell", "",
              "CPU is user+system time of each side's process tree over the measured window; utilization is that "
              "CPU time over wall time (1.0 = one core busy). The bottleneck is the side at ≥ 80% of a core; "
              "'neither' means the pair waits rather than computes.", "",
              f"| server | client | {unit} median [min–max] | n | precision | CV | p50 | p90 | p99 | p99.9 | max "
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
            "–" if rates.precision is None else f"±{rates.precision:.1%} ({percent(rates.interval_coverage)})",
            "–" if rates.cv is None else f"{rates.cv * 100:.1f}%",
            *(format_duration_ns(value) for value in percentiles(summary.latency)),
            _number(summary.server_cpu.us_per_roundtrip, "{:.1f}"),
            _number(summary.client_cpu.us_per_roundtrip, "{:.1f}"),
            _number(summary.server_cpu.utilization, "{:.2f}"),
            _number(summary.client_cpu.utilization, "{:.2f}"),
            summary.bottleneck or "–",
            _number(summary.server_peak_rss_bytes and summary.server_peak_rss_bytes / 2**20, "{:.0f} MiB"),
            f"{summary.server_loop or '?'}/{summary.client_loop or '?'}",
            short_extensions(summary.compression_negotiated),
            f"{NODELAY_TEXT[summary.server_tcp_nodelay]}/{NODELAY_TEXT[summary.client_tcp_nodelay]}",
            _number(summary.segments_per_message, "{:.2f}"),
            _number(summary.delayed_acks_per_roundtrip, "{:.3f}"),
            *([faults_text(summary)] if faults else []),
        ]) + " |")

    problems = [(key, s) for key, s in summaries.items() if s.status in ("skipped", "failed", "partial")]
    if problems:
        lines += ["", "## Not measured or failed", ""]
        for (server, client), summary in problems:
            if summary.status == "skipped":
                lines.append(f"- {server} × {client}: not measured: {summary.reason}")
            for failure in summary.failures:
                lines.append(f"- {server} × {client}: {failure}")
    return "\n".join(lines) + "\n"


NODELAY_TEXT = {True: "on", False: "OFF", None: "?"}


def faults_text(summary) -> str:
    """Minor page faults per roundtrip, server/client ('?' for a side not sampled)."""
    values = (summary.cpu(side).minor_faults_per_roundtrip for side in ("server", "client"))
    return "/".join("?" if value is None else f"{value:.2f}" for value in values)


def percentiles(latency) -> tuple[int | None, ...]:
    """p50, p90, p99, p99.9 and max in ns of a summary.Latency; all None when nothing was recorded."""
    if latency is None:
        return (None,) * 5
    return (latency.p50_ns, latency.p90_ns, latency.p99_ns, latency.p99_9_ns, latency.max_ns)


def flagged_section(summaries: Summaries) -> list[str]:
    """'## Flagged cells': each odd cell with its one-line reasons, and how to dig further."""
    flagged = [(key, summary.flags) for key, summary in summaries.items() if summary.flags]
    if not flagged:
        return ["", "No cell is flagged: every measured cell is within 3× of what its server and client predict, "
                "and no signal rule fired."]
    lines = ["", "## Flagged cells", "",
             "A cell is flagged when it runs under 1/3 of the rate its row and column predict (log-space model "
             "rate ≈ server factor × client factor, fitted without it), or when one of its signals is out of "
             "line. `python run_bench.py diagnose SERVER CLIENT` measures a flagged cell in depth.", ""]
    for (server, client), flags in flagged:
        lines.append(f"- **{server} × {client}**: " + "; ".join(flags))
    return lines


def short_extensions(extensions: str | None) -> str:
    """'permessage-deflate; server_max_window_bits=12; ...' as 'deflate (server_max_window_bits=12, ...)'."""
    if not extensions:
        return "none"
    name, *parameters = [part.strip() for part in extensions.split(";")]
    name = "deflate" if name == "permessage-deflate" else name
    return f"{name} ({', '.join(parameters)})" if parameters else name


def _number(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


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
