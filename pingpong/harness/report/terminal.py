"""The run as a person reads it in a terminal: rates only, one-character marks, a ranking; at most 120 columns.

terminal_report() is a pure function of the results (the tables as text cells); render_plain() lays them out as
padded plain text (pipes, CI logs), print_rich() draws them with rich on a terminal. The details (spread, latency
percentiles, CPU, flags' reasons) are in the saved .md, .csv and .html files.
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass

from pingpong.harness.analysis.anomalies import flag_cause
from pingpong.harness.analysis.costs import CostSplit, websocket_costs
from pingpong.harness.analysis.host_wakeup import HostWakeup
from pingpong.harness.analysis.host_pace import reference_pace_text, run_pace
from pingpong.harness.analysis.pace import pace_figures
from pingpong.harness.analysis.plain_twins import allocators_text, plain_twins
from pingpong.harness.analysis.host_modes import probe_figures
from pingpong.harness.analysis.precision import paced_precision, precision_reach
from pingpong.harness.analysis.stats import NOISY_CV
from pingpong.harness.analysis.summary import CellSummary, Summaries
from pingpong.harness.analysis.workers import workers_figures
from pingpong.harness.report.formatting import (REFERENCE_TEXT, Headline, axes, axis_loops, excess_by_cell,
                                                fastest_cell, floors, format_duration_ns, format_rate, is_contender,
                                                interpreter_text, is_floor, per_worker_text, placement_text,
                                                young_generation_text,
                                                rate_unit,
                                                relative_to_fastest,
                                                rounds_text, short_rate, switches_text, topology_line, usual_label,
                                                with_loop, workload_title)
from pingpong.harness.report.workloads import cell_figures
from pingpong.harness.report import profile_report
from pingpong.harness.report import workers as workers_report
from pingpong.harness.results.records import RunResult

WIDTH = 120  # the widest a report gets, on a wider terminal too; a narrower one gets its own width
NARROWEST = 60  # below this a terminal is taken as this wide (tables then split into more parts)
RANKED = 10  # pairs shown in the ranking; the files have them all

MARKS = {"!": "flagged as odd (reasons in the files)", "~": f"noisy (CV ≥ {NOISY_CV:.0%})",
         "z": "permessage-deflate negotiated", "m": "a side's allocator not settled: its page faults cost ≥1% of a roundtrip (reasons in the files)",
         "?": "some repeats failed"}


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right_aligned: tuple[bool, ...]  # per column
    subheader: tuple[str, ...] = ()  # a second header line (the clients' loops under their names); () for none
    key_columns: int = 1  # the leading columns that name a row: repeated in each part of a table split for width


@dataclass(frozen=True)
class TerminalReport:
    heading: tuple[str, ...]  # lines before the tables
    tables: tuple[Table, ...]
    notes: tuple[str, ...]  # lines after them
    width: int = WIDTH  # the columns it was laid out for: lines are wrapped and tables split to fit them


format_short = short_rate  # a rate in at most 5 characters: 850, 7.3k, 23.1k, 231k, 1.23M


def marks(summary: CellSummary) -> str:
    """The cell's one-character marks, in MARKS' order."""
    found = {"!": bool(summary.flags), "~": bool(summary.noisy), "z": bool(summary.compression_negotiated),
             "m": bool(summary.unsettled), "?": summary.status == "partial"}
    return "".join(mark for mark, present in found.items() if present)


def unmeasured_text(summary: CellSummary | None) -> str:
    """What a matrix shows for a cell without a figure: — skipped or absent, FAIL, … not yet measured."""
    if summary is None or summary.status == "skipped":
        return "—"
    return "FAIL" if summary.status == "failed" else "…"


def matrix_text(summary: CellSummary | None, headline: Headline) -> str:
    """A cell's headline figure in a few characters with its marks ('?' for a measured cell without it)."""
    if summary is None or not summary.measured:
        return unmeasured_text(summary)
    value = headline.value(summary)
    return ("?" if value is None else headline.short(value)) + marks(summary)


def _client_is_websocket(run: RunResult, client: str) -> bool:
    return run.implementations.get("client", {}).get(client, {}).get("protocol") != "raw-tcp"


