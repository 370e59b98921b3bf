"""The matrix: every server x client cell measured round-robin with progress on stderr, once or per sweep point."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from pingpong.harness.analysis import host_pace, published
from pingpong.harness.analysis.published import Setup
from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.commands.report import show
from pingpong.harness.measure.engine import measure_rounds
from pingpong.harness.measure.host_wakeup import measure_host_wakeup
from pingpong.harness.measure.local import LocalMeasurer
from pingpong.harness.measure.measurer import Measurer
from pingpong.harness.measure.pacer import raw_windows
from pingpong.harness.report import sweep
from pingpong.harness.report.exporters import draw_figures, save
from pingpong.harness.results.files import SAVED_FORMATS, ResultPaths, resume, save_record
from pingpong.harness.results.records import Cell, RunResult, load, write_atomically
from pingpong.harness.results.stored import json_stem, stored_path
from pingpong.harness.settings.catalog import PROJECT_ROOT, availability_record, skip_reason
from pingpong.harness.settings.cell import CellSettings, our_cpus
from pingpong.harness.settings.configuration import RunConfiguration
from pingpong.harness.settings.environment import describe_environment
from pingpong.harness.settings.usage import UsageError
from pingpong.harness.system import host_sentinel, wakeup_trace
from pingpong.harness.system.stop_signals import EXIT_INTERRUPTED

EXIT_OK, EXIT_CELL_FAILED = 0, 1


def paced_class() -> str | None:
    """The sentinel class this host would pace a window on one CPU in (analysis/host_pace.py), for --resume; None
    when no window would be paced (the raw-windows switch) or it cannot be told."""
    if raw_windows():
        return None
    granted = host_sentinel.real_time_granted(sorted(our_cpus())[-1])
    return None if granted is None else host_pace.REAL_TIME if granted else host_pace.ORDINARY


def run_points(configuration: RunConfiguration, measurer: Measurer | None = None,
               topology: dict[str, Any] | None = None, profiling: Callable[[RunResult, ResultPaths], None] | None = None
               ) -> int:
    """Measure every point of the run (one point: the matrix; several: a dimension) in the same rounds.

    topology: --cluster's hosts, the link between them and the raw-TCP floor across it, recorded in each run.
    profiling: run --profile's step (commands/run_profiles.py), after the rounds of a one-point run that was not
    interrupted; the run is saved again with what it adds."""
    points = configuration.points
    wakeup_trace.remove_stale()  # a run killed while it counted left its instance, its events on: not for ours
    if wakeup_trace.wanted():
        if (why_not := wakeup_trace.available()) is not None:
            raise UsageError(f"{wakeup_trace.ENV}=1: {why_not}")
        if not raw_windows():
            print(f"note: {wakeup_trace.ENV}=1 with the slices on counts each continue of a paused side as a wakeup; "
                  f"PINGPONG_RAW_WINDOWS=1 leaves them out", file=sys.stderr)
    if configuration.resume and len(points) > 1:
        raise UsageError("--resume continues one matrix, not a run over a list of settings")
    swept = sweep.swept_dimensions(list(points))
    runs, paths = [], []
    for point in points:
        run = new_run(configuration, configuration.settings_at(point), topology)
        runs.append(run)
        paths.append(ResultPaths.for_run(configuration.results_dir, runs[0].started_at,
                                         sweep.point_suffix(point, swept) if len(points) > 1 else ""))
    if configuration.resume:
        runs[0], paths[0] = resume(configuration.resume, runs[0], configuration.results_dir,
                                   paced_class())
    if measurer is None and configuration.measures_host_figure():
        host = measure_host_wakeup(list(configuration.implementations), configuration.settings_at(points[0]),
                                   PROJECT_ROOT)
        if host is not None:
            print(f"host: {host.sentence()}", file=sys.stderr, flush=True)
            for run in runs:
                run.host_wakeup = host.to_json()
    for run, path in zip(runs, paths):
        save_record(run, path)
    measure_rounds(configuration, runs, paths, measurer or LocalMeasurer())
    if profiling is not None and len(points) == 1 and not runs[0].interrupted:
        profiling(runs[0], paths[0])
        save(runs[0], paths[0])
    if len(points) == 1:
        summaries = summarize_run(runs[0])
        show(runs[0], summaries, configuration.output_format, str(paths[0].json))
        print(f"results: {paths[0].json.with_suffix('')}.{{{','.join(SAVED_FORMATS)}}} (also latest.*; open "
              f"{paths[0].html} in a browser)", file=sys.stderr)
        figures = draw_figures(runs[0], summaries, paths[0]) if configuration.figures else []
        if figures:
            print(f"figures: {', '.join(str(path) for path in figures)}", file=sys.stderr)
    else:
        for point, run, path in zip(points, runs, paths):
            if configuration.figures:
                draw_figures(run, summarize_run(run), path)
        report_sweep(runs[0].started_at, list(zip(points, runs, paths)), configuration)
    return exit_code(runs)


def exit_code(results: list[RunResult]) -> int:
    if any(result.interrupted for result in results):
        return EXIT_INTERRUPTED
    failed = any(cell.status in ("failed", "partial") for result in results for cell in result.cells)
    return EXIT_CELL_FAILED if failed else EXIT_OK


def write_beside_published(setup: Setup, results_file: Path) -> tuple[Path, str]:
    """The published table beside a saved run's medians, written as <run>-<setup>.json and .md next to it (for
    latest.json: next to, and naming, its run's own stamped file, since latest.json is the next run's); returns the
    files' stem and the Markdown."""
    source = stored_path(results_file)
    run = load(source)
    name, shown = json_stem(source), source.name
    if name == "latest":
        name = run.started_at.replace(":", "-").replace("+00-00", "Z")
        shown = f"{name}.json"
    measured = {key: summary.roundtrips_per_s.median if summary.roundtrips_per_s else None
                for key, summary in summarize_run(run).items()}
    stem = source.parent / f"{name}-{setup.name}"
    table = published.beside(setup, measured)
    table["results_file"] = shown
    markdown = published.render_markdown(table, shown)
    write_atomically(stem.with_suffix(".json"), json.dumps(table, indent=1))
    write_atomically(stem.with_suffix(".md"), markdown)
    return stem, markdown


