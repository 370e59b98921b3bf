"""Several runs of the same settings, combined (analysis/replication.py), as Markdown: pure."""

from __future__ import annotations

from collections import Counter

from pingpong.harness.analysis.replication import Replication, ReplicatedCell
from pingpong.harness.report.formatting import format_rate


def _axes(replication: Replication) -> tuple[list[str], list[str]]:
    servers = list(dict.fromkeys(cell.server for cell in replication.cells))
    clients = list(dict.fromkeys(cell.client for cell in replication.cells))
    return servers, clients


def _cell_text(cell: ReplicatedCell, usual: str | None, total_runs: int) -> str:
    text = format_rate(cell.median)
    if cell.interval is not None:
        own = f", {cell.interval_label()}" if cell.interval_label() != usual else ""
        text += f" [{format_rate(cell.interval.low)}–{format_rate(cell.interval.high)}{own}]"
    if cell.runs != total_runs:
        text += f" ({cell.runs} runs)"
    return text


def render_replication(replication: Replication, unit: str) -> str:
    """The matrix of medians of run medians with their intervals across runs, then every cell's run medians."""
    total = len(replication.sources)
    labels = Counter(cell.interval_label() for cell in replication.cells if cell.interval is not None)
    usual = labels.most_common(1)[0][0] if labels else None
    lines = [f"# {total} runs combined ({replication.scope})", ""]
    lines += [f"- run {number}: {source} (started {started})" for number, (source, started)
              in enumerate(zip(replication.sources, replication.started_at), 1)]
    lines += ["", f"Each cell: the median of its run medians in {unit} (one median per run, over that run's rounds); "
              f"the bracket is the interval {replication.scope}, the order-statistic interval of the run medians"
              + (f": {usual}" if usual else "") + ". It holds the variation from run to run, which an interval "
              "within one run leaves out; with few runs it is their range, and it covers the true median only as "
              "often as it says. A cell measured in fewer runs says how many, and its bracket names its own coverage.",
              ""]
    servers, clients = _axes(replication)
    by_key = {(c.server, c.client): c for c in replication.cells}
    lines += ["| server \\ client | " + " | ".join(clients) + " |", "|---|" + "---:|" * len(clients)]
    for server in servers:
        row = [_cell_text(by_key[(server, client)], usual, total) if (server, client) in by_key else "—"
               for client in clients]
        lines.append(f"| {server} | " + " | ".join(row) + " |")
    lines += ["", "## Run medians", "",
              "| server × client | " + " | ".join(f"run {n}" for n in range(1, total + 1))
              + " | median | interval " + replication.scope + " |",
              "|---|" + "---:|" * (total + 2)]
    for cell in replication.cells:
        values = " | ".join("—" if value is None else format_rate(value) for value in cell.run_medians)
        interval = ("—" if cell.interval is None else
                    f"{format_rate(cell.interval.low)}–{format_rate(cell.interval.high)} ({cell.interval_label()})")
        lines.append(f"| {cell.server} × {cell.client} | {values} | {format_rate(cell.median)} | {interval} |")
    return "\n".join(lines) + "\n"
