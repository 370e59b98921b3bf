"""The run as one self-contained HTML page: heat map, sortable matrix, each cell's details, flags, environment.

render_html() is a pure function of the results: one string with its CSS and script inline, nothing fetched from
the network (the time budget's bars are CSS boxes; their style is added only when a run has budgets, so older runs
render as they did). Every text taken from the results goes through html.escape. Without a script the page still shows
everything (a cell's details open as the link's target); the script sorts the table and opens details on click.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict
from typing import Any

from pingpong.harness.analysis.costs import CostSplit, websocket_costs
from pingpong.harness.analysis.plain_twins import allocators_text, plain_twins
from pingpong.harness.analysis.stats import Difference, Ratio
from pingpong.harness.analysis.summary import SIDES, CellSummary, Summaries
from pingpong.harness.analysis.time_budget import TimeBudget
from pingpong.harness.analysis.workers import workers_figures
from pingpong.harness.report.formatting import (COST_PARTS, CV_MEANING, HALF_WIDTH_MEANING, NEGATIVE_COST_TEXT,
                                                Headline, axes, axis_loops, cv_text, fastest_cell, faults_text,
                                                format_difference, format_duration_ns, format_optional, format_rate,
                                                format_ratio, format_ratio_to_reference, half_width_text,
                                                interval_legend, is_floor, percentiles, rate_unit, relative_to_fastest,
                                                rounds_text, short_extensions, time_budget_text, time_budgets,
                                                usual_label, workload_title)
from pingpong.harness.report.scales import MIN_SPAN, log_range, position, viridis_hex
from pingpong.harness.report.terminal import MARKS, machine_line, marks, settings_line
from pingpong.harness.report import profile_report
from pingpong.harness.report import workers as workers_report
from pingpong.harness.results.records import RunResult

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { padding: 3px 8px; border: 1px solid #ddd; text-align: right; white-space: nowrap; }
th:first-child, td.name, #cells th:nth-child(2) { text-align: left; }
table.heatmap td.rate { min-width: 3.6em; font-weight: 600; }
table.heatmap thead th { white-space: normal; } /* long names break at their hyphens: the matrix fits 1280 px */
table.heatmap td.rate a { color: inherit; text-decoration: none; display: block; }
table.heatmap td.empty { background: #f4f4f4; color: #999; }
#cells tbody tr { cursor: pointer; } #cells tbody tr:hover { background: #eef4ff; }
#cells tbody tr.selected { background: #dde8ff; }
#cells th { cursor: pointer; user-select: none; background: #f6f6f6; }
#cells th[aria-sort=ascending]::after { content: " ▲"; } #cells th[aria-sort=descending]::after { content: " ▼"; }
.details { display: none; border: 1px solid #99b; background: #fafaff; padding: 0.6em 1em; margin: 0.8em 0; }
.details:target, .details.open { display: block; }
.details table { display: inline-table; vertical-align: top; margin-right: 1.5em; }
.flag { color: #b00; } .mark { font-family: monospace; color: #b00; }
.note { color: #555; } dl { display: grid; grid-template-columns: max-content auto; gap: 2px 1em; }
dt { font-weight: 600; } dd { margin: 0; }
.legend span { display: inline-block; width: 2.2em; height: 1em; vertical-align: middle; }
.loop { font-weight: normal; color: #666; }
.scroll { overflow-x: auto; max-width: 100%; }
"""

# The time budget's stacked bars (time_budget_section): one box per part, its width the part's share of the bar
BUDGET_STYLE = """
.budget { display: flex; width: 22em; height: 1.1em; background: #f4f4f4; border: 1px solid #ccc; }
.budget span, .swatch { display: inline-block; height: 100%; }
.swatch { width: 1.2em; height: 0.9em; vertical-align: middle; margin: 0 0.3em 0 0.8em; }
.budget-user { background: #3b6fb6; } .budget-system { background: #e08a2c; } .budget-cpu { background: #6f8fbf; }
.budget-run-delay { background: #c0392b; } .budget-blocked { background: #b8c4b8; }
#budgets th { text-align: left; } #budgets td.bar { padding: 2px 6px; }
#budgets td.figures { text-align: left; color: #444; white-space: normal; min-width: 28em; }
"""
# (TimeBudget field, CSS class, legend): the bar's parts in order; CPU stands for user + system when there is no split
BUDGET_PARTS = (("user_us", "budget-user", "user CPU"), ("system_us", "budget-system", "system CPU"),
                ("cpu_us", "budget-cpu", "CPU (no user/system split)"),
                ("run_delay_us", "budget-run-delay", "run delay: runnable, waiting for a CPU"),
                ("blocked_us", "budget-blocked", "blocked: waiting on the other side, the network path, a wake-up"))

