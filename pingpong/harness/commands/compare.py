"""`python run_bench.py compare A.json B.json`: per-cell ratio B/A with its uncertainty, the drift between the
runs, and an optional regression gate; pure except run().

Two runs are measured at different times, and the machine may have drifted between them (other load, another
host, thermal state): every cell then moves together. The drift is estimated from the cells both runs share, as
the median of their ratios B/A with its order-statistic interval. A cell is marked ▲ or ▼ only when its change lies
outside both its own noise (the quotient of the two runs' intervals of its median excludes 1) and the drift's
interval: a change every cell shares cannot be told from drift. docs/options.md states the rule and the gate's.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pingpong.harness.analysis.stats import Ratio, median_with_interval, order_statistic_rank, ratio_of_medians
from pingpong.harness.analysis.summary import workload_kind
from pingpong.harness.report.formatting import axes, format_rate, format_ratio, interval_legend, rate_unit, usual_label
from pingpong.harness.results.records import RunResult, load
from pingpong.harness.settings.usage import UsageError

# Settings compared between the two runs: a difference is shown, since it may explain the ratios.
SETTING_KEYS = ("workload", "duration_s", "warmup_s", "repeat", "loop", "compression", "payload_size",
                "payload_kind", "pairs", "client_processes", "tls", "pinned", "python_packages", "node_packages",
                "receivers", "idle_connections", "rate")
# Of the JSON printed with --format json; 1 had neither drift nor gate (nor a version); 2 listed pairs skipped in both
# runs (incompatible, not measured by design) among not_comparable, which 3 keeps apart as skipped.
COMPARE_FORMAT_VERSION = 3
EXIT_OK, EXIT_GATE_FAILED = 0, 1


@dataclass(frozen=True)
class CellComparison:
    server: str
    client: str
    a_median: float
    b_median: float
    a_n: int
    b_n: int
    ratio: Ratio  # median(B) / median(A); interval: the quotient of the two medians' intervals (stats.ratio_of_medians)
    verdict: str  # faster or slower beyond the noise and the drift, same, or unknown (one repeat: no interval)
    beyond: float | None  # how far the change lies beyond the noise and the drift (0.28 = 28%); None when not


@dataclass(frozen=True)
class Comparison:
    cells: list[CellComparison]
    only_in_a: list[tuple[str, str]]
    only_in_b: list[tuple[str, str]]
    not_comparable: list[tuple[str, str, str]]  # in both runs but not measured in one: (server, client, why)
    skipped: list[tuple[str, str]]  # in both runs, skipped in both (an incompatible pair): nothing to compare
    setting_differences: dict[str, tuple[Any, Any]]
    drift: Ratio | None  # median of the compared cells' ratios B/A, with its interval; None when no cell compares


@dataclass(frozen=True)
class Gate:
    """--fail-above PCT: the cells slower than A by more than PCT percent beyond their noise and the drift."""

    fail_above_pct: float
    failed: list[tuple[str, str, float]]  # (server, client, percent slower beyond noise and drift)
    not_judged: list[tuple[str, str]]  # compared cells without an interval (a run with one repeat of them)

    @property
    def passed(self) -> bool:
        return not self.failed


def measured(run: RunResult) -> dict[tuple[str, str], list[float]]:
    return {(cell.server, cell.client): cell.rates() for cell in run.cells}


def compare_runs(a: RunResult, b: RunResult) -> Comparison:
    a_cells, b_cells = measured(a), measured(b)
    a_skipped, b_skipped = ({(cell.server, cell.client): cell.skipped for cell in run.cells if cell.skipped}
                            for run in (a, b))
    ratios, not_comparable, skipped = {}, [], []
    for key in [key for key in a_cells if key in b_cells]:
        a_rates, b_rates = a_cells[key], b_cells[key]
        if key in a_skipped and key in b_skipped:
            skipped.append(key)
            continue
        if not a_rates or not b_rates:
            side, reasons = ("A", a_skipped) if not a_rates else ("B", b_skipped)
            why = (f"skipped in run {side}: {reasons[key]}" if key in reasons
                   else f"no successful repeat in run {side}")
            not_comparable.append((*key, why))
            continue
        ratios[key] = ratio_of_medians(b_rates, a_rates)
    drift = median_with_interval([ratio.value for ratio in ratios.values()]) if ratios else None
    cells = []
    for key, ratio in ratios.items():
        verdict, beyond = judge(ratio, drift)
        cells.append(CellComparison(key[0], key[1], median(a_cells[key]), median(b_cells[key]), len(a_cells[key]),
                                    len(b_cells[key]), ratio, verdict, beyond))
    differences = {key: (a.configuration.get(key), b.configuration.get(key)) for key in SETTING_KEYS
                   if a.configuration.get(key) != b.configuration.get(key)}
    return Comparison(cells=cells, only_in_a=[key for key in a_cells if key not in b_cells],
                      only_in_b=[key for key in b_cells if key not in a_cells], not_comparable=not_comparable,
                      skipped=skipped, setting_differences=differences, drift=drift)


def drift_bounds(drift: Ratio) -> tuple[float, float]:
    """The drift's interval; its value alone when there is none (one compared cell)."""
    return (drift.value, drift.value) if drift.low is None else (drift.low, drift.high)