def terminal_report(run: RunResult, summaries: Summaries, source: str | None = None,
                    width: int = WIDTH) -> TerminalReport:
    """The headline matrix (WebSocket servers × WebSocket clients), the ranking, the floors, what to look at.

    The matrix shows the workload's own headline (formatting.Headline): the rate, or an open loop's p99 at the offered
    rate; below it, the figures the workload adds (idle connections, open loop, broadcast), as the Markdown has them.
    width: the terminal's columns (at most WIDTH): text is wrapped and wide tables split to fit.
    """
    width = max(NARROWEST, min(width, WIDTH))
    servers, clients = axes(run)
    config = run.configuration
    headline = Headline(run)
    unit = rate_unit(run)
    websocket_servers = [s for s in servers if not is_floor(run, s)]
    websocket_clients = [c for c in clients if _client_is_websocket(run, c)]
    reach = precision_reach(run)
    heading = [*wrap(f"{workload_title(config)}: {headline.label}, server (rows) × client (columns)", width),
               *wrap(settings_line(run), width), *wrap(machine_line(run), width),
               *(wrap(f"Interpreter: {interpreter}.", width)
                 if (interpreter := interpreter_text(config, run.environment)) else []),
               *(wrap(f"Precision: {reach.sentence()}.", width) if reach else []),
               *(wrap(f"Precision, paced and raw: {both.sentence()}.", width)
                 if (both := paced_precision(run)) else []),
               *(wrap(f"Pace: {pace.sentence()}.", width) if (pace := run_pace(run)) else []),
               *(wrap(f"Host probe: {probed.sentence()}.", width) if (probed := probe_figures(run)) else [])]
    tables = []
    if websocket_servers and websocket_clients:
        server_loops, client_loops = axis_loops(summaries)
        rows = tuple((with_loop(server, server_loops),
                      *(matrix_text(summaries.get((server, client)), headline) for client in websocket_clients))
                     for server in websocket_servers)
        what = ("p99 latency at the offered rate, all rounds' histograms merged (! saturated or otherwise odd)"
                if headline.latency else f"{unit}, median of each cell's rounds{reference_pace_text(run)}")
        tables.append(Table(title=f"{what}; each server and client with the event loop it reported",
                            header=("server \\ client", *websocket_clients), rows=rows,
                            right_aligned=(False, *(True,) * len(websocket_clients)),
                            subheader=("", *(client_loops.get(client, "") for client in websocket_clients))
                            if client_loops else ()))
    ranking, more = (open_loop_table(run, summaries) if headline.latency else ranking_table(run, summaries))
    if ranking:
        tables.append(ranking)
    costs = cost_table(run, summaries, websocket_servers, websocket_clients)
    if costs:
        tables.append(costs)
    plain = plain_table(run, summaries)
    if plain:
        tables.append(plain)
    workers = workers_table(run)
    if workers:
        tables.append(workers)
    notes = []
    figures = cell_figures(summaries)
    if figures:
        notes.append("Workload figures (medians over the rounds; the .md has them in a table):")
        notes += [f"  {server} × {client}: {text}" for (server, client), text in figures]
    notes.append("Marks: " + "; ".join(f"{mark} {meaning}" for mark, meaning in MARKS.items())
                 + "; — not measured; FAIL every repeat failed.")
    floor_cells = floors(run, summaries)
    if floor_cells:
        notes.append("Raw-TCP floors (the same relay without WebSocket, for scale): "
                     + ", ".join(f"{s} × {c} {format_short(rate)}" for (s, c), rate in floor_cells) + ".")
    if (host := HostWakeup.from_json(run.host_wakeup)) is not None:
        notes.append(f"Host: {host.sentence()}.")
    if (paced := pace_figures(run)) is not None:
        notes.append(f"CPU pace: {paced.sentence()}.")
    if more:
        notes.append(f"… and {more} more pair(s) in the ranking; every pair is in the .md, .csv and .html files.")
    notes += flag_notes(run, summaries)
    notes += profile_report.run_terminal_notes(run.profiles)
    failed = [f"{s} × {c}" for (s, c), summary in summaries.items() if summary.status in ("failed", "partial")]
    if failed:
        notes.append(f"Failed or partly failed ({len(failed)}): {', '.join(failed)}.")
    if source:
        notes.append(f"Details: {source} (run_bench.py report {source} --format md|csv|html).")
    return TerminalReport(heading=tuple(heading), tables=tuple(tables),
                          notes=tuple(line for note in notes for line in wrap(note, width,
                                                                              indent="    " if note.startswith("  ")
                                                                              else "")),
                          width=width)