SCRIPT = """
(function () {
  var table = document.getElementById('cells');
  var body = table.tBodies[0];
  function sortBy(index, descending) {
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[index].getAttribute('data-value'), y = b.cells[index].getAttribute('data-value');
      var nx = parseFloat(x), ny = parseFloat(y), order;
      if (x === '' || y === '') { order = (x === '') - (y === ''); return order; }
      order = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      if (i === index) th.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
      else th.removeAttribute('aria-sort');
    });
    table.setAttribute('data-sorted-by', table.tHead.rows[0].cells[index].textContent);
  }
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
    th.title = 'sort by this column';
    th.addEventListener('click', function () { sortBy(i, th.getAttribute('aria-sort') !== 'descending'); });
  });
  function open(id) {
    Array.prototype.forEach.call(document.querySelectorAll('.details.open'), function (d) {
      d.classList.remove('open');
    });
    Array.prototype.forEach.call(body.rows, function (row) {
      row.classList.toggle('selected', row.getAttribute('data-details') === id);
    });
    var details = document.getElementById(id);
    if (details) { details.classList.add('open'); }
    return details;
  }
  Array.prototype.forEach.call(body.rows, function (row) {
    row.addEventListener('click', function () {
      var details = open(row.getAttribute('data-details'));
      if (details) { history.replaceState(null, '', '#' + details.id); details.scrollIntoView({block: 'nearest'}); }
    });
  });
  window.addEventListener('hashchange', function () { open(location.hash.slice(1)); });
  sortBy(RATE_COLUMN, true);
  if (location.hash) { open(location.hash.slice(1)); }
  document.body.setAttribute('data-script', 'ran');
})();
"""

COLUMNS = ("server", "client", "median/s", "ratio", "CV", "p50", "p99", "server CPU µs/rt", "client CPU µs/rt",
           "bottleneck", "marks")
RATE_COLUMN = COLUMNS.index("median/s")


def anchor(prefix: str, server: str, client: str) -> str:
    """An id safe in HTML and in a URL fragment: 'cell-node-ws--bun'."""
    safe = [re.sub(r"[^A-Za-z0-9_.-]+", "_", name) for name in (server, client)]
    return f"{prefix}-{safe[0]}--{safe[1]}"


def e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def render_html(run: RunResult, summaries: Summaries) -> str:
    unit = rate_unit(run)
    ratios = relative_to_fastest(run, summaries)
    costs = websocket_costs(run)
    fastest = fastest_cell(run, summaries)
    title = f"{workload_title(run.configuration)}, {run.started_at}"
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">', f"<title>{e(title)}</title>",
        f"<style>{STYLE}{BUDGET_STYLE if time_budgets(summaries) else ''}</style>", "</head>", "<body>",
        f"<h1>{e(title)}: median {e(unit)}, server × client</h1>",
        f"<p>{e(settings_line(run))}<br>{e(machine_line(run))}</p>",
        *heatmap(run, summaries),
        *cell_table(run, summaries),
        *cost_matrix(run, costs),
        *plain_beside_drivers(run, summaries),
        *workers_section(run),
        *time_budget_section(summaries),
        *profile_report.run_html_section(run.profiles),
        *flagged(summaries),
        *not_measured(summaries),
        "<h2>Cell details</h2>",
        '<p class="note">Click a row of the table (or a heat-map cell) to open its details here.</p>',
        *(cell_details(run, key, summary, ratios.get(key), costs.get(key), key == fastest)
          for key, summary in summaries.items() if summary.status != "skipped"),
        *environment(run),
        f"<script>{SCRIPT.replace('RATE_COLUMN', str(RATE_COLUMN))}</script>",
        "</body>", "</html>",
    ]
    return "\n".join(parts) + "\n"


