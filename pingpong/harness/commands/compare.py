"""`python run_bench.py compare A.json B.json` (or `compare A1 A2 A3 --against B1 B2 B3`): per-cell ratio B/A
with its uncertainty, the drift between the runs, and an optional regression gate; pure except run().

One run a side: a cell's ratio is the quotient of the two runs' intervals of its median, an interval *within one
run* (its rounds), which leaves out how runs differ. Several runs a side: each run gives one median per cell, and
the ratio's interval is the two-sample interval of those run medians, *across runs* (stats.ratio_of_runs).

Two sides are measured at different times, and the machine may drift between them (other load, another host,
thermal state). The drift is measured on control cells that no WebSocket stack change can touch, the raw-TCP floors
(both sides raw-tcp): when both sides have them, every cell's ratio is divided by the floors' median ratio (with
its interval) before it is judged. Without floors nothing is corrected, and the report says that a shift shared by
all cells cannot then be told from drift. The gate fails a cell when its corrected interval's top lies below
1 − PCT/100: slower than A by more than PCT percent beyond the noise. docs/options.md states the rules.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from pingpong.harness.analysis.host_pace import is_paced, sentinel_classes
from pingpong.harness.analysis.replication import (SETTING_KEYS, WITHIN_ONE_RUN, first_setting_difference,
                                                   run_medians, settings_of)
from pingpong.harness.analysis.stats import (Ratio, divided_by_drift, median_with_interval, ratio_of_medians,
                                             ratio_of_runs)
from pingpong.harness.analysis.summary import workload_kind
from pingpong.harness.report.formatting import axes, format_rate, format_ratio, interval_legend, rate_unit, usual_label
from pingpong.harness.results.records import RunResult, load
from pingpong.harness.settings.usage import UsageError

# Of the JSON printed with --format json; 1 had neither drift nor gate (nor a version); 2 listed pairs skipped in both
# runs (incompatible, not measured by design) among not_comparable, which 3 keeps apart as skipped; 4: the drift
# comes from the raw-TCP floors (None without them: nothing corrected), each cell has its corrected ratio and
# change_at_least (beyond: gone), the comparison its scope and shift.
COMPARE_FORMAT_VERSION = 4
EXIT_OK, EXIT_GATE_FAILED = 0, 1
FLOOR_PROTOCOL = "raw-tcp"  # a cell whose server and client both speak it is a floor: no WebSocket stack in it

CellKey = tuple[str, str]


@dataclass(frozen=True)
class CellComparison:
    server: str
    client: str
    a_median: float  # one run: the median of A's rounds; several runs: the median of A's run medians
    b_median: float
    a_n: int  # the values behind A's median: rounds (one run) or runs (several)
    b_n: int
    ratio: Ratio  # median(B) / median(A); interval: quotient (one run a side) or two-sample (several runs a side)
    corrected: Ratio  # ratio divided by the floors' drift (stats.divided_by_drift); ratio itself when not corrected
    floor: bool  # a raw-TCP floor cell: both sides speak raw TCP
    verdict: str  # faster, slower, same, unknown (no interval), or anchor (a floor the drift is measured on)
    change_at_least: float | None  # faster or slower: how far the corrected interval lies from 1 (0.28 = 28%)


@dataclass(frozen=True)
class Comparison:
    cells: list[CellComparison]
    only_in_a: list[CellKey]
    only_in_b: list[CellKey]
    not_comparable: list[tuple[str, str, str]]  # in both runs but not measured in one: (server, client, why)
    skipped: list[CellKey]  # in both runs, skipped in both (an incompatible pair): nothing to compare
    setting_differences: dict[str, tuple[Any, Any]]
    drift: Ratio | None  # the floors' median ratio B/A, which every cell is divided by; None: nothing corrected
    drift_cells: int  # the floor cells the drift comes from (0: no drift correction)
    shift: Ratio | None  # the median ratio over every compared cell (what drift and a shared change look like)
    scope: str  # "within one run" (one run a side) or "across 3 and 3 runs"


@dataclass(frozen=True)
class Gate:
    """--fail-above PCT: the cells whose ratio B/A, drift-corrected, has its interval's top below 1 − PCT/100."""

    fail_above_pct: float
    failed: list[tuple[str, str, float]]  # (server, client, percent slower at least: 100 × (1 − interval's top))
    not_judged: list[tuple[str, str]]  # compared cells without an interval (one repeat, or one run on a side)
    drift_corrected: bool  # whether the ratios were divided by the floors' drift

    @property
    def passed(self) -> bool:
        return not self.failed