def report_sweep(started: str, results, configuration: RunConfiguration) -> None:
    """The sweep's index (JSON), its table (Markdown, also printed) and its curves (PNG)."""
    members = [(point, result, summarize_run(result), paths.json.name) for point, result, paths in results]
    stem = configuration.results_dir / (started.replace(":", "-").replace("+00-00", "Z") + "-sweep")
    index = sweep.sweep_index(members)
    write_atomically(stem.with_suffix(".json"), json.dumps(index, indent=1))
    markdown = sweep.render_sweep_markdown(index)
    write_atomically(stem.with_suffix(".md"), markdown)
    if configuration.output_format == "json":
        print(json.dumps(index, indent=1))
    else:
        print(markdown.rstrip("\n"))
    print(f"sweep: {stem}.json and {stem}.md", file=sys.stderr)
    if not configuration.figures:
        return
    try:
        from pingpong.harness.report import plots
        figures = plots.write_sweep_figure(index, stem)
        if figures:
            print(f"figures: {', '.join(str(path) for path in figures)}", file=sys.stderr)
    except Exception as exc:
        print(f"figures not drawn: {type(exc).__name__}: {exc}", file=sys.stderr)


def new_run(configuration: RunConfiguration, settings: CellSettings,
            topology: dict[str, Any] | None = None) -> RunResult:
    """An empty result for one matrix: its configuration recorded, every cell pending or skipped with its reason."""
    cells = [Cell(server=s.name, client=c.name, skipped=skip_reason(s, c, settings))
             for s in configuration.servers for c in configuration.clients]
    return RunResult(started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     command_line=list(configuration.command_line), configuration=configuration.recorded(settings),
                     environment={**describe_environment(PROJECT_ROOT),
                                  "package_environments": configuration.package_environments},
                     implementations=availability_record(list(configuration.implementations)), cells=cells,
                     topology=topology)