def heatmap(run: RunResult, summaries: Summaries) -> list[str]:
    """The matrix coloured by the workload's headline (the rate; an open loop's p99, bright where it is low)."""
    servers, clients = axes(run)
    server_loops, client_loops = axis_loops(summaries)
    headline = Headline(run)
    values = [v for s in summaries.values() if (v := headline.value(s)) is not None]
    low, high = log_range(values)

    def shade(value: float) -> float:  # 1 = the best end of the scale (bright)
        fraction = position(value, low, high)
        return fraction if headline.higher_is_better else 1 - fraction

    lines = ["<h2>Heat map</h2>",
             f'<p class="note">{e(headline.label[0].upper() + headline.label[1:])} per cell; colour on a log scale '
             f"spanning at least {MIN_SPAN:g}× ({e(headline.long(low))} to {e(headline.long(high))}"
             + ("; bright is low" if headline.latency else "") + "), so that noise stays one colour. "
             "Each server and client is named with the event loop it reported running on. "
             + "; ".join(f'<span class="mark">{e(m)}</span> {e(meaning)}' for m, meaning in MARKS.items())
             + "; — not measured.</p>",
             '<p class="legend">' + "".join(f'<span style="background:{viridis_hex(i / 8)}"></span>'
                                            for i in range(9))
             + (f" {e(headline.long(low))} … {e(headline.long(high))}</p>" if headline.higher_is_better
                else f" {e(headline.long(high))} … {e(headline.long(low))}</p>"),
             '<div class="scroll"><table class="heatmap" id="heatmap">',
             "<thead><tr><th>server \\ client</th>" + "".join(
                 f"<th>{e(c)}" + (f'<br><span class="loop">{e(client_loops[c])}</span>' if c in client_loops else "")
                 + "</th>" for c in clients) + "</tr></thead>",
             "<tbody>"]
    for server in servers:
        cells = []
        for client in clients:
            summary = summaries.get((server, client))
            if summary is None or summary.status == "skipped":
                reason = summary.reason if summary is not None else "not in this run"
                cells.append(f'<td class="empty" title="{e(reason)}">—</td>')
            elif not summary.measured:
                cells.append(f'<td class="empty flag"><a href="#{anchor("cell", server, client)}">FAIL</a></td>')
            elif (value := headline.value(summary)) is None:
                cells.append(f'<td class="empty"><a href="#{anchor("cell", server, client)}">?</a></td>')
            else:
                fraction = shade(value)
                colour = "#000" if fraction > 0.6 else "#fff"
                cells.append(f'<td class="rate" style="background:{viridis_hex(fraction)};color:{colour}" '
                             f'title="{e(server)} × {e(client)}: {e(headline.long(value))}">'
                             f'<a href="#{anchor("cell", server, client)}">'
                             f"{e(headline.short(value) + marks(summary))}</a></td>")
        loop = f' <span class="loop">({e(server_loops[server])})</span>' if server in server_loops else ""
        lines.append(f'<tr><th class="name">{e(server)}{loop}</th>{"".join(cells)}</tr>')
    return lines + ["</tbody></table></div>"]