@dataclass(frozen=True)
class Side:
    """One side of a comparison: one run, or several runs of the same settings."""

    values: dict[CellKey, list[float]]  # per cell: its rounds' rates (one run) or its run medians (several)
    skipped: dict[CellKey, str]  # cells skipped (in every run of the side), with the reason
    floors: set[CellKey]  # raw-TCP floor cells
    runs: int


def is_floor(run: RunResult, server: str, client: str) -> bool:
    """Both sides speak raw TCP, by the manifest entries the run recorded (else by the name, raw-tcp-...)."""
    def protocol(role: str, name: str) -> str | None:
        entry = (run.implementations.get(role) or {}).get(name)
        if isinstance(entry, dict) and entry.get("protocol"):
            return entry["protocol"]
        return FLOOR_PROTOCOL if name.startswith(FLOOR_PROTOCOL + "-") else None
    return protocol("server", server) == FLOOR_PROTOCOL and protocol("client", client) == FLOOR_PROTOCOL


def side_of_run(run: RunResult) -> Side:
    return Side(values={(c.server, c.client): c.rates() for c in run.cells},
                skipped={(c.server, c.client): c.skipped for c in run.cells if c.skipped},
                floors={(c.server, c.client) for c in run.cells if is_floor(run, c.server, c.client)}, runs=1)


def side_of_runs(runs: list[RunResult]) -> Side:
    """Several runs as one side: per cell the medians of the runs that measured it."""
    per_run = [run_medians(run) for run in runs]
    keys: list[CellKey] = []
    for run in runs:
        keys += [(c.server, c.client) for c in run.cells if (c.server, c.client) not in keys]
    skipped_in = [{(c.server, c.client): c.skipped for c in run.cells if c.skipped} for run in runs]
    skipped = {}
    for key in keys:
        reasons = [found[key] for found, run in zip(skipped_in, runs) if key in found]
        present = sum(any((c.server, c.client) == key for c in run.cells) for run in runs)
        if reasons and len(reasons) == present:
            skipped[key] = reasons[0]
    floors = {key for key in keys if any(is_floor(run, *key) for run in runs)}
    return Side(values={key: [medians[key] for medians in per_run if key in medians] for key in keys},
                skipped=skipped, floors=floors, runs=len(runs))


def compare_runs(a: RunResult, b: RunResult) -> Comparison:
    """One run a side: intervals within one run."""
    differences = {key: (a.configuration.get(key), b.configuration.get(key)) for key in SETTING_KEYS
                   if a.configuration.get(key) != b.configuration.get(key)}
    return compare_sides(side_of_run(a), side_of_run(b), ratio_of_medians, WITHIN_ONE_RUN, differences)


def compare_run_sets(a_runs: list[RunResult], b_runs: list[RunResult]) -> Comparison:
    """Several runs a side (each side's runs of the same settings): intervals across runs, from run medians."""
    a_settings, b_settings = settings_of(a_runs[0]), settings_of(b_runs[0])
    differences = {key: (a_settings[key], b_settings[key]) for key in SETTING_KEYS
                   if a_settings[key] != b_settings[key]}
    scope = f"across {len(a_runs)} and {len(b_runs)} runs"
    return compare_sides(side_of_runs(a_runs), side_of_runs(b_runs), ratio_of_runs, scope, differences)