# What each cause (anomalies.CAUSES) does to a roundtrip, in a sentence; the cells' own reasons are in the files.
MECHANISMS = {
    "slow for this pair (the model)": "Slower than its server and client are with others, and no signal says why.",
    "saturated at the offered rate": "The pair cannot answer the offered rate: messages queue and latency grows.",
    "messages written in pieces": "A side writes each message in several TCP segments.",
    "delayed ACKs": "Nagle's algorithm holds a write back until the peer's delayed ACK (~40 ms).",
    "retransmissions on loopback": "TCP resends segments that loopback dropped.",
    "permessage-deflate on small messages": "Every message goes through zlib both ways, saving nothing this small.",
    "TCP_NODELAY off": "Nagle's algorithm may hold small writes back.",
    "page faults, server side": "The server maps fresh memory for messages: a page fault per new page.",
    "page faults, client side": "The client maps fresh memory for messages: a page fault per new page.",
    "both sides mostly wait": "Neither side computes most of the roundtrip: it waits on wake-ups.",
}
# The part of a cell's WebSocket cost (analysis/costs.py) a cause shows in: its side's, else the whole roundtrip's.
COST_PARTS = {"page faults, server side": "server", "page faults, client side": "client"}
COST_PART_NAMES = {"server": "its server part", "client": "its client part", "end_to_end": "end to end"}


def flag_notes(run: RunResult, summaries: Summaries) -> list[str]:
    """The flagged cells grouped by cause (anomalies.CAUSES), one line per cause: its cells, their WebSocket cost in
    µs per roundtrip (the part the cause shows in), and what the cause does (MECHANISMS). Each cell's reasons, and
    where its roundtrip goes side by side, are in the files."""
    by_cause: dict[str, list[tuple[str, str]]] = {}
    flagged = 0
    for key, summary in summaries.items():
        if not summary.flags:
            continue
        flagged += 1
        for flag in summary.flags:
            cells = by_cause.setdefault(flag_cause(flag), [])
            if key not in cells:
                cells.append(key)
    if not flagged:
        return []
    costs = websocket_costs(run)
    excess = excess_by_cell(run, summaries)
    lines = [f"Flagged ({flagged} cell{'s' if flagged != 1 else ''}), by cause: its cells, their WebSocket cost (the "
             "table above) and what they take beyond a healthy pair (the same client with an unflagged server), "
             "what the cause does. Each cell's reasons and time budget are in the files; "
             "`run_bench.py diagnose SERVER CLIENT` digs into one:"]
    for cause, cells in by_cause.items():
        cost = cause_cost_text(cells, costs, COST_PARTS.get(cause, "end_to_end"))
        beyond = excess_text(cells, excess)
        lines.append(f"  {cause}: {cells_text(cells)}." + (f" {cost}." if cost else "")
                     + (f" {beyond}." if beyond else "") + (f" {MECHANISMS[cause]}" if cause in MECHANISMS else ""))
    return lines


def excess_text(cells: list[tuple[str, str]], excess: dict) -> str:
    """'Beyond a healthy pair +90 to +107 µs per roundtrip (median +98)' over the cells that have one; '' else."""
    values = sorted(found.difference.value for cell in cells if (found := excess.get(cell)) is not None)
    if not values:
        return ""
    if len(values) == 1:
        return f"Beyond a healthy pair {values[0]:+.0f} µs per roundtrip"
    return (f"Beyond a healthy pair {values[0]:+.0f} to {values[-1]:+.0f} µs per roundtrip (median "
            f"{statistics.median(values):+.0f})")


def cells_text(cells: list[tuple[str, str]]) -> str:
    """Cells as the few products they make: each server with its clients, servers of the same clients together
    ('blacksheep, aiohttp × websockets, bun; sanic × bun'), in the order they came."""
    clients_of: dict[str, list[str]] = {}
    for server, client in cells:
        clients_of.setdefault(server, []).append(client)
    groups: dict[tuple[str, ...], list[str]] = {}
    for server, clients in clients_of.items():
        groups.setdefault(tuple(clients), []).append(server)
    return "; ".join(f"{', '.join(servers)} × {', '.join(clients)}" for clients, servers in groups.items())