def cell_table(run: RunResult, summaries: Summaries) -> list[str]:
    fastest = fastest_cell(run, summaries)
    ratios = relative_to_fastest(run, summaries)
    lines = ["<h2>Every measured cell</h2>",
             '<p class="note">Click a column heading to sort, a row to see the cell\'s details. Ratio: the cell\'s '
             "rate over the fastest WebSocket pair's"
             + (f" ({e(fastest[0])} × {e(fastest[1])})" if fastest else "") + ", the median of the per-round "
             f"ratios (each round measures every cell once); its interval is in the details "
             f"({e(interval_legend(ratios.values()))}). {e(CV_MEANING)}; in the details, "
             f"{e(HALF_WIDTH_MEANING)}. Raw-TCP floors (no WebSocket) are marked as such.</p>",
             '<div class="scroll"><table id="cells">',
             "<thead><tr>" + "".join(f"<th>{e(c)}</th>" for c in COLUMNS) + "</tr></thead>",
             "<tbody>"]
    for (server, client), summary in summaries.items():
        if not summary.measured:
            continue
        rates = summary.roundtrips_per_s
        ratio = ratios.get((server, client))
        p50, _, p99, _, _ = percentiles(summary.latency)
        values = [
            (server + (" (floor)" if is_floor(run, server) else ""), server),
            (client, client),
            (format_rate(rates.median), rates.median),
            (f"{ratio.value:.2f}×" if ratio else "–", ratio.value if ratio else ""),
            ("–" if rates.cv is None else f"{rates.cv * 100:.1f}%", "" if rates.cv is None else rates.cv),
            (format_duration_ns(p50), p50 if p50 is not None else ""),
            (format_duration_ns(p99), p99 if p99 is not None else ""),
            *((format_optional(side.us_per_roundtrip, "{:.1f}"), side.us_per_roundtrip if side.us_per_roundtrip else "")
              for side in (summary.server_cpu, summary.client_cpu)),
            (summary.bottleneck or "–", summary.bottleneck or ""),
            (marks(summary), marks(summary)),
        ]
        cells = "".join(f'<td{" class=name" if index < 2 else ""} data-value="{e(value)}">{e(text)}</td>'
                        for index, (text, value) in enumerate(values))
        lines.append(f'<tr data-details="{anchor("cell", server, client)}">{cells}</tr>')
    return lines + ["</tbody></table></div>"]


def interval_text(figure: Ratio | Difference | None) -> str:
    """A ratio or a difference with its bracket and the bracket's full label: '+30 µs [+27, +33], range of 3 ...'."""
    if figure is None:
        return "–"
    shown = format_difference(figure, figure.label()) if isinstance(figure, Difference) else format_ratio(
        figure, figure.label())
    return shown + (f", {figure.label()}" if figure.low is not None else "")


def cost_matrix(run: RunResult, costs: dict[tuple[str, str], CostSplit]) -> list[str]:
    """Each WebSocket cell's cost against the floors in µs per roundtrip, its parts in the order they add up."""
    servers, clients = axes(run)
    rows = [server for server in servers if any((server, client) in costs for client in clients)]
    columns = [client for client in clients if any((server, client) in costs for server in servers)]
    if not rows:
        return []
    lines = ["<h2>WebSocket cost</h2>",
             '<p class="note">µs per roundtrip beyond the raw-TCP floors (the same relay and ping-pong without '
             "WebSocket) of the cell's own runtimes, in the order they add up: server part + client part + other = "
             "end to end. " + " ".join(f"{e(name[0].upper() + name[1:])}: {e(meaning)}." for _, name, meaning
                                       in COST_PARTS)
             + " Server part, client part and end to end are each the median of the per-round differences (every "
             "round measures every cell once), the bracket an order-statistic interval with the coverage it has; "
             "other's bracket is the end-to-end bracket less both parts', and covers at least 1 − their three "
             f"misses. {e(NEGATIVE_COST_TEXT)} – where the floor cell was not measured.</p>",
             '<div class="scroll"><table id="costs">',
             "<thead><tr><th>server \\ client</th>" + "".join(f"<th>{e(c)}</th>" for c in columns) + "</tr></thead>",
             "<tbody>"]
    for server in rows:
        cells = []
        for client in columns:
            split = costs.get((server, client))
            if split is None:
                cells.append('<td class="empty">—</td>')
                continue
            cells.append("<td>" + "<br>".join(f"{e(name)} {e(short_difference(getattr(split, part)))}"
                                              for part, name, _ in COST_PARTS) + "</td>")
        lines.append(f'<tr><th class="name">{e(server)}</th>{"".join(cells)}</tr>')
    return lines + ["</tbody></table></div>"]


def short_difference(figure: Difference | None) -> str:
    """'+30 µs [+27, +33, 96.9%]': a cost in the matrix, its coverage always named ('–' without its floor)."""
    return "–" if figure is None else format_difference(figure)