def compare_sides(a: Side, b: Side, ratio_of: Callable[[list[float], list[float]], Ratio], scope: str,
                  differences: dict[str, tuple[Any, Any]]) -> Comparison:
    ratios: dict[CellKey, Ratio] = {}
    not_comparable, skipped = [], []
    for key in [key for key in a.values if key in b.values]:
        if key in a.skipped and key in b.skipped:
            skipped.append(key)
            continue
        a_values, b_values = a.values[key], b.values[key]
        if not a_values or not b_values:
            side, reasons = ("A", a.skipped) if not a_values else ("B", b.skipped)
            why = (f"skipped in run {side}: {reasons[key]}" if key in reasons
                   else f"no successful repeat in run {side}")
            not_comparable.append((*key, why))
            continue
        ratios[key] = ratio_of(b_values, a_values)
    floors = [key for key in ratios if key in a.floors and key in b.floors]
    drift = drift_of([ratios[key] for key in floors]) if floors else None
    cells = []
    for key, ratio in ratios.items():
        corrected = divided_by_drift(ratio, drift) if drift is not None else ratio
        floor = key in a.floors and key in b.floors
        verdict, change = judge(corrected, anchor=floor and drift is not None)
        cells.append(CellComparison(key[0], key[1], median(a.values[key]), median(b.values[key]), len(a.values[key]),
                                    len(b.values[key]), ratio, corrected, floor, verdict, change))
    shift = median_with_interval([ratio.value for ratio in ratios.values()]) if ratios else None
    return Comparison(cells=cells, only_in_a=[key for key in a.values if key not in b.values],
                      only_in_b=[key for key in b.values if key not in a.values], not_comparable=not_comparable,
                      skipped=skipped, setting_differences=differences, drift=drift, drift_cells=len(floors),
                      shift=shift, scope=scope)


def drift_of(floor_ratios: list[Ratio]) -> Ratio:
    """The drift between the two sides, from the floors' ratios: their median with its order-statistic interval;
    one floor's own ratio (and interval) when there is only one."""
    if len(floor_ratios) == 1:
        return floor_ratios[0]
    return median_with_interval([ratio.value for ratio in floor_ratios])


def judge(corrected: Ratio, anchor: bool = False) -> tuple[str, float | None]:
    """A cell's verdict from its drift-corrected ratio, and how far its interval lies from 1.

    Slower: the interval's top is below 1; slower by at least 1 − top. Faster likewise above. A cell without an
    interval is unknown; a floor the drift is measured on is its anchor, not judged.
    """
    if anchor:
        return "anchor", None
    if corrected.low is None:
        return "unknown", None
    if corrected.high < 1:
        return "slower", 1 - corrected.high
    if corrected.low > 1:
        return "faster", corrected.low - 1
    return "same", None


def gate(comparison: Comparison, fail_above_pct: float) -> Gate:
    """Fail the cells whose corrected interval's top lies below 1 − PCT/100."""
    failed = [(c.server, c.client, c.change_at_least * 100) for c in comparison.cells
              if c.verdict == "slower" and c.corrected.high < 1 - fail_above_pct / 100]
    return Gate(fail_above_pct=fail_above_pct, failed=failed,
                not_judged=[(c.server, c.client) for c in comparison.cells if c.verdict == "unknown"],
                drift_corrected=comparison.drift is not None)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


MARKS = {"faster": " ▲", "slower": " ▼", "same": "", "unknown": " ?", "anchor": ""}
NO_DRIFT_SENTENCE = ("no raw-TCP floor was measured on both sides, so the ratios are not corrected for drift: a shift "
                     "shared by all cells cannot be told from drift")


