"""The matrix: every server x client cell measured round-robin with progress on stderr, once or per sweep point."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from pingpong.harness import sweep
from pingpong.harness.catalog import PROJECT_ROOT, availability_record, skip_reason
from pingpong.harness.configuration import RunConfiguration
from pingpong.harness.environment import describe_environment
from pingpong.harness.manifest import Implementation
from pingpong.harness.results import Attempt, Cell, RunResult, write_atomically
from pingpong.harness.report import show
from pingpong.harness.results_files import SAVED_FORMATS, ResultPaths, draw_figures, resume, save
from pingpong.harness.runner import CellSettings, run_attempt
from pingpong.harness.stop_signals import clear_stop_requests, raise_if_stop_requested
from pingpong.harness.summary import summarize_run
from pingpong.harness.usage import UsageError

EXIT_OK, EXIT_CELL_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def run_points(configuration: RunConfiguration) -> int:
    """The matrix once, or once per point of a sweep."""
    points = configuration.points
    if len(points) == 1:
        result, _ = run_matrix(configuration, replace(configuration.settings, **points[0]), print_table=True)
        return exit_code([result])
    if configuration.resume:
        raise UsageError("--resume continues one matrix, not a sweep; resume the sweep's unfinished point file")
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    results: list[tuple[dict[str, Any], RunResult, ResultPaths]] = []
    for index, point in enumerate(points, 1):
        print(f"sweep point {index}/{len(points)}: {sweep.describe_point(point)}", file=sys.stderr, flush=True)
        result, paths = run_matrix(configuration, replace(configuration.settings, **point), print_table=False,
                                   suffix=sweep.point_suffix(point))
        results.append((point, result, paths))
        if result.interrupted:
            break
    report_sweep(started, results, configuration)
    return exit_code([result for _, result, _ in results])


def exit_code(results: list[RunResult]) -> int:
    if any(result.interrupted for result in results):
        return EXIT_INTERRUPTED
    failed = any(cell.status in ("failed", "partial") for result in results for cell in result.cells)
    return EXIT_CELL_FAILED if failed else EXIT_OK


def run_matrix(configuration: RunConfiguration, settings: CellSettings, print_table: bool,
               suffix: str = "") -> tuple[RunResult, ResultPaths]:
    """Measure, save and draw one matrix with one set of settings (the whole run, or one point of a sweep)."""
    result = new_run(configuration, settings)
    result.environment["package_environments"] = configuration.package_environments
    paths = ResultPaths.for_run(configuration.results_dir, result.started_at, suffix)
    if configuration.resume:
        result, paths = resume(configuration.resume, result, configuration.results_dir)
    save(result, paths)
    measure_matrix(result, settings, list(configuration.servers), list(configuration.clients), configuration.repeat,
                   paths)
    summaries = summarize_run(result)
    if print_table:
        show(result, summaries, configuration.output_format, str(paths.json))
    print(f"results: {paths.json.with_suffix('')}.{{{','.join(SAVED_FORMATS)}}} (also latest.*; open "
          f"{paths.html} in a browser)", file=sys.stderr)
    figures = draw_figures(result, summaries, paths)
    if figures:
        print(f"figures: {', '.join(str(path) for path in figures)}", file=sys.stderr)
    return result, paths


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
    try:
        from pingpong.harness import plots
        figure = plots.write_sweep_figure(index, stem)
        if figure:
            print(f"figures: {figure}", file=sys.stderr)
    except Exception as exc:
        print(f"figures not drawn: {type(exc).__name__}: {exc}", file=sys.stderr)


def new_run(configuration: RunConfiguration, settings: CellSettings) -> RunResult:
    """An empty result for one matrix: its configuration recorded, every cell pending or skipped with its reason."""
    cells = [Cell(server=s.name, client=c.name, skipped=skip_reason(s, c, settings))
             for s in configuration.servers for c in configuration.clients]
    return RunResult(started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     command_line=list(configuration.command_line), configuration=configuration.recorded(settings),
                     environment=describe_environment(PROJECT_ROOT),
                     implementations=availability_record(list(configuration.implementations)), cells=cells)


NOT_READY_LIMIT = 2  # consecutive not-ready attempts after which a server's remaining attempts are not tried


def measure_matrix(result: RunResult, settings: CellSettings, servers: list[Implementation],
                   clients: list[Implementation], repeats: int, paths: ResultPaths) -> None:
    """Round-robin over cells, one repeat at a time, so slow drift of the machine spreads over every cell.

    Attempts already in the result (a resumed run) are not measured again. A server that fails to become ready
    NOT_READY_LIMIT times in a row has its remaining attempts recorded as not attempted, with the reason.
    """
    by_name = {("server", s.name): s for s in servers} | {("client", c.name): c for c in clients}
    plan = [(repeat, cell) for repeat in range(1, repeats + 1) for cell in result.cells
            if not cell.skipped and not any(attempt.repeat == repeat for attempt in cell.attempts)]
    print(plan_line(result, len(plan), repeats, settings), file=sys.stderr, flush=True)
    progress = Progress(len(plan), settings)
    not_ready_streak: dict[str, int] = {}
    given_up: dict[str, str] = {}
    try:
        for repeat, cell in plan:
            raise_if_stop_requested()  # a Ctrl-C whose KeyboardInterrupt was lost stops the run here
            if cell.server in given_up:
                attempt = Attempt(repeat=repeat, status="not-ready", reason=given_up[cell.server],
                                  started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
            else:
                progress.before(cell, repeat, repeats)
                attempt = run_attempt(by_name[("server", cell.server)], by_name[("client", cell.client)],
                                      settings, repeat, PROJECT_ROOT)
                streak = not_ready_streak.get(cell.server, 0) + 1 if attempt.status == "not-ready" else 0
                not_ready_streak[cell.server] = streak
                if streak >= NOT_READY_LIMIT:
                    given_up[cell.server] = (f"not attempted: server {cell.server} failed to become ready "
                                             f"{streak} times in a row (last: {attempt.reason})")
            cell.attempts.append(attempt)
            cell.attempts.sort(key=lambda a: a.repeat)
            progress.after(cell, attempt)
            save(result, paths)
    except KeyboardInterrupt:
        clear_stop_requests()
        result.interrupted = True
        print("\ninterrupted: saving what was measured", file=sys.stderr)
    finally:
        progress.finish()
        result.finished_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        save(result, paths)


SETUP_S = 2.0  # a rough cost per attempt beyond warmup + duration: start, probe, verify, stop


def plan_line(result: RunResult, attempts: int, repeats: int, settings: CellSettings) -> str:
    """What is about to be measured and for how long, roughly: said before the first attempt starts."""
    runnable = sum(1 for cell in result.cells if not cell.skipped)
    skipped = len(result.cells) - runnable
    seconds = int(attempts * (settings.warmup_s + settings.duration_s + SETUP_S))
    return (f"plan: {runnable} cell(s) to measure" + (f" ({skipped} skipped, reasons in the files)" if skipped else "")
            + f", {repeats} round(s) over them "
            f"-> {attempts} attempt(s) of {settings.warmup_s:g} s warmup + {settings.duration_s:g} s; "
            f"about {seconds // 60}m{seconds % 60:02d}s")


class Progress:
    """Current cell, cells left and ETA on stderr: a rich progress bar on a terminal, one line per attempt else."""

    def __init__(self, total: int, settings: CellSettings) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.estimate_s = settings.warmup_s + settings.duration_s + SETUP_S  # until real timings exist
        self.bar = None
        if sys.stderr.isatty() and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn

            self.bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                    TextColumn("ETA {task.fields[eta]}"), console=Console(stderr=True),
                                    transient=True)
            self.task = self.bar.add_task("starting", total=total, eta=self._eta())
            self.bar.start()

    def _eta(self) -> str:
        per_attempt = (time.monotonic() - self.started) / self.done if self.done else self.estimate_s
        seconds = int(per_attempt * (self.total - self.done))
        return f"{seconds // 60}m{seconds % 60:02d}s"

    def before(self, cell: Cell, repeat: int, repeats: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=f"{cell.server} × {cell.client}, repeat {repeat}/{repeats}",
                            eta=self._eta())

    def after(self, cell: Cell, attempt) -> None:
        self.done += 1
        outcome = (f"{attempt.roundtrips_per_s:,.0f} roundtrips/s" if attempt.ok
                   else f"{attempt.status}: {attempt.reason}")
        if self.bar is None:
            print(f"[{self.done}/{self.total}] {cell.server} server × {cell.client} client, repeat {attempt.repeat}: "
                  f"{outcome}; ETA {self._eta()}", file=sys.stderr, flush=True)
            return
        if not attempt.ok:
            self.bar.console.print(f"{cell.server} × {cell.client} repeat {attempt.repeat}: {outcome}",
                                   style="red", markup=False, highlight=False)
        self.bar.update(self.task, advance=1, eta=self._eta())

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.stop()