def judge(ratio: Ratio, drift: Ratio) -> tuple[str, float | None]:
    """A cell's verdict and how far beyond noise and drift it lies.

    Slower: the cell's whole interval lies below 1 and below the drift's interval; it is then slower by
    1 - high / min(1, drift's low) beyond them. Faster likewise above. A cell without an interval is unknown.
    """
    if ratio.low is None:
        return "unknown", None
    drift_low, drift_high = drift_bounds(drift)
    floor, ceiling = min(1.0, drift_low), max(1.0, drift_high)
    if ratio.high < floor:
        return "slower", 1 - ratio.high / floor
    if ratio.low > ceiling:
        return "faster", ratio.low / ceiling - 1
    return "same", None


def gate(comparison: Comparison, fail_above_pct: float) -> Gate:
    failed = [(c.server, c.client, c.beyond * 100) for c in comparison.cells
              if c.verdict == "slower" and c.beyond * 100 > fail_above_pct]
    return Gate(fail_above_pct=fail_above_pct, failed=failed,
                not_judged=[(c.server, c.client) for c in comparison.cells if c.verdict == "unknown"])


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


MARKS = {"faster": " ▲", "slower": " ▼", "same": "", "unknown": " ?"}


def drift_sentence(comparison: Comparison) -> str:
    """'the runs differ by ×0.96 (0.93–0.99, …) across all 10 compared cells: …', or why there is no drift."""
    drift = comparison.drift
    if drift is None:
        return "No cell was measured in both runs: there is no drift to estimate."
    count = len(comparison.cells)
    if drift.low is None:
        return (f"**Drift**: the runs differ by ×{drift.value:.2f} in the one compared cell; with one cell, its "
                "change cannot be told from drift.")
    text = (f"**Drift**: the runs differ by ×{drift.value:.2f} ({drift.low:.2f}–{drift.high:.2f}, the median of the "
            f"cells' ratios and its {drift.label()}) across all {count} compared cells: a change smaller than that "
            "cannot be told from drift.")
    if order_statistic_rank(count)[0] == 1:
        text += (f" With {count} cells the drift's interval is the range of every cell's ratio, so no cell can lie "
                 "outside it: compare marks a cell only when 9 or more cells compare.")
    return text


def render_comparison(comparison: Comparison, a: RunResult, b: RunResult, a_name: str, b_name: str,
                      verdict: Gate | None = None) -> str:
    """The comparison as Markdown: the drift, a matrix of B/A ratios with marks, the lists, the gate; pure."""
    servers_a, clients_a = axes(a)
    servers_b, clients_b = axes(b)
    servers = servers_a + [s for s in servers_b if s not in servers_a]
    clients = clients_a + [c for c in clients_b if c not in clients_a]
    by_key = {(c.server, c.client): c for c in comparison.cells}
    ratios = [cell.ratio for cell in comparison.cells]
    usual = usual_label(ratios)
    lines = [f"# Comparison: B = {b_name} over A = {a_name}", "",
             f"A started {a.started_at}, B started {b.started_at}. Each cell: median {rate_unit(b)} of B over A's; "
             f"{interval_legend(ratios)}. A bracket is [B's low / A's high, B's high / A's low] of the two medians' "
             "intervals: it holds the true ratio at least as often as both hold their medians (the runs are "
             "independent).", "",
             drift_sentence(comparison), "",
             "▲ B faster and ▼ B slower beyond both the cell's own noise (its bracket excludes 1) and the drift (its "
             "bracket lies wholly outside the drift's interval); ? a run with one repeat of the cell (no interval); "
             "— not in both runs.", ""]
    if comparison.setting_differences:
        lines.append("Settings that differ: " + "; ".join(
            f"{key} {old!r} → {new!r}" for key, (old, new) in comparison.setting_differences.items()) + ".")
        lines.append("")
    lines += ["| server \\ client | " + " | ".join(clients) + " |", "|---|" + "---:|" * len(clients)]
    for server in servers:
        row = []
        for client in clients:
            cell = by_key.get((server, client))
            row.append(format_ratio(cell.ratio, usual) + MARKS[cell.verdict] if cell else "—")
        lines.append(f"| {server} | " + " | ".join(row) + " |")
    changed = [c for c in comparison.cells if c.verdict in ("faster", "slower")]
    count = len(comparison.cells)
    lines += ["", f"Compared: {count} cell{'s' if count != 1 else ''} measured in both runs"
              + (f"; {len(comparison.skipped)} pairs skipped in both (incompatible: not measured by design, reasons "
                 "in each run's files), not listed" if comparison.skipped else "") + ".", "",
              f"{len(changed)} of {len(comparison.cells)} compared cells differ beyond their noise and the drift."]
    for cell in sorted(changed, key=lambda c: c.ratio.value):
        lines.append(f"- {cell.server} × {cell.client}: {format_rate(cell.a_median)} → {format_rate(cell.b_median)} "
                     f"{rate_unit(b)}, {format_ratio(cell.ratio, usual)} ({cell.verdict}, {cell.beyond:.0%} beyond "
                     "noise and drift)")
    for title, keys in (("Only in A", comparison.only_in_a), ("Only in B", comparison.only_in_b)):
        if keys:
            lines += ["", f"{title}: " + ", ".join(f"{s} × {c}" for s, c in keys) + "."]
    if comparison.not_comparable:
        lines += ["", "In both runs but not comparable:"]
        lines += [f"- {s} × {c}: {why}" for s, c, why in comparison.not_comparable]
    if verdict is not None:
        lines += ["", *gate_lines(verdict, comparison.drift)]
    return "\n".join(lines) + "\n"