def drift_sentence(comparison: Comparison) -> str:
    """Where the drift comes from and what it is, or that nothing is corrected and what that means."""
    shift = comparison.shift
    if shift is None:
        return "No cell was measured in both runs: there is no drift to estimate."
    count = len(comparison.cells)
    across = (f"across all {count} compared cell{'s' if count != 1 else ''} the median ratio is ×{shift.value:.2f}"
              + (f" ({shift.low:.2f}–{shift.high:.2f})" if shift.low is not None else ""))
    drift = comparison.drift
    if drift is None:
        return f"**Drift**: {NO_DRIFT_SENTENCE} ({across})."
    bracket = (f" ({drift.low:.2f}–{drift.high:.2f}, {drift.label()})" if drift.low is not None else
               " (no interval)")
    floors = comparison.drift_cells
    return (f"**Drift**, measured on the {floors} raw-TCP floor cell{'s' if floors != 1 else ''} (no WebSocket stack "
            f"change touches them): B/A ×{drift.value:.2f}{bracket}; every other cell's ratio is divided by it, with "
            f"its interval, before it is judged ({across}).")
def scope_sentence(comparison: Comparison) -> str:
    if comparison.scope == WITHIN_ONE_RUN:
        return ("Intervals within one run: a bracket is [B's low / A's high, B's high / A's low] of the two medians' "
                "intervals over each run's rounds; it holds the true ratio at least as often as both hold their "
                "medians (the runs are independent), but it leaves out how runs differ from one another.")
    return (f"Intervals {comparison.scope}: each run gives one median per cell, and a bracket is the two-sample "
            "interval of B's run medians over A's (the order statistics of their pairwise ratios), which holds "
            "the variation from run to run.")


def render_comparison(comparison: Comparison, a: RunResult, b: RunResult, a_name: str, b_name: str,
                      verdict: Gate | None = None, a_runs: list[RunResult] | None = None,
                      b_runs: list[RunResult] | None = None) -> str:
    """The comparison as Markdown: the drift, a matrix of B/A ratios with marks, the lists, the gate; pure.
    a and b are each side's first run (for the axes and the unit); a_runs and b_runs all of them when several."""
    servers, clients = [], []
    for run in (a_runs or [a]) + (b_runs or [b]):
        run_servers, run_clients = axes(run)
        servers += [s for s in run_servers if s not in servers]
        clients += [c for c in run_clients if c not in clients]
    by_key = {(c.server, c.client): c for c in comparison.cells}
    ratios = [cell.ratio for cell in comparison.cells]
    usual = usual_label(ratios)
    started = (f"A started {a.started_at}, B started {b.started_at}." if comparison.scope == WITHIN_ONE_RUN else
               f"A: {len(a_runs or [a])} runs from {a.started_at}; B: {len(b_runs or [b])} runs from {b.started_at}.")
    median_of = "median" if comparison.scope == WITHIN_ONE_RUN else "median of the run medians in"
    lines = [f"# Comparison: B = {b_name} over A = {a_name} ({comparison.scope})", "",
             f"{started} Each cell: {median_of} {rate_unit(b)} of B over A's; {interval_legend(ratios)}.", "",
             scope_sentence(comparison), "",
             drift_sentence(comparison), "",
             "▲ B faster and ▼ B slower beyond the noise: the cell's bracket, divided by the drift's when there is "
             "one, lies wholly above or below 1; ? no interval (one repeat, or one run on a side); — not in both"
             + ("; the raw-TCP floors are the drift's anchor, not judged" if comparison.drift is not None else "")
             + ".", ""]
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
    judged = sum(c.verdict != "anchor" for c in comparison.cells)
    lines += ["", f"Compared: {count} cell{'s' if count != 1 else ''} measured in both runs"
              + (f"; {len(comparison.skipped)} pairs skipped in both (incompatible: not measured by design, reasons "
                 "in each run's files), not listed" if comparison.skipped else "") + ".", "",
              f"{len(changed)} of {judged} judged cells differ beyond their noise"
              + (" and the drift." if comparison.drift is not None else " (not corrected for drift).")]
    for cell in sorted(changed, key=lambda c: c.corrected.value):
        lines.append(f"- {cell.server} × {cell.client}: {format_rate(cell.a_median)} → {format_rate(cell.b_median)} "
                     f"{rate_unit(b)}, {format_ratio(cell.ratio, usual)}"
                     + (f", corrected {format_ratio(cell.corrected)}" if comparison.drift is not None else "")
                     + f" ({cell.verdict} by at least {cell.change_at_least:.1%})")
    for title, keys in (("Only in A", comparison.only_in_a), ("Only in B", comparison.only_in_b)):
        if keys:
            lines += ["", f"{title}: " + ", ".join(f"{s} × {c}" for s, c in keys) + "."]
    if comparison.not_comparable:
        lines += ["", "In both runs but not comparable:"]
        lines += [f"- {s} × {c}: {why}" for s, c, why in comparison.not_comparable]
    if verdict is not None:
        lines += ["", *gate_lines(verdict, comparison)]
    return "\n".join(lines) + "\n"


