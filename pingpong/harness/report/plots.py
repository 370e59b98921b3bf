"""PNG figures of a run, drawn headless with matplotlib: the matrix as a heat map and latency CDFs per cell.

figure_*() build figures from results and summaries (no I/O); write_figures() saves them next to the results.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: no display needed, same output everywhere

import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import LogFormatter, NullFormatter  # noqa: E402


class PlainLogFormatter(LogFormatter):
    """A log axis's labels as plain numbers (500, 1,000, 20,000): easier to read than powers of ten, and drawn
    without mathtext's layout (a third of a run's figure time)."""

    def _num_to_string(self, x, vmin, vmax):
        return f"{x:,.0f}" if x >= 1 else f"{x:.2g}"


def plain_log_labels(axis) -> None:
    """Plain-number labels on an Axis (axes.xaxis, axes.yaxis, a colorbar's) with a log scale."""
    axis.set_major_formatter(PlainLogFormatter())
    axis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False))  # matplotlib's own rule for minor labels

from pingpong.harness.analysis.summary import Summaries  # noqa: E402
from pingpong.harness.report.formatting import Headline, axes, rate_unit, unit_for_kind  # noqa: E402
from pingpong.harness.report.scales import MIN_SPAN, log_range  # noqa: E402
from pingpong.harness.results import histograms  # noqa: E402
from pingpong.harness.results.records import RunResult  # noqa: E402

DPI = 100
HEATMAP_SIZE_IN = (11.0, 7.0)
CDF_SIZE_IN = (12.0, 8.0)


def figure_heatmap(run: RunResult, summaries: Summaries):
    """The workload's headline per cell (formatting.Headline: the median rate; an open loop's p99 at the offered rate)
    on a log colour scale (scales.log_range: spanning at least MIN_SPAN), the value written in each cell, flags
    marked; bright is better (a high rate, a low latency)."""
    servers, clients = axes(run)
    headline = Headline(run)
    scale = 1e-6 if headline.latency else 1.0  # a latency is drawn in ms
    values = [[v * scale if (v := headline.value(summaries.get((s, c)))) is not None else None for c in clients]
              for s in servers]
    measured = [v for row in values for v in row if v]
    figure, axis = plt.subplots(figsize=HEATMAP_SIZE_IN, dpi=DPI)
    grid = [[v if v else math.nan for v in row] for row in values]
    norm = LogNorm(*log_range(measured))  # at least a MIN_SPAN ratio end to end: noise stays one colour
    image = axis.imshow(grid, cmap="viridis" if headline.higher_is_better else "viridis_r", norm=norm,
                        aspect="auto")
    axis.set_xticks(range(len(clients)), labels=clients, rotation=30, ha="right")
    axis.set_yticks(range(len(servers)), labels=servers)
    axis.set_xlabel("client")
    axis.set_ylabel("server")
    for row, server in enumerate(servers):
        for column, client in enumerate(clients):
            summary = summaries.get((server, client))
            value = values[row][column]
            if value:
                text = headline.long(value / scale) if headline.latency else f"{value:,.0f}"
                if summary.compression_negotiated:
                    text += " z"
                if summary.flags:
                    text += " !"
            else:
                text = "—" if summary is None or summary.status == "skipped" else "failed"
            shade = norm(value) if value and norm else 0.0
            bright = not value or (shade > 0.6 if headline.higher_is_better else shade < 0.4)  # white when empty
            axis.text(column, row, text, ha="center", va="center", fontsize=8, color="black" if bright else "white")
    unit = rate_unit(run)
    what = "p99 latency, ms" if headline.latency else f"{unit} (median"
    colorbar = figure.colorbar(image, ax=axis, label=f"{what}, log scale spanning at least {MIN_SPAN:g}×)"
                    if not headline.latency else f"{what} (log scale spanning at least {MIN_SPAN:g}×)")
    plain_log_labels(colorbar.ax.yaxis)
    config = run.configuration
    title = (f"p99 latency at {config.get('rate', 0):g} messages/s offered per pair" if headline.latency
             else f"{unit[0].upper()}{unit[1:]}")
    axis.set_title(f"{title}, server × client\n{config.get('payload_size')} B {config.get('payload_kind')}, "
                   f"compression {config.get('compression')}; z = deflate negotiated, ! = flagged")
    figure.tight_layout()
    return figure