def plain_beside_drivers(run: RunResult, summaries: Summaries) -> list[str]:
    """Each plain program (as written, measured from outside) over its driver twin on each server, and why."""
    twins = plain_twins(run, summaries)
    if not twins:
        return []
    lines = ["<h2>Plain programs beside the drivers</h2>",
             '<p class="note">A program as people write it, measured from outside, over the suite\'s driver client of '
             "the same library on the same server: the median of the per-round ratios with its interval; "
             f"{e(allocators_text(twins[0]))}."
             "</p>", '<div class="scroll"><table id="plain">',
             "<thead><tr><th>server</th><th>plain / driver</th><th>plain ÷ driver</th><th>page faults per roundtrip"
             "</th><th>client µs per roundtrip</th><th>what differs</th></tr></thead>", "<tbody>"]
    for twin in twins:
        faults = "/".join("–" if v is None else f"{v:.2f}" for v in (twin.plain_faults_per_roundtrip,
                                                                      twin.driver_faults_per_roundtrip))
        cpu_us = "/".join("–" if v is None else f"{v:.0f}" for v in (twin.plain_cpu_us_per_roundtrip,
                                                                      twin.driver_cpu_us_per_roundtrip))
        lines.append(f'<tr><th class="name">{e(twin.server)}</th><td>{e(twin.plain)} / {e(twin.driver)}</td>'
                     f"<td>{e(interval_text(twin.ratio))}</td><td>{e(faults)}</td><td>{e(cpu_us)}</td>"
                     f"<td>{e(twin.cause)}</td></tr>")
    return lines + ["</tbody></table></div>"]


def workers_section(run: RunResult) -> list[str]:
    """--workers N > 1: per cell, the broker's publishes and CPU, the deliveries through it, and one hop's cost, in
    report/workers.py's columns and texts (the Markdown's and the terminal's); nothing when no cell ran more than one
    worker."""
    figures = workers_figures(run)
    if not figures:
        return []
    usual = usual_label(workers_report.intervals(figures))
    legend = interval_legend(workers_report.intervals(figures))
    lines = ["<h2>Workers</h2>", f'<p class="note">{e(workers_report.EXPLANATION)}; {e(legend)}.</p>',
             '<div class="scroll"><table id="workers">',
             "<thead><tr>" + "".join(f"<th>{e(c)}</th>" for c in ("server", "client", *workers_report.COLUMNS))
             + "</tr></thead>", "<tbody>"]
    for cell in figures:
        lines.append(f'<tr><th class="name"><a href="#{anchor("cell", cell.server, cell.client)}">{e(cell.server)}'
                     f'</a></th><td class="name">{e(cell.client)}</td>'
                     + "".join(f"<td>{e(text)}</td>" for text in workers_report.row_texts(cell, usual)) + "</tr>")
    return lines + ["</tbody></table></div>"]


def budget_bar(budget: TimeBudget, scale_us: float) -> str:
    """One side's stacked bar: user, system (or CPU unsplit), run delay and blocked, each as wide as its share of
    scale_us (the longest of the cell's bars, so both sides share one scale)."""
    cpu_shown = ("user_us", "system_us") if budget.user_us is not None else ("cpu_us",)
    parts = []
    for part, css_class, legend in BUDGET_PARTS:
        if part in ("user_us", "system_us", "cpu_us") and part not in cpu_shown:
            continue
        value = getattr(budget, part)
        if value > 0:
            parts.append(f'<span class="{css_class}" style="width:{100 * value / scale_us:.2f}%" '
                         f'title="{e(legend)}: {value:.1f} µs"></span>')
    return f'<div class="budget">{"".join(parts)}</div>'


