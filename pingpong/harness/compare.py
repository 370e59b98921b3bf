"""`python run_bench.py compare A.json B.json`: per-cell ratio B/A with its uncertainty; pure except run()."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pingpong.harness.render import axes, format_rate, format_ratio
from pingpong.harness.results import RunResult, load
from pingpong.harness.stats import Ratio, ratio_of_medians
from pingpong.harness.usage import UsageError

# Settings compared between the two runs: a difference is shown, since it may explain the ratios.
SETTING_KEYS = ("workload", "duration_s", "warmup_s", "repeat", "loop", "compression", "payload_size",
                "payload_kind", "pairs", "client_processes", "tls", "pinned", "python_packages", "node_packages")


@dataclass(frozen=True)
class CellComparison:
    server: str
    client: str
    a_median: float
    b_median: float
    a_n: int
    b_n: int
    ratio: Ratio  # median(B) / median(A), bootstrap 95% interval when both have >= 2 repeats
    verdict: str  # faster, slower, same (the interval includes 1), or unknown (too few repeats for an interval)


@dataclass(frozen=True)
class Comparison:
    cells: list[CellComparison]
    only_in_a: list[tuple[str, str]]
    only_in_b: list[tuple[str, str]]
    not_comparable: list[tuple[str, str, str]]  # in both runs but not measured in one: (server, client, why)
    setting_differences: dict[str, tuple[Any, Any]]


def measured(run: RunResult) -> dict[tuple[str, str], list[float]]:
    return {(cell.server, cell.client): cell.rates() for cell in run.cells}


def compare_runs(a: RunResult, b: RunResult) -> Comparison:
    a_cells, b_cells = measured(a), measured(b)
    cells, not_comparable = [], []
    for key in [key for key in a_cells if key in b_cells]:
        a_rates, b_rates = a_cells[key], b_cells[key]
        if not a_rates or not b_rates:
            side = "A" if not a_rates else "B"
            not_comparable.append((*key, f"no successful repeat in run {side}"))
            continue
        ratio = ratio_of_medians(b_rates, a_rates)
        if ratio.low is None:
            verdict = "unknown"
        elif ratio.excludes_one():
            verdict = "faster" if ratio.value > 1 else "slower"
        else:
            verdict = "same"
        cells.append(CellComparison(key[0], key[1], median(a_rates), median(b_rates), len(a_rates), len(b_rates),
                                    ratio, verdict))
    differences = {key: (a.configuration.get(key), b.configuration.get(key)) for key in SETTING_KEYS
                   if a.configuration.get(key) != b.configuration.get(key)}
    return Comparison(cells=cells, only_in_a=[key for key in a_cells if key not in b_cells],
                      only_in_b=[key for key in b_cells if key not in a_cells], not_comparable=not_comparable,
                      setting_differences=differences)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


MARKS = {"faster": " ▲", "slower": " ▼", "same": "", "unknown": " ?"}


def render_comparison(comparison: Comparison, a: RunResult, b: RunResult, a_name: str, b_name: str) -> str:
    """The comparison as Markdown: a matrix of B/A ratios with marks, then the lists; pure."""
    servers_a, clients_a = axes(a)
    servers_b, clients_b = axes(b)
    servers = servers_a + [s for s in servers_b if s not in servers_a]
    clients = clients_a + [c for c in clients_b if c not in clients_a]
    by_key = {(c.server, c.client): c for c in comparison.cells}
    lines = [f"# Comparison: B = {b_name} over A = {a_name}", "",
             f"A started {a.started_at}, B started {b.started_at}. Each cell: median roundtrips/s of B over A's, "
             "with a bootstrap 95% interval from the repeats. ▲ B faster and ▼ B slower beyond the noise (the "
             "interval excludes 1); ? too few repeats for an interval; — not in both runs.", ""]
    if comparison.setting_differences:
        lines.append("Settings that differ: " + "; ".join(
            f"{key} {old!r} → {new!r}" for key, (old, new) in comparison.setting_differences.items()) + ".")
        lines.append("")
    lines += ["| server \\ client | " + " | ".join(clients) + " |", "|---|" + "---:|" * len(clients)]
    for server in servers:
        row = []
        for client in clients:
            cell = by_key.get((server, client))
            row.append(format_ratio(cell.ratio) + MARKS[cell.verdict] if cell else "—")
        lines.append(f"| {server} | " + " | ".join(row) + " |")
    changed = [c for c in comparison.cells if c.verdict in ("faster", "slower")]
    lines += ["", f"{len(changed)} of {len(comparison.cells)} compared cells differ beyond the noise."]
    for cell in sorted(changed, key=lambda c: c.ratio.value):
        lines.append(f"- {cell.server} × {cell.client}: {format_rate(cell.a_median)} → {format_rate(cell.b_median)} "
                     f"roundtrips/s, {format_ratio(cell.ratio)} ({cell.verdict})")
    for title, keys in (("Only in A", comparison.only_in_a), ("Only in B", comparison.only_in_b)):
        if keys:
            lines += ["", f"{title}: " + ", ".join(f"{s} × {c}" for s, c in keys) + "."]
    if comparison.not_comparable:
        lines += ["", "In both runs but not comparable:"]
        lines += [f"- {s} × {c}: {why}" for s, c, why in comparison.not_comparable]
    return "\n".join(lines) + "\n"


def to_json(comparison: Comparison) -> str:
    return json.dumps(asdict(comparison), indent=1)


DESCRIPTION = "Per-cell ratio of run B over run A, with its uncertainty."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", type=Path, metavar="A.json")
    parser.add_argument("b", type=Path, metavar="B.json")
    parser.add_argument("--format", choices=("md", "json"), default="md")


def run(options: argparse.Namespace) -> int:
    runs = []
    for path in (options.a, options.b):
        try:
            runs.append(load(path))
        except FileNotFoundError:
            raise UsageError(f"{path} does not exist") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{path} is not a results file of this suite ({exc})") from None
    comparison = compare_runs(*runs)
    if options.format == "json":
        print(to_json(comparison))
    else:
        print(render_comparison(comparison, runs[0], runs[1], str(options.a), str(options.b)).rstrip("\n"))
    return 0
