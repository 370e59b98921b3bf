"""`run_bench.py report RESULTS.json`: any saved run shown again, in any of the formats a run saves or prints."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from pingpong.harness.analysis.summary import Summaries, summarize_run
from pingpong.harness.report import terminal
from pingpong.harness.report.exporters import FORMATS, rendered
from pingpong.harness.results.records import RunResult, load
from pingpong.harness.settings.usage import UsageError

DESCRIPTION = ("Show a saved run again (a results/*.json file, the reference runs included): as the terminal "
               "tables, Markdown, CSV (one row per cell), JSON, or the self-contained HTML page.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, metavar="RESULTS.json", help="a results file a run saved")
    parser.add_argument("--format", choices=FORMATS, default="terminal",
                        help="terminal (default: tables that fit 120 columns), md, csv, json or html")


def run(options: argparse.Namespace) -> int:
    result = read(options.results)
    show(result, summaries=summarize_run(result), output_format=options.format, source=str(options.results))
    return 0


def show(result: RunResult, summaries: Summaries, output_format: str, source: str | None = None) -> None:
    """The run on stdout: drawn with rich when the terminal format goes to a terminal, else as text."""
    if output_format == "terminal" and sys.stdout.isatty():
        columns = shutil.get_terminal_size((terminal.WIDTH, 24)).columns
        terminal.print_rich(terminal.terminal_report(result, summaries, source, width=columns))
    else:
        sys.stdout.write(rendered(result, summaries, output_format, source))
        sys.stdout.flush()


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
            raise UsageError(f"{path} is a sweep's index (its table is {path.with_suffix('.md').name}); report one "
                             f"of its points' files instead") from None
        raise UsageError(f"{path} is not a results file of this suite ({type(exc).__name__}: {exc})") from None


def _is_sweep_index(path: Path) -> bool:
    try:
        return "swept" in json.loads(path.read_text())
    except (OSError, ValueError, TypeError):
        return False