def gate_lines(verdict: Gate, comparison: Comparison) -> list[str]:
    threshold = f"{verdict.fail_above_pct:g}%"
    bound = 1 - verdict.fail_above_pct / 100
    corrected = "drift-corrected " if verdict.drift_corrected else ""
    lines = [f"## Gate: --fail-above {verdict.fail_above_pct:g}", ""]
    if verdict.failed:
        lines.append(f"**Failed**: {len(verdict.failed)} cell(s) slower than A by more than {threshold} beyond their "
                     f"noise (the top of their {corrected}interval of B/A lies below {bound:.3g}):")
        lines += [f"- {s} × {c}: at least {at_least:.1f}% slower" for s, c, at_least in verdict.failed]
    else:
        lines.append(f"**Passed**: no cell is slower than A by more than {threshold} beyond its noise (no "
                     f"{corrected}interval of B/A has its top below {bound:.3g}).")
    if verdict.not_judged:
        lines += ["", "Not judged (no interval: one repeat, or one run on a side): "
                  + ", ".join(f"{s} × {c}" for s, c in verdict.not_judged) + "."]
    if not verdict.drift_corrected and comparison.shift is not None:
        lines += ["", f"Not corrected for drift: {NO_DRIFT_SENTENCE}; a slower machine fails the gate as a "
                  "regression of every cell would."]
    return lines


def to_json(comparison: Comparison, verdict: Gate | None = None) -> str:
    data = {"format_version": COMPARE_FORMAT_VERSION, **asdict(comparison), "gate": None}
    if verdict is not None:
        data["gate"] = {**asdict(verdict), "passed": verdict.passed}
    return json.dumps(data, indent=1)


DESCRIPTION = ("Per-cell ratio of run B over run A (or of several runs of B over several of A, with intervals across "
               "runs), with its uncertainty and the drift measured on the raw-TCP floors; with --fail-above, a "
               "regression gate (exit code 1). With --alternate A B --runs N -- RUN OPTIONS it makes the runs "
               "itself, alternating A and B run by run (two checkouts, or two package sets).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", type=Path, nargs="*", metavar="A.json",
                        help="A.json B.json: two runs; or A's runs, with B's after --against")
    parser.add_argument("--against", type=Path, nargs="+", metavar="B.json",
                        help="B's runs: compare several runs a side, with intervals across runs")
    parser.add_argument("--format", choices=("md", "json"), default="md")
    parser.add_argument("--fail-above", type=float, metavar="PCT",
                        help="exit 1 when a cell is slower than in A by more than PCT percent beyond its noise: its "
                             "ratio's interval, corrected for the floors' drift, lies below 1 - PCT/100")
    alternating = parser.add_argument_group("run the two sides here, alternating A, B, A, B (docs/options.md)")
    alternating.add_argument("--alternate", nargs=2, metavar=("A", "B"),
                             help="each a checkout of this suite (a folder with run_bench.py) or a package set "
                                  "python:PKG==VER[,...] or node:PKG@VER[,...]; the run's options go after --")
    alternating.add_argument("--runs", dest="alternate_runs", type=int, metavar="N",
                             help="runs a side with --alternate (at least 2)")
    alternating.add_argument("--keep", type=Path, metavar="DIR",
                             help="keep the runs' results in DIR (new or empty): DIR/A-1, DIR/B-1, ... and "
                                  "alternation.json (default: a temporary folder, removed after the comparison)")