def cause_cost_text(cells: list[tuple[str, str]], costs: dict[tuple[str, str], CostSplit], part: str) -> str:
    """'Cost +82 to +121 µs per roundtrip, its server part (median +102)' over the cells with that figure; '' when
    none has it (a run without raw-TCP floors)."""
    values = sorted(figure.value for cell in cells if (split := costs.get(cell)) is not None
                    and (figure := getattr(split, part)) is not None)
    if not values:
        return ""
    middle = len(values) // 2
    median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
    if len(values) == 1:
        return f"Cost {values[0]:+.0f} µs per roundtrip, {COST_PART_NAMES[part]}"
    return (f"Cost {values[0]:+.0f} to {values[-1]:+.0f} µs per roundtrip, {COST_PART_NAMES[part]} "
            f"(median {median:+.0f})")


def open_loop_table(run: RunResult, summaries: Summaries) -> tuple[Table | None, int]:
    """An open loop's pairs, lowest p99 first: what each answered of its offered rate, p50, p99, the verdict."""
    headline = Headline(run)
    ranked = sorted((value, key) for key, summary in summaries.items()
                    if not is_floor(run, key[0]) and (value := headline.value(summary)) is not None)
    if not ranked:
        return None, 0
    rows = []
    for place, (p99, (server, client)) in enumerate(ranked[:RANKED], 1):
        summary = summaries[(server, client)]
        figures = (summary.workload or {}).get("open_loop") or {}
        answered = (f"{figures['achieved_share']:.0%}" if figures.get("achieved_share") is not None else "–")
        verdict = ("saturated" if figures.get("saturated") else "keeps up") if figures else "–"
        rows.append((str(place), server, client, answered, format_duration_ns(summary.latency.p50_ns),
                     format_duration_ns(p99), verdict, marks(summary) or ""))
    threshold = run.configuration.get("saturation_p99_ms")
    title = (f"Lowest p99 at {run.configuration.get('rate', 0):g} messages/s offered per pair, from the intended "
             "send time; a pair saturates when its p99 passes "
             + (f"{threshold:g} ms" if threshold else "the threshold") + " or it answers under 95%")
    return Table(title=title, header=("#", "server", "client", "answered", "p50", "p99", "verdict", "marks"),
                 rows=tuple(rows), right_aligned=(True, False, False, True, True, True, False, False),
                 key_columns=3), max(0, len(ranked) - RANKED)


def ranking_table(run: RunResult, summaries: Summaries) -> tuple[Table | None, int]:
    """The WebSocket pairs, fastest first, each relative to the fastest: per-round ratios' median and interval."""
    fastest = fastest_cell(run, summaries)
    if fastest is None:
        return None, 0
    ratios = relative_to_fastest(run, summaries)
    usual = usual_label(ratios.values())
    ranked = sorted(((s.roundtrips_per_s.median, key) for key, s in summaries.items()
                     if s.measured and is_contender(run, key)), reverse=True)
    rows = []
    for place, (rate, (server, client)) in enumerate(ranked[:RANKED], 1):
        summary = summaries[(server, client)]
        ratio = ratios.get((server, client))
        interval = (REFERENCE_TEXT if (server, client) == fastest else "–" if ratio is None or ratio.low is None
                    else f"{ratio.low:.2f}–{ratio.high:.2f}" + (f" ({ratio.coverage_text()})"
                                                               if ratio.label() != usual else ""))
        p99 = summary.latency.p99_ns if summary.latency is not None and summary.latency.count else None
        rows.append((str(place), server, client, format_short(rate), f"{ratio.value:.2f}×" if ratio else "–",
                     interval, format_duration_ns(p99), marks(summary) or ""))
    title = (f"Fastest WebSocket pairs: each relative to {fastest[0]} × {fastest[1]} "
             f"({format_rate(summaries[fastest].roundtrips_per_s.median)} {rate_unit(run)}), the median of "
             f"per-round ratios; interval: {usual or 'none (one round)'}")
    p99 = "p99 last" if Headline(run).kind == "broadcast" else "p99"  # broadcast: to the last receiver
    return Table(title=title, header=("#", "server", "client", "rate", "ratio", "interval", p99, "marks"),
                 rows=tuple(rows), right_aligned=(True, False, False, True, True, True, True, False),
                 key_columns=3), max(0, len(ranked) - RANKED)


