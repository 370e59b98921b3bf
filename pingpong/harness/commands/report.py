"""`run_bench.py report RESULTS.json`: any saved run shown again, in any of the formats a run saves or prints;
`report A.json B.json C.json`: runs of the same settings combined, with intervals across runs. A file may be
compressed (the reference runs are RESULTS.json.xz): results/stored.py reads it."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from pingpong.harness.analysis.replication import combine, first_setting_difference, to_json_dict
from pingpong.harness.analysis.summary import Summaries, summarize_run, workload_kind
from pingpong.harness.report import terminal
from pingpong.harness.report.exporters import rendered
from pingpong.harness.report.formatting import rate_unit
from pingpong.harness.report.replication import render_replication
from pingpong.harness.results.files import FORMATS
from pingpong.harness.results.records import RunResult, load
from pingpong.harness.results.stored import read_json, sibling
from pingpong.harness.settings.usage import UsageError

DESCRIPTION = ("Show a saved run again (a results/*.json file, or the reference runs' *.json.xz): as the terminal "
               "tables, Markdown, CSV (one row per cell), JSON, or the self-contained HTML page. Several files of "
               "the same settings combine: per cell the median of the runs' medians, with an interval across runs.")
COMBINED_FORMATS = ("terminal", "md", "json")  # what several runs combined can be shown as


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, nargs="+", metavar="RESULTS.json",
                        help="a results file a run saved; several of the same settings combine across runs")
    parser.add_argument("--format", choices=FORMATS, default="terminal",
                        help="terminal (default: tables that fit the terminal or COLUMNS, at most 120), md, csv, "
                             "json or html; several files: terminal, md or json")


def run(options: argparse.Namespace) -> int:
    if len(options.results) > 1:
        return show_combined(options.results, options.format)
    result = read(options.results[0])
    show(result, summaries=summarize_run(result), output_format=options.format, source=str(options.results[0]))
    return 0


def show_combined(paths: list[Path], output_format: str) -> int:
    """Runs of the same settings combined across runs (analysis/replication.py), or a one-line UsageError."""
    if output_format not in COMBINED_FORMATS:
        raise UsageError(f"several runs combined show as {', '.join(COMBINED_FORMATS)}, not {output_format}")
    runs = [read(path) for path in paths]
    names = [str(path) for path in paths]
    kinds = [workload_kind(run.configuration) for run in runs]
    for name, kind, run in zip(names[1:], kinds[1:], runs[1:]):
        if kind != kinds[0]:
            raise UsageError(f"{names[0]} measured {rate_unit(runs[0])} ({kinds[0]}), {name} {rate_unit(run)} "
                             f"({kind}): combine runs of the same workload")
    difference = first_setting_difference(runs, names)
    if difference:
        raise UsageError(difference)
    replication = combine(runs, names)
    if output_format == "json":
        sys.stdout.write(json.dumps(to_json_dict(replication), indent=1) + "\n")
    else:
        sys.stdout.write(render_replication(replication, rate_unit(runs[0])))
    sys.stdout.flush()
    return 0


def show(result: RunResult, summaries: Summaries, output_format: str, source: str | None = None) -> None:
    """The run on stdout: drawn with rich when the terminal format goes to a terminal, else as text.

    The terminal format fits terminal_width(), on a terminal and in a pipe alike (at most terminal.WIDTH)."""
    if output_format == "terminal":
        report = terminal.terminal_report(result, summaries, source, width=terminal_width())
        if sys.stdout.isatty():
            terminal.print_rich(report)
            return
        sys.stdout.write(terminal.render_plain(report))
        sys.stdout.flush()
    else:
        sys.stdout.write(rendered(result, summaries, output_format, source))
        sys.stdout.flush()


def terminal_width() -> int:
    """The columns the terminal format is laid out for: COLUMNS when it is set to a positive number (in a pipe too,
    as rich and most terminal tools do), else the terminal's own width, else terminal.WIDTH (a pipe, a CI log).
    shutil.get_terminal_size reads COLUMNS first; it only ever took effect on a terminal, where this was asked."""
    return shutil.get_terminal_size((terminal.WIDTH, 24)).columns


def read(path: Path) -> RunResult:
    """A saved run, or a one-line UsageError saying why the file cannot be shown."""
    try:
        return load(path)
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a folder; give a results .json file") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        if _is_sweep_index(path):
            raise UsageError(f"{path} is a sweep's index (its table is {sibling(path, '.md').name}); report one "
                             f"of its points' files instead") from None
        raise UsageError(f"{path} is not a results file of this suite ({type(exc).__name__}: {exc})") from None


def _is_sweep_index(path: Path) -> bool:
    try:
        return "swept" in read_json(path)
    except (OSError, ValueError, TypeError):
        return False