def read_run(path: Path) -> RunResult:
    try:
        return load(path)
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} is not a results file of this suite ({exc})") from None


def sides_of(options: argparse.Namespace) -> tuple[list[Path], list[Path]]:
    """A's and B's files: `A B`, or `A1 A2 ... --against B1 B2 ...`; a one-line UsageError otherwise."""
    if options.against:
        return list(options.runs), list(options.against)
    if len(options.runs) != 2:
        raise UsageError(f"compare takes two files (A.json B.json), or A's runs then --against and B's runs; got "
                         f"{len(options.runs)} file(s) and no --against")
    return [options.runs[0]], [options.runs[1]]


def check_fail_above(fail_above_pct: float | None) -> None:
    if fail_above_pct is not None and not (math.isfinite(fail_above_pct) and fail_above_pct >= 0):
        raise UsageError(f"--fail-above takes a percentage of 0 or more, not {fail_above_pct:g}")


def run(options: argparse.Namespace) -> int:
    check_fail_above(options.fail_above)
    a_paths, b_paths = sides_of(options)
    a_runs, b_runs = [read_run(path) for path in a_paths], [read_run(path) for path in b_paths]
    everything = list(zip(a_paths + b_paths, a_runs + b_runs))
    kinds = [workload_kind(run.configuration) for _, run in everything]
    (first_path, first_run), first_kind = everything[0], kinds[0]
    for (path, other), kind in zip(everything[1:], kinds[1:]):
        if kind != first_kind:
            raise UsageError(f"{first_path} measured {rate_unit(first_run)} ({first_kind}), {path} "
                             f"{rate_unit(other)} ({kind}): compare runs of the same workload")
    for paths, runs in ((a_paths, a_runs), (b_paths, b_runs)):
        difference = first_setting_difference(runs, [str(path) for path in paths]) if len(runs) > 1 else None
        if difference:
            raise UsageError(difference)
    paced = {is_paced(run) for run in a_runs + b_runs}
    if len(paced) > 1:
        print("note: some of these runs' rates are at the reference pace (the host's pace in the window), others raw "
              "(measured before 2026-11-27 or with PINGPONG_RAW_WINDOWS=1): a factor between them is partly the "
              "host's pace; the floors' drift correction takes up only what the floors share", file=sys.stderr)
    classes = set().union(*(sentinel_classes(run) for run in a_runs + b_runs))
    if len(classes) > 1:
        print("note: these runs' windows were paced by the host sentinel in two classes (real-time, taking the CPU; "
              "ordinary, stopping the cell: before 2026-11-27 15:00 UTC or where the real-time class is refused), "
              "whose roundtrips differ by about 15%: rates at the reference pace between them differ by that much "
              "for no other reason", file=sys.stderr)
    several = len(a_runs) > 1 or len(b_runs) > 1
    comparison = compare_run_sets(a_runs, b_runs) if several else compare_runs(a_runs[0], b_runs[0])
    verdict = gate(comparison, options.fail_above) if options.fail_above is not None else None
    if options.format == "json":
        print(to_json(comparison, verdict))
    else:
        name = lambda paths: str(paths[0]) if len(paths) == 1 else f"{paths[0]} and {len(paths) - 1} more"  # noqa: E731
        print(render_comparison(comparison, a_runs[0], b_runs[0], name(a_paths), name(b_paths), verdict,
                                a_runs, b_runs).rstrip("\n"))
    return EXIT_GATE_FAILED if verdict is not None and not verdict.passed else EXIT_OK