def cost_sum_text(split: CostSplit) -> str:
    """A cell's WebSocket cost as the sum it is, in whole µs per roundtrip: 'server+client+other=end to end', e.g.
    '138+71-52=157'; 'n/a' for a figure without its floor. Other is printed as the rounded end to end less the
    rounded parts, so that the printed sum holds (within 1.5 µs of other's own value)."""
    whole = {name: None if figure is None else round(figure.value) for name, figure in split.parts()}
    if None not in whole.values():
        whole["other"] = whole["end_to_end"] - whole["server"] - whole["client"]

    def term(name: str, signed: bool) -> str:
        value = whole[name]
        if value is None:
            return "+n/a" if signed else "n/a"
        return f"{value:+d}" if signed else f"{value:d}"

    return term("server", False) + term("client", True) + term("other", True) + "=" + term("end_to_end", False)


def cost_table(run: RunResult, summaries: Summaries, servers: list[str], clients: list[str]) -> Table | None:
    """The WebSocket cost of each cell in µs per roundtrip beyond the floors, as the sum it is:
    'server part+client part+other=end to end'."""
    costs = websocket_costs(run)
    rows = [server for server in servers if any((server, client) in costs for client in clients)]
    columns = [client for client in clients if any((server, client) in costs for server in servers)]
    if not rows:
        return None

    def text(server: str, client: str) -> str:
        summary = summaries.get((server, client))
        if summary is None or not summary.measured:
            return unmeasured_text(summary)
        split = costs.get((server, client))
        return "n/a" if split is None else cost_sum_text(split)

    return Table(title="WebSocket cost, µs per roundtrip beyond the raw-TCP floors of the same runtimes: server part "
                       "(its CPU less its floor's) + client part (likewise) + other (the rest: time neither side's CPU "
                       "accounts for, net of their overlap and of the floors' own differences) = end to end (the "
                       "roundtrip's time less the floors'). Below 0: the floor took more; n/a: no floor measured. "
                       "Intervals in the files",
                 header=("server \\ client", *columns),
                 rows=tuple((server, *(text(server, client) for client in columns)) for server in rows),
                 right_aligned=(False, *(True,) * len(columns)))