def time_budget_section(summaries: Summaries) -> list[str]:
    """Where a roundtrip's time goes: per cell and side, a stacked bar of CPU (user, system), run delay and blocked
    time, with its figures; nothing for runs saved before the scheduling readings."""
    budgets = time_budgets(summaries)
    if not budgets:
        return []
    lines = ["<h2>Where a roundtrip's time goes</h2>",
             '<p class="note">Each side\'s share of a roundtrip (1e6 / the cell\'s median rate), µs: its CPU time, '
             "split into user and system time by the share of its 10 ms clock ticks over all the cell's rounds (a "
             "coarse split of a precise CPU time); its run delay, runnable but waiting for a CPU; and the rest, "
             "blocked. Context switches per roundtrip: voluntary (it blocked), involuntary (preempted). Medians over "
             "the rounds. The bars of a cell share one scale: its roundtrip, or its CPU and run delay where they add "
             "up to more (a side running several threads at once).</p>",
             '<p class="legend">' + "".join(f'<span class="swatch {css_class}"></span>{e(legend)}'
                                            for _, css_class, legend in BUDGET_PARTS) + "</p>",
             '<div class="scroll"><table id="budgets">',
             "<thead><tr><th>server × client</th><th>side</th><th>roundtrip</th><th>µs per roundtrip</th></tr>"
             "</thead>", "<tbody>"]
    by_cell: dict[tuple[str, str], list[tuple[str, TimeBudget]]] = {}
    for key, side, budget in budgets:
        by_cell.setdefault(key, []).append((side, budget))
    for (server, client), sides in by_cell.items():
        scale_us = max(max(budget.roundtrip_us, budget.cpu_us + budget.run_delay_us) for _, budget in sides)
        for index, (side, budget) in enumerate(sides):
            name = (f'<th class="name" rowspan="{len(sides)}"><a href="#{anchor("cell", server, client)}">'
                    f"{e(server)} × {e(client)}</a></th>" if index == 0 else "")
            lines.append(f'<tr>{name}<td class="name">{e(side)}</td><td class="bar">{budget_bar(budget, scale_us)}'
                         f'</td><td class="figures">{e(time_budget_text(budget))}</td></tr>')
    return lines + ["</tbody></table></div>"]


def flagged(summaries: Summaries) -> list[str]:
    cells = [(key, summary.flags) for key, summary in summaries.items() if summary.flags]
    if not cells:
        return ["<h2>Flagged cells</h2>", "<p>No cell is flagged: every measured cell is within 3× of what its "
                "server and client predict, and no signal rule fired.</p>"]
    lines = ["<h2>Flagged cells</h2>",
             '<p class="note">A cell is flagged when it runs under 1/3 of the rate its row and column predict, or '
             "when one of its signals is out of line. <code>python run_bench.py diagnose SERVER CLIENT</code> "
             "measures one in depth.</p>", '<ul id="flags">']
    for (server, client), flags in cells:
        lines.append(f'<li id="{anchor("flagged", server, client)}"><a href="#{anchor("cell", server, client)}">'
                     f"<strong>{e(server)} × {e(client)}</strong></a>: "
                     + "; ".join(f'<span class="flag">{e(flag)}</span>' for flag in flags) + "</li>")
    return lines + ["</ul>"]


def not_measured(summaries: Summaries) -> list[str]:
    problems = [(key, s) for key, s in summaries.items() if s.status in ("skipped", "failed", "partial")]
    if not problems:
        return []
    lines = ["<h2>Not measured or failed</h2>", "<ul>"]
    for (server, client), summary in problems:
        for text in ([f"not measured: {summary.reason}"] if summary.status == "skipped" else summary.failures):
            lines.append(f"<li>{e(server)} × {e(client)}: {e(text)}</li>")
    return lines + ["</ul>"]