def cdf_points(encoded_histograms: list[str]) -> tuple[list[float], list[float]]:
    """(latency µs, cumulative fraction) of the merged histograms, one point per recorded value."""
    merged = histograms.merge(encoded_histograms)
    total = merged.get_total_count()
    xs, ys, seen = [], [], 0
    for value, count in histograms.recorded_values(merged):  # not get_recorded_iterator: seconds per run
        seen += count
        xs.append(max(value, 1) / 1e3)
        ys.append(seen / total)
    return xs, ys


def figure_latency_cdfs(run: RunResult):
    """One panel per server: the roundtrip latency CDF of each client against it, log-scaled latency axis."""
    servers, clients = axes(run)
    panels = [s for s in servers if any(c.server == s and c.rates() for c in run.cells)] or servers[:1]
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure, grid = plt.subplots(rows, columns, figsize=CDF_SIZE_IN, dpi=DPI, squeeze=False, sharex=True)
    for index, server in enumerate(panels):
        axis = grid[index // columns][index % columns]
        for cell in run.cells:
            if cell.server != server:
                continue
            encoded = [a.latency_histogram for a in cell.attempts if a.ok and a.latency_histogram]
            if encoded:
                xs, ys = cdf_points(encoded)
                axis.step(xs, ys, where="post", label=cell.client, linewidth=1.2)
        axis.set_xscale("log")
        plain_log_labels(axis.xaxis)
        axis.set_title(f"server {server}", fontsize=10)
        axis.grid(True, which="both", alpha=0.3)
        axis.set_ylim(0, 1.01)
        if axis.lines:
            axis.legend(fontsize=7, loc="lower right")
    for index in range(len(panels), rows * columns):
        grid[index // columns][index % columns].axis("off")
    for axis in grid[-1]:
        axis.set_xlabel("roundtrip latency (µs, log scale)")
    for row in grid:
        row[0].set_ylabel("fraction of roundtrips")
    figure.suptitle("Roundtrip latency CDF per cell (all repeats merged)")
    figure.tight_layout()
    return figure


def write_figures(run: RunResult, summaries: Summaries, stem: Path) -> list[Path]:
    """Save the run's figures as <stem>-heatmap.png and <stem>-latency-cdf.png; returns the paths written."""
    written = []
    for suffix, build in (("heatmap", lambda: figure_heatmap(run, summaries)),
                          ("latency-cdf", lambda: figure_latency_cdfs(run))):
        if not any(s.measured for s in summaries.values()):
            break
        written.append(save_png(build(), stem.with_name(f"{stem.name}-{suffix}.png")))
    return written


def save_png(figure, path: Path) -> Path:
    """Write the figure to path through a temporary file (a reader never sees half a PNG), and close it."""
    temporary = path.with_name(f".{path.name}.tmp.png")
    figure.savefig(temporary, dpi=DPI)
    plt.close(figure)
    temporary.replace(path)
    return path


SWEEP_SIZE_IN = (14.0, 6.0)
NUMERIC_DIMENSIONS = ("payload_size", "pairs", "receivers", "idle_connections", "rate")
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D")


def figure_sweep(index: dict[str, Any]):
    """Left: median rate per cell against the swept value; right: p99 latency against it (log scales).

    With a numeric sweep (payload size, pairs) the x axis is that value on a log scale; a sweep over payload kinds
    alone puts the kinds side by side. Colour tells the cell; when a second dimension varies too (e.g. the payload
    kind), line style and marker tell its value. The legend sits beside the panels.
    """
    swept = index["swept"] or ["payload_size"]
    x_dimension = next((d for d in swept if d in NUMERIC_DIMENSIONS), swept[0])
    other = [d for d in swept if d != x_dimension]
    categorical = x_dimension not in NUMERIC_DIMENSIONS  # kinds, loops, compression modes, TLS
    categories = list(dict.fromkeys(point[x_dimension] for point in index["points"]))
    keys = list(dict.fromkeys(tuple(point[d] for d in other) for point in index["points"]))
    palette = plt.get_cmap("tab10" if len(index["cells"]) <= 10 else "tab20")
    figure, (rate_axis, latency_axis) = plt.subplots(1, 2, figsize=SWEEP_SIZE_IN, dpi=DPI)
    handles = []
    for number, (cell, entries) in enumerate(index["cells"].items()):
        color = palette(number % palette.N)
        handles.append(Line2D([], [], color=color, linewidth=2, label=cell))
        for key in keys:
            group = [e for e in entries if tuple(e[d] for d in other) == key and e["median"]]
            if not group:
                continue
            group.sort(key=lambda e: categories.index(e[x_dimension]) if categorical else e[x_dimension])
            xs = [categories.index(e[x_dimension]) if categorical else e[x_dimension] for e in group]
            style = dict(color=color, linestyle=LINE_STYLES[keys.index(key) % len(LINE_STYLES)],
                         marker=MARKERS[keys.index(key) % len(MARKERS)], linewidth=1.2, markersize=4)
            rate_axis.plot(xs, [e["median"] for e in group], **style)
            latencies = [(x, e["p99_ns"] / 1e3) for x, e in zip(xs, group) if e["p99_ns"]]
            if latencies:
                latency_axis.plot(*zip(*latencies), **style)
    if other:
        for number, key in enumerate(keys):
            label = ", ".join(f"{d.replace('_', ' ')} {value}" for d, value in zip(other, key))
            handles.append(Line2D([], [], color="gray", linestyle=LINE_STYLES[number % len(LINE_STYLES)],
                                  marker=MARKERS[number % len(MARKERS)], label=label))
    unit = unit_for_kind(index.get("workload_kind", index["workload"]))
    x_label = {"payload_size": "payload size (bytes)", "pairs": "pairs (each its own room)",
               "payload_kind": "payload kind", "loop": "event loop of the Python implementations",
               "compression": "--compression", "tls": "TLS", "malloc": "--malloc (Python programs)",
               "young_generation": "--young-generation (V8's, Node.js processes)",
               "workers": "--workers (the server's processes)", "placement": "--placement (where the sides run)",
               "room_placement": "--room-placement (which worker takes a room)",
               "python": "--python (the Python implementations' interpreter)", "receivers": "receivers of each message",
               "idle_connections": "idle connections held", "rate": "offered messages/s per pair"}[x_dimension]
    for axis, y_label in ((rate_axis, f"median {unit}"), (latency_axis, "p99 latency (µs)")):
        axis.set_yscale("log")
        plain_log_labels(axis.yaxis)
        axis.set_xlabel(x_label)
        axis.set_ylabel(y_label)
        axis.grid(True, which="both", alpha=0.3)
        if categorical:
            axis.set_xticks(range(len(categories)), labels=[("on" if c else "off") if isinstance(c, bool) else str(c)
                                                            for c in categories])
        else:
            if x_dimension != "idle_connections":  # it starts at 0
                axis.set_xscale("log")
            axis.set_xticks(categories, labels=[f"{c:g}" for c in categories])
            axis.xaxis.set_minor_formatter(NullFormatter())  # only the swept values are labelled
    figure.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    figure.suptitle(f"Sweep over {x_dimension.replace('_', ' ')}: rate and p99 latency per cell")
    figure.tight_layout(rect=(0, 0, 0.82, 1))
    return figure


def write_sweep_figure(index: dict[str, Any], stem: Path) -> list[Path]:
    """Save <stem>.png (the sweep curves), and for an open-loop sweep <stem>-latency-throughput.png, for an
    idle-connections sweep <stem>-memory.png; the paths written (none when nothing was measured)."""
    if not any(entry["median"] for entries in index["cells"].values() for entry in entries):
        return []
    builds = [(stem.with_suffix(".png"), lambda: figure_sweep(index))]
    if "rate" in index["swept"]:
        builds.append((stem.with_name(f"{stem.name}-latency-throughput.png"), lambda: figure_latency_throughput(index)))
    if "idle_connections" in index["swept"]:
        builds.append((stem.with_name(f"{stem.name}-memory.png"), lambda: figure_idle_memory(index)))
    return [save_png(build(), path) for path, build in builds]


def figure_latency_throughput(index: dict[str, Any]):
    """Per cell, latency from the intended send time (p50 dashed, p99 solid) against the achieved rate, one point per
    offered rate; hollow markers where the offered rate saturated the pair."""
    palette = plt.get_cmap("tab10" if len(index["cells"]) <= 10 else "tab20")
    figure, axis = plt.subplots(figsize=SWEEP_SIZE_IN, dpi=DPI)
    handles = []
    for number, (cell, entries) in enumerate(index["cells"].items()):
        points = sorted((entry["workload"]["open_loop"] for entry in entries
                         if (entry.get("workload") or {}).get("open_loop")), key=lambda f: f["offered_per_s"])
        points = [f for f in points if f.get("p99_ns") and f.get("achieved_per_s")]
        if not points:
            continue
        color = palette(number % palette.N)
        handles.append(Line2D([], [], color=color, linewidth=2, label=cell))
        xs = [f["achieved_per_s"] for f in points]
        axis.plot(xs, [f["p99_ns"] / 1e3 for f in points], color=color, linewidth=1.2)
        axis.plot(xs, [f["p50_ns"] / 1e3 for f in points], color=color, linewidth=1, linestyle="--")
        for f, x in zip(points, xs):
            axis.plot([x], [f["p99_ns"] / 1e3], marker="o", color=color, markersize=5,
                      markerfacecolor="white" if f["saturated"] else color)
    handles += [Line2D([], [], color="gray", linewidth=1.2, label="p99"),
                Line2D([], [], color="gray", linewidth=1, linestyle="--", label="p50"),
                Line2D([], [], color="gray", marker="o", markerfacecolor="white", linestyle="", label="saturated")]
    threshold = index.get("saturation_p99_ms")
    if threshold:
        axis.axhline(threshold * 1e3, color="gray", linewidth=0.8, linestyle=":")
    axis.set_xscale("log")
    axis.set_yscale("log")
    plain_log_labels(axis.xaxis)
    plain_log_labels(axis.yaxis)
    axis.set_xlabel("achieved roundtrips/s (all pairs of the cell)")
    axis.set_ylabel("latency from the intended send time (µs)")
    axis.grid(True, which="both", alpha=0.3)
    figure.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    figure.suptitle("Open loop: latency against throughput, one point per offered rate")
    figure.tight_layout(rect=(0, 0, 0.82, 1))
    return figure


def figure_idle_memory(index: dict[str, Any]):
    """Per cell, the server's PSS growth (MiB) against the idle connections held, every round's point."""
    palette = plt.get_cmap("tab10" if len(index["cells"]) <= 10 else "tab20")
    figure, axis = plt.subplots(figsize=SWEEP_SIZE_IN, dpi=DPI)
    handles = []
    for number, (cell, entries) in enumerate(index["cells"].items()):
        points = [(entry["idle_connections"], figures["pss_bytes"] / 2**20) for entry in entries
                  for figures in (entry.get("idle_memory_by_round") or {}).values()
                  if figures.get("pss_bytes") is not None]
        if not points:
            continue
        color = palette(number % palette.N)
        handles.append(Line2D([], [], color=color, marker="o", linewidth=1.2, label=cell))
        axis.plot(*zip(*points), linestyle="", marker="o", color=color, markersize=4, alpha=0.7)
        medians = {}
        for x, y in points:
            medians.setdefault(x, []).append(y)
        xs = sorted(medians)
        axis.plot(xs, [sorted(medians[x])[len(medians[x]) // 2] for x in xs], color=color, linewidth=1.2)
    axis.set_xlabel("idle connections held")
    axis.set_ylabel("server PSS growth (MiB)")
    axis.grid(True, alpha=0.3)
    figure.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    figure.suptitle("Idle connections: the server's memory against the connections it holds")
    figure.tight_layout(rect=(0, 0, 0.82, 1))
    return figure
