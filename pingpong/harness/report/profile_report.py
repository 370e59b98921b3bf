"""The profiles of `diagnose --profile` as people read them: Markdown (printed on the terminal and saved) and one
self-contained HTML page with a flame graph per side of the cell and of the healthy pair. Pure functions of the
comparison (commands/diagnose_profiles.compare_sides) and its merged profiles."""

from __future__ import annotations

import html
from typing import Any

from pingpong.harness.analysis.profiles import Profile
from pingpong.harness.report.flamegraph import flame_graph_html

SIDES = ("server", "client")
PAIRS = ("cell", "healthy")
TOP_SHOWN = 6


def _interval(bounds: list[float] | None) -> str:
    return "–" if not bounds else f"{bounds[0]:,.1f} to {bounds[1]:,.1f}"


def markdown_lines(comparison: dict[str, Any], heading: str = "## Profiles of both sides") -> list[str]:
    """'## Profiles of both sides': per side, the top functions of the cell and of the healthy pair by self and
    total µs per roundtrip, then the functions that differ most, with their interval."""
    pairs = comparison["pairs"]
    level = "#" * (heading.split(" ", 1)[0].count("#") + 1)
    lines = ["", heading, "",
             f"The cell ({pairs['cell']}) and a healthy pair ({pairs['healthy']}) in {comparison['rounds']} rounds of "
             f"their own, both sides sampled for each window (~{comparison['window_s'] or 0:g} s; the profilers slow "
             "the pair, so these attempts' rates are not the cell's). µs per roundtrip: sampled CPU time over the "
             "roundtrips completed while the profiler sampled; median over the rounds. Files: "
             "speedscope JSON and folded stacks beside this diagnosis, flame graphs in its HTML page."]
    for side in SIDES:
        figures = comparison["sides"].get(side) or {}
        lines += ["", f"{level} {side.capitalize()} side", ""]
        if "note" in figures or not figures:
            lines.append(f"Not profiled: {figures.get('note', 'no profile')}")
            continue
        for pair in PAIRS:
            found = figures[pair]
            measured = found.get("measured_cpu_us_per_roundtrip")
            seen = (f" (of {measured:,.1f} µs measured in the same windows: {found['sampled_share']:.0%} seen)"
                    if measured else "")
            lines.append(f"- {pair} ({pairs[pair]}, {found['profiler']}): "
                         f"{found['sampled_cpu_us_per_roundtrip']:,.1f} µs of sampled CPU per roundtrip{seen}; top by "
                         "self: " + ", ".join(
                             f"{row['function']} {row['self_us_per_roundtrip']:,.1f}"
                             for row in found["top_self"][:TOP_SHOWN]))
            lines.append("  top by total (below the frames nearly everything ran under): " + ", ".join(
                f"{row['function']} {row['total_us_per_roundtrip']:,.1f}" for row in found["top_total"][:TOP_SHOWN]))
        lines += ["", f"Largest differences, cell minus healthy pair, µs per roundtrip (paired by round; interval: "
                      f"{figures['interval'] or 'none, one round'}):", "",
                  "| function | self, cell | self, healthy | self difference [interval] "
                  "| total difference [interval] |",
                  "|---|---:|---:|---:|---:|"]
        for row in figures["differences"]:
            lines.append(f"| {row['function']} | {row['self_us_cell']:,.1f} | {row['self_us_healthy']:,.1f} | "
                         f"{row['self_difference_us']:+,.1f} [{_interval(row['self_interval'])}] | "
                         f"{row['total_difference_us']:+,.1f} [{_interval(row['total_interval'])}] |")
    return lines


def run_markdown_lines(profiles: dict[str, Any] | None) -> list[str]:
    """A run's profiled cells (run --profile): each one's comparison, or why it was not profiled; [] for none."""
    if not profiles:
        return []
    lines = ["", "## Profiles of the cells named by --profile"]
    for cell, comparison in profiles.items():
        if "note" in comparison:
            lines += ["", f"### {cell}", "", f"Not profiled: {comparison['note']}"]
            continue
        lines += markdown_lines(comparison, heading=f"### {cell}")
        lines += [""] + [f"- {sentence}" for sentence in comparison.get("verdict", [])]
        lines += ["", f"Flame graphs: {comparison['page']}."]
    return lines


def run_terminal_notes(profiles: dict[str, Any] | None) -> list[str]:
    """One line per profiled side: its top functions by self time, and the verdict's sentences."""
    notes = []
    for cell, comparison in (profiles or {}).items():
        if "note" in comparison:
            notes.append(f"Profile of {cell}: not profiled: {comparison['note']}")
            continue
        for side in SIDES:
            figures = comparison["sides"].get(side) or {}
            if "note" in figures or not figures:
                notes.append(f"Profile of {cell}, {side} side: not profiled: {figures.get('note', 'no profile')}")
                continue
            by_self = ", ".join(f"{row['function']} {row['self_us_per_roundtrip']:,.1f}"
                                for row in figures["cell"]["top_self"][:4])
            by_total = ", ".join(f"{row['function']} {row['total_us_per_roundtrip']:,.1f}"
                                 for row in figures["cell"]["top_total"][:4])
            notes.append(f"Profile of {cell}, {side} side, µs per roundtrip by self time: {by_self}; by total time "
                         f"(below the outer frames): {by_total}")
        notes += [f"  {sentence}" for sentence in comparison.get("verdict", [])]
        notes.append(f"  flame graphs: {comparison['page']}")
    return notes


def run_html_section(profiles: dict[str, Any] | None) -> list[str]:
    """The run page's list of profiled cells, each with its verdict and a link to its page of flame graphs."""
    if not profiles:
        return []
    items = []
    for cell, comparison in profiles.items():
        if "note" in comparison:
            items.append(f"<li>{html.escape(cell)}: not profiled: {html.escape(comparison['note'])}</li>")
            continue
        sentences = "".join(f"<li>{html.escape(sentence)}</li>" for sentence in comparison.get("verdict", []))
        items.append(f'<li><a href="{html.escape(comparison["page"], quote=True)}">{html.escape(cell)}</a> '
                     f"(flame graphs, top functions and differences)<ul>{sentences}</ul></li>")
    return ["<h2>Profiles of the cells named by --profile</h2>", "<ul>", *items, "</ul>"]


def html_page(title: str, markdown: str, comparison: dict[str, Any]) -> str:
    """The diagnosis's page: its Markdown as preformatted text, and a flame graph per side and pair (merged over
    the rounds). Self-contained: nothing is loaded from the network."""
    merged: dict[tuple[str, str], Profile] = comparison.get("_merged") or {}
    figures = []
    for side in SIDES:
        for pair in PAIRS:
            profile = merged.get((pair, side))
            if profile is not None:
                figures.append(flame_graph_html(profile, f"{side} side, {pair} pair ({comparison['pairs'][pair]})"))
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1250px}"
        "pre{white-space:pre-wrap;font-size:13px;background:#f6f6f6;padding:1em}"
        "figure{margin:1.5em 0}figcaption{font-weight:600;margin-bottom:.4em}"
        "svg text{pointer-events:none}svg g:hover rect{stroke:#000;stroke-width:.5}</style>",
        "</head><body>", f"<h1>{html.escape(title)}</h1>",
        "<h2>Flame graphs</h2>",
        "<p>Width: share of the side's sampled CPU; hover a frame for its µs per roundtrip (total and self).</p>",
        *(figures or ["<p>No profile to draw.</p>"]),
        "<h2>The diagnosis</h2>", f"<pre>{html.escape(markdown)}</pre>",
        "</body></html>", ""])
