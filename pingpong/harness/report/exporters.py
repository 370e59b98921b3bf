"""Every format a run is shown or saved in, in one table (format -> function of the record and its summaries ->
text), and the files of a run written from it: rewritten together after the rounds, the PNG figures beside them."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Callable

from pingpong.harness.analysis.precision import precision_reach
from pingpong.harness.analysis.summary import Summaries, summarize_run
from pingpong.harness.report import terminal
from pingpong.harness.report.csv_rows import render_csv
from pingpong.harness.report.html import render_html
from pingpong.harness.report.markdown import render_markdown
from pingpong.harness.results.files import FORMATS, SAVED_FORMATS, ResultPaths
from pingpong.harness.results.records import RunResult, write_atomically


def json_text(result: RunResult, summaries: Summaries) -> str:
    """The results file itself: the record with its summaries (results/records.py's JSON mapping), indented, and
    the run's cells against its precision target (analysis/precision.py), derived like the summaries."""
    data = result.to_dict(summaries)
    reach = precision_reach(result)
    if reach is not None:
        data["precision_reach"] = asdict(reach) | {"share": round(reach.share, 4), "goal_met": reach.goal_met,
                                                   "sentence": reach.sentence()}
    return json.dumps(data, indent=1)


def terminal_text(result: RunResult, summaries: Summaries, source: str | None = None) -> str:
    """The terminal's tables as plain text (no colour), naming source, the file the run was read from, if given."""
    return terminal.render_plain(terminal.terminal_report(result, summaries, source))


# The one table of formats: one exporter for each of FORMATS (what `run --format` and `report --format` print; the
# parser reads FORMATS without importing the exporters), and SAVED_FORMATS, a run's files.
EXPORTERS: dict[str, Callable[[RunResult, Summaries], str]] = {
    "terminal": terminal_text, "md": render_markdown, "csv": render_csv, "json": json_text, "html": render_html}


def rendered(result: RunResult, summaries: Summaries, output_format: str, source: str | None = None) -> str:
    """The run in one format, as text ending in a newline (terminal: the plain-text layout, naming source)."""
    export = partial(terminal_text, source=source) if output_format == "terminal" else EXPORTERS[output_format]
    text = export(result, summaries)
    return text if text.endswith("\n") else text + "\n"


def save(result: RunResult, paths: ResultPaths) -> None:
    """Rewrite every file of the run (paths.files(): its own and latest.*, each format of SAVED_FORMATS): at the
    end of the rounds and on an interruption, so that nothing measured is lost."""
    summaries = summarize_run(result)
    texts = {kind: EXPORTERS[kind](result, summaries) for kind in SAVED_FORMATS}
    for path in paths.files():
        write_atomically(path, texts[path.suffix[1:]])


def draw_figures(result: RunResult, summaries: Summaries, paths: ResultPaths) -> list[Path]:
    """PNG figures next to the results; a plotting failure is reported, never fatal (the results are saved)."""
    try:
        from pingpong.harness.report import plots  # matplotlib: imported only when figures are drawn
        return plots.write_figures(result, summaries, paths.json.with_suffix(""))
    except Exception as exc:  # matplotlib missing or failing must not cost the run its exit code
        print(f"figures not drawn: {type(exc).__name__}: {exc}", file=sys.stderr)
        return []
