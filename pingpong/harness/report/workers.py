"""The Workers section (--workers N > 1): per cell, what the Redis broker did and what one broker hop cost, measured
inside each attempt's window (analysis/workers.py). The texts of its columns, shared by the Markdown, the terminal
and a sweep's table; pure."""

from __future__ import annotations

from pingpong.harness.analysis.stats import Difference, Ratio
from pingpong.harness.analysis.workers import WorkersFigures
from pingpong.harness.report.formatting import format_difference, format_ratio, interval_legend, usual_label

COLUMNS = ("N", "placement", "publishes per roundtrip", "deliveries per publish", "broker CPU µs per publish",
           "crossed the broker", "pairs local / split", "attempts with both", "split ÷ local pair's rate",
           "split − local, µs per roundtrip", "split − local, p50 µs")
EXPLANATION = (
    "A worker subscribes to a room's channel only while it has members there, and PUBLISHes a message only when "
    "another worker has members in its room: a split pair makes 2 publishes per roundtrip, a local pair none. Per "
    "cell, medians over the attempts: the broker's own PUBLISH count per roundtrip and its CPU µs per publish over the "
    "window; the subscribers each PUBLISH reached (deliveries per publish: the workers with members in the room, 2 "
    "for a split pair); the share of deliveries that came through the broker (over the server's life); the pairs by "
    "placement, local (both members on one worker, relayed in-process) or split (on two, every delivery through "
    "Redis), as the placement put them: the kernel's (SO_REUSEPORT, the cluster's primary, a shared socket) or by "
    "room (each client process on one worker's own port, so every pair local); and, in the attempts "
    "that had both kinds, the hop's cost measured inside one window: a split pair's rate over a local pair's, and "
    "the µs per roundtrip (two hops) it took beyond a local pair's, and how far a split pair's median latency lay "
    "above a local pair's (each kind's median pair), the median of the per-attempt figures")


def _interval(figure: Ratio | None, pattern: str, usual: str | None, scale: float = 1.0, suffix: str = "") -> str:
    """'2.00 [1.99–2.01]': a median over the attempts with its bracket (its own coverage when not the usual one)."""
    if figure is None:
        return "—"
    text = pattern.format(figure.value * scale) + suffix
    if figure.low is None:
        return text
    own = f", {figure.coverage_text()}" if figure.label() != usual else ""
    return (f"{text} [{pattern.format(figure.low * scale)}–{pattern.format(figure.high * scale)}{suffix}"
            f"{own}]")


def intervals(figures: list[WorkersFigures]) -> list[Ratio | Difference]:
    return [figure for cell in figures for figure in (cell.publishes_per_roundtrip, cell.deliveries_per_publish,
                                                      cell.cpu_us_per_publish, cell.crossed_broker_share,
                                                      cell.hop_ratio, cell.hop_us, cell.hop_p50_us)
            if figure is not None]


def row_texts(cell: WorkersFigures, usual: str | None) -> tuple[str, ...]:
    """The COLUMNS' texts of one cell."""
    unplaced = f" (+{cell.unplaced_pairs} unknown)" if cell.unplaced_pairs else ""
    return (str(cell.workers), cell.room_placement or "kernel",
            _interval(cell.publishes_per_roundtrip, "{:.2f}", usual),
            _interval(cell.deliveries_per_publish, "{:.2f}", usual),
            _interval(cell.cpu_us_per_publish, "{:.1f}", usual),
            _interval(cell.crossed_broker_share, "{:.0f}", usual, 100, "%"),
            f"{cell.local_pairs} / {cell.split_pairs}{unplaced}", f"{cell.both_kinds} of {cell.attempts}",
            format_ratio(cell.hop_ratio, usual) if cell.hop_ratio else "—",
            format_difference(cell.hop_us, usual) if cell.hop_us else "—",
            format_difference(cell.hop_p50_us, usual) if cell.hop_p50_us else "—")


def markdown_section(figures: list[WorkersFigures], heading: str = "## Workers") -> list[str]:
    """'## Workers': a row per cell measured with more than one worker; [] when there is none."""
    if not figures:
        return []
    usual = usual_label(intervals(figures))
    lines = ["", heading, "", f"{EXPLANATION}; {interval_legend(intervals(figures))}.", "",
             "| server | client | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---:|" * len(COLUMNS)]
    for cell in figures:
        lines.append(f"| {cell.server} | {cell.client} | " + " | ".join(row_texts(cell, usual)) + " |")
    return lines