def gate_lines(verdict: Gate, drift: Ratio | None) -> list[str]:
    threshold = f"{verdict.fail_above_pct:g}%"
    lines = [f"## Gate: --fail-above {verdict.fail_above_pct:g}", ""]
    if verdict.failed:
        lines.append(f"**Failed**: {len(verdict.failed)} cell(s) slower than A by more than {threshold} beyond "
                     "their noise and the drift:")
        lines += [f"- {s} × {c}: {beyond:.1f}% beyond" for s, c, beyond in verdict.failed]
    else:
        lines.append(f"**Passed**: no cell is slower than A by more than {threshold} beyond its noise and the drift.")
    if verdict.not_judged:
        lines += ["", "Not judged (one repeat in a run, so no interval): "
                  + ", ".join(f"{s} × {c}" for s, c in verdict.not_judged) + "."]
    if drift is not None and drift.value < 1 - verdict.fail_above_pct / 100:
        lines += ["", f"The runs as a whole differ by ×{drift.value:.2f}, more than {threshold}: the gate does not "
                  "fail on that, since a change that every cell shares cannot be told from the machine's drift "
                  "between two runs."]
    return lines


def to_json(comparison: Comparison, verdict: Gate | None = None) -> str:
    data = {"format_version": COMPARE_FORMAT_VERSION, **asdict(comparison), "gate": None}
    if verdict is not None:
        data["gate"] = {**asdict(verdict), "passed": verdict.passed}
    return json.dumps(data, indent=1)


DESCRIPTION = ("Per-cell ratio of run B over run A, with its uncertainty and the drift between the runs; with "
               "--fail-above, a regression gate (exit code 1).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", type=Path, metavar="A.json")
    parser.add_argument("b", type=Path, metavar="B.json")
    parser.add_argument("--format", choices=("md", "json"), default="md")
    parser.add_argument("--fail-above", type=float, metavar="PCT",
                        help="exit 1 when a cell is slower than in A by more than PCT percent beyond its noise and "
                             "the drift between the runs (a regression gate for CI)")


def run(options: argparse.Namespace) -> int:
    if options.fail_above is not None and not (math.isfinite(options.fail_above) and options.fail_above >= 0):
        raise UsageError(f"--fail-above takes a percentage of 0 or more, not {options.fail_above:g}")
    runs = []
    for path in (options.a, options.b):
        try:
            runs.append(load(path))
        except FileNotFoundError:
            raise UsageError(f"{path} does not exist") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{path} is not a results file of this suite ({exc})") from None
    kinds = [workload_kind(run.configuration) for run in runs]
    if kinds[0] != kinds[1]:
        raise UsageError(f"{options.a} measured {rate_unit(runs[0])} ({kinds[0]}), {options.b} "
                         f"{rate_unit(runs[1])} ({kinds[1]}): compare runs of the same workload")
    comparison = compare_runs(*runs)
    verdict = gate(comparison, options.fail_above) if options.fail_above is not None else None
    if options.format == "json":
        print(to_json(comparison, verdict))
    else:
        print(render_comparison(comparison, runs[0], runs[1], str(options.a), str(options.b), verdict).rstrip("\n"))
    return EXIT_GATE_FAILED if verdict is not None and not verdict.passed else EXIT_OK