def plain_table(run: RunResult, summaries: Summaries) -> Table | None:
    """Each plain program over its driver twin on each server, paired by round, with the page faults that differ."""
    twins = plain_twins(run, summaries)
    if not twins:
        return None
    usual = usual_label(twin.ratio for twin in twins)

    def faults(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    return Table(title="Plain programs (as written, measured from outside) over the driver of the same library, "
                       f"paired by round; interval: {usual or 'none (one round)'}; page faults per roundtrip of each "
                       f"client ({allocators_text(twins[0])})",
                 header=("server", "plain", "driver", "ratio", "interval", "faults plain", "faults driver"),
                 rows=tuple((twin.server, twin.plain, twin.driver, f"{twin.ratio.value:.2f}×",
                             "–" if twin.ratio.low is None else f"{twin.ratio.low:.2f}–{twin.ratio.high:.2f}",
                             faults(twin.plain_faults_per_roundtrip), faults(twin.driver_faults_per_roundtrip))
                            for twin in twins),
                 right_aligned=(False, False, False, True, True, True, True), key_columns=3)


def workers_table(run: RunResult) -> Table | None:
    """--workers N > 1: per cell, the broker's publishes and CPU, the deliveries through it, and one hop's cost
    (split pairs against local ones in the same window)."""
    figures = workers_figures(run)
    if not figures:
        return None
    usual = usual_label(workers_report.intervals(figures))
    return Table(title=f"Workers: {workers_report.EXPLANATION}; intervals: {usual or 'none (one attempt)'}",
                 header=("server", "client", *workers_report.COLUMNS),
                 rows=tuple((cell.server, cell.client, *workers_report.row_texts(cell, usual)) for cell in figures),
                 right_aligned=(False, False, *(True,) * len(workers_report.COLUMNS)), key_columns=2)


def settings_line(run: RunResult) -> str:
    config = run.configuration
    pairs = config.get("pairs", 1)
    return (f"{rounds_text(run)}; each attempt {config.get('duration_s', 0):g} s after "
            f"{config.get('warmup_s', 0):g} s warmup; payload {config.get('payload_size')} B {config.get('payload_kind')}; compression "
            f"{config.get('compression')}; loop {config.get('loop')}"
            + (f"; {pairs} pairs per cell{per_worker_text(config)}" if pairs != 1 else "")
            + ("; TLS" if config.get("tls") else "")
            + f"; {placement_text(config)}{young_generation_text(config)}"
            + f". Run {run.started_at}" + (" (interrupted)" if run.interrupted else "") + ".")


def machine_line(run: RunResult) -> str:
    env = run.environment
    return (f"Machine: {env.get('cpu_model')}, {env.get('cpu_count')} CPUs, Linux {env.get('kernel')}; "
            f"Python {(env.get('python') or {}).get('version')}, Node.js {env.get('node')}; suite "
            f"{str(env.get('suite_commit'))[:10]}{' (modified)' if env.get('suite_dirty') else ''}."
            + switches_text(env) + (f" {topology_line(run.topology)}" if run.topology else ""))


def wrap(text: str, width: int = WIDTH, indent: str = "") -> list[str]:
    return textwrap.wrap(text, width, break_on_hyphens=False, subsequent_indent=indent) or [""]


def column_widths(table: Table) -> list[int]:
    headers = [table.header, *([table.subheader] if table.subheader else [])]
    return [max(len(cell) for cell in column) for column in zip(*headers, *table.rows)]


def split_for_width(table: Table, width: int, gap: int = 2) -> list[Table]:
    """The table as it fits `width` columns: whole, or in parts that each repeat its key columns (the row names)
    and take as many of the other columns as fit, in order. A column wider than the width alone still gets a part."""
    widths = column_widths(table)
    key = list(range(min(table.key_columns, len(widths))))
    key_width = sum(widths[i] + gap for i in key)
    if sum(w + gap for w in widths) - gap <= width or len(widths) <= len(key) + 1:
        return [table]
    parts, current, used = [], [], key_width
    for index in range(len(key), len(widths)):
        if current and used + widths[index] > width:
            parts.append(current)
            current, used = [], key_width
        current.append(index)
        used += widths[index] + gap
    parts.append(current)

    def pick(cells: tuple[str, ...], columns: list[int]) -> tuple[str, ...]:
        return tuple(cells[i] for i in key + columns) if cells else ()

    return [Table(title=table.title + (f" (part {number} of {len(parts)})" if len(parts) > 1 else ""),
                  header=pick(table.header, columns), rows=tuple(pick(row, columns) for row in table.rows),
                  right_aligned=pick(table.right_aligned, columns), subheader=pick(table.subheader, columns),
                  key_columns=len(key))
            for number, columns in enumerate(parts, 1)]


def layout(table: Table) -> list[str]:
    """A table as padded text lines: a header (and its second line), a rule, the rows; columns two spaces apart."""
    headers = [table.header, *([table.subheader] if table.subheader else [])]
    widths = column_widths(table)

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(cell.rjust(width) if right else cell.ljust(width)
                         for cell, width, right in zip(cells, widths, table.right_aligned)).rstrip()

    return [*(line(header) for header in headers), "  ".join("-" * width for width in widths),
            *(line(row) for row in table.rows)]


def render_plain(report: TerminalReport) -> str:
    lines = list(report.heading)
    for whole in report.tables:
        for table in split_for_width(whole, report.width):
            lines += ["", *wrap(table.title, report.width), *layout(table)]
    lines += ["", *report.notes]
    return "\n".join(lines) + "\n"


def print_rich(report: TerminalReport, file=None) -> None:
    """The same report drawn by rich: boxed tables, colour on the marks and the failures (a terminal only)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    console = Console(file=file, width=None)
    if console.width > WIDTH:
        console = Console(file=file, width=WIDTH)
    for line in report.heading:
        console.print(Text(line, style="bold" if line is report.heading[0] else "dim"))
    # rich pads each column by a space on either side and puts the box's (blank) divider between them: three
    # characters a column, and the box's two edges
    tables = [part for whole in report.tables for part in split_for_width(whole, console.width - 2, gap=3)]
    for table in tables:
        console.print()
        drawn = RichTable(title=table.title, title_justify="left", box=box.SIMPLE_HEAD, header_style="bold",
                          pad_edge=False)
        subheader = table.subheader or ("",) * len(table.header)
        for name, under, right in zip(table.header, subheader, table.right_aligned):
            drawn.add_column(f"{name}\n{under}" if table.subheader else name, justify="right" if right else "left",
                             no_wrap=True)
        for row in table.rows:
            cells = []
            for cell in row:
                text = Text(cell)
                text.highlight_regex(r"!", "bold red")
                text.highlight_regex(r"~", "yellow")
                text.highlight_regex(r"(?<=[\dkM!~])z", "cyan")
                text.highlight_regex(r"\?|FAIL", "bold red")
                cells.append(text)
            drawn.add_row(*cells)
        console.print(drawn)
    console.print()
    for line in report.notes:
        console.print(Text(line), highlight=False)