def cell_details(run: RunResult, key: tuple[str, str], summary: CellSummary, ratio: Ratio | None = None,
                 cost: CostSplit | None = None, reference: bool = False) -> str:
    """A cell's details; reference: it is the fastest pair, the one the others' ratios are to."""
    server, client = key
    lines = [f'<section class="details" id="{anchor("cell", server, client)}">',
             f"<h3>{e(server)} server × {e(client)} client: {e(summary.status)}</h3>"]
    if summary.flags:
        lines.append(f'<p>Flagged (<a href="#{anchor("flagged", server, client)}">in the list</a>): '
                     + "; ".join(f'<span class="flag">{e(flag)}</span>' for flag in summary.flags) + "</p>")
    if summary.failures:
        lines.append("<p>Failed attempts: " + "; ".join(e(failure) for failure in summary.failures) + "</p>")
    if summary.measured:
        rates = summary.roundtrips_per_s
        interval = (f"{format_rate(rates.interval_low)}–{format_rate(rates.interval_high)}, "
                    f"{half_width_text(rates.precision)}" if rates.interval_low is not None
                    and rates.precision is not None else "–")
        lines.append(pairs_table("Rate", [
            (f"median {rate_unit(run)}", format_rate(rates.median)),
            ("min–max", f"{format_rate(rates.minimum)}–{format_rate(rates.maximum)}"), ("n", rates.n),
            ("CV", cv_text(rates.cv).removeprefix("CV ")),
            (f"median's interval: {rates.interval_label()}", interval),
            ("relative to the fastest pair", format_ratio_to_reference(ratio, reference=True) if reference
             and ratio is not None else interval_text(ratio)),
            ("expected by the matrix", format_optional(summary.expected_roundtrips_per_s, "{:,.0f}"))]))
        lines.append(pairs_table("Latency", list(zip(("p50", "p90", "p99", "p99.9", "max"),
                                                     map(format_duration_ns, percentiles(summary.latency))))))
        lines.append(pairs_table("CPU per side", [
            ("server µs/roundtrip", format_optional(summary.server_cpu.us_per_roundtrip, "{:.1f}")),
            ("client µs/roundtrip", format_optional(summary.client_cpu.us_per_roundtrip, "{:.1f}")),
            ("server utilization", format_optional(summary.server_cpu.utilization, "{:.2f}")),
            ("client utilization", format_optional(summary.client_cpu.utilization, "{:.2f}")),
            ("page faults/roundtrip server/client", faults_text(summary)),
            ("bottleneck", summary.bottleneck or "–"),
            ("server peak RSS", format_optional(summary.server_peak_rss_bytes and summary.server_peak_rss_bytes / 2**20,
                                        "{:.0f} MiB"))]))
        budgets = [(side, budget) for side in SIDES if (budget := summary.time_budget(side)) is not None]
        if budgets:
            lines.append(pairs_table("Where a roundtrip's time goes", [(side, time_budget_text(budget))
                                                                      for side, budget in budgets]))
        if cost is not None:
            floors = {"server": cost.server_floor, "client": cost.client_floor, "end_to_end": cost.end_to_end_floor}
            lines.append(pairs_table("WebSocket cost, µs per roundtrip beyond the floors (server part + client part "
                                     "+ other = end to end)", [
                (f"{name} (against {' × '.join(floors[part])})" if floors.get(part) else name,
                 interval_text(getattr(cost, part))) for part, name, _ in COST_PARTS]))
        nodelay = {True: "on", False: "OFF", None: "?"}
        lines.append(pairs_table("Signals", [
            ("TCP segments/message", format_optional(summary.segments_per_message, "{:.2f}")),
            ("delayed ACKs/roundtrip", format_optional(summary.delayed_acks_per_roundtrip, "{:.3f}")),
            ("retransmits/roundtrip", format_optional(summary.retransmits_per_roundtrip, "{:.3f}")),
            ("TCP_NODELAY server/client",
             f"{nodelay[summary.server_tcp_nodelay]}/{nodelay[summary.client_tcp_nodelay]}"),
            ("address family", summary.address_family or "?")]))
        lines.append(pairs_table("Settings as run", [
            ("loops server/client", f"{summary.server_loop or '?'}/{summary.client_loop or '?'}"),
            ("compression", short_extensions(summary.compression_negotiated)),
            ("payload", f"{run.configuration.get('payload_size')} B {run.configuration.get('payload_kind')}"),
            ("rounds", rounds_text(run)),
            ("window", f"{run.configuration.get('duration_s')} s after {run.configuration.get('warmup_s')} s warmup")]))
    return "\n".join(lines + ["</section>"])


def pairs_table(caption: str, rows: list[tuple[str, Any]]) -> str:
    body = "".join(f'<tr><td class="name">{e(name)}</td><td>{e(value)}</td></tr>' for name, value in rows)
    return f"<table><caption>{e(caption)}</caption>{body}</table>"


def environment(run: RunResult) -> list[str]:
    """The record as it is: the environment (and a --cluster run's topology, named cluster), the command line, the
    configuration, and how the rounds ended."""
    lines = ["<h2>Environment and configuration</h2>", "<dl>"]
    for name, value in [*run.environment.items(), *([("cluster", run.topology)] if run.topology else []),
                        ("command line", " ".join(run.command_line)), ("configuration", run.configuration),
                        *([("rounds outcome", asdict(run.rounds_outcome))] if run.rounds_outcome else [])]:
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        lines.append(f"<dt>{e(name)}</dt><dd>{e(text)}</dd>")
    return lines + ["</dl>"]
