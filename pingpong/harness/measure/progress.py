"""What a run says while it measures: the plan before the first attempt, then progress with an ETA."""

from __future__ import annotations

import sys
import time

from pingpong.harness.results.records import Cell, RunResult
from pingpong.harness.settings.round_policy import RoundPolicy


def plan_line(runs: list[RunResult], units: int, minimum_attempts: int, policy: RoundPolicy, warmup_s: float,
              duration_s: float, attempt_estimate_s: float) -> str:
    """What is about to be measured and for how long, roughly: said before the first attempt starts."""
    skipped = sum(1 for run in runs for cell in run.cells if cell.skipped)
    points = f" at {len(runs)} points" if len(runs) > 1 else ""
    seconds = int(minimum_attempts * attempt_estimate_s)
    text = (f"plan: {units} cell(s){points} to measure" + (f" ({skipped} skipped, reasons in the files)" if skipped
                                                             else "")
            + f", {policy.min_rounds} round(s) over them -> {minimum_attempts} attempt(s) of {warmup_s:g} s warmup + "
            f"{duration_s:g} s; about {seconds // 60}m{seconds % 60:02d}s")
    if policy.max_rounds > policy.min_rounds:
        budget = f"{policy.budget_s:g} s in all" if policy.budget_s is not None else "no budget"
        text += f"; then more rounds of every cell alike while a whole round fits (up to {policy.max_rounds}, {budget})"
    return text + f"; {'a fresh server per attempt' if policy.fresh_server else 'one server process per round'}, " \
                  f"order seed {policy.seed}"


class Progress:
    """Current cell, attempts left and ETA on stderr: a rich progress bar on a terminal, one line per attempt else.

    The total grows when rounds beyond the minimum are added (extend)."""

    def __init__(self, total: int, estimate_s: float) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.estimate_s = estimate_s  # per attempt, until real timings exist
        self.unit = "roundtrips/s"  # the workload's (set by the engine: deliveries/s for broadcast, ...)
        self.bar = None
        if sys.stderr.isatty() and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn
            from rich.progress import Progress as RichProgress
            from rich.progress import TextColumn

            self.bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                    TextColumn("ETA {task.fields[eta]}"), console=Console(stderr=True),
                                    transient=True)
            self.task = self.bar.add_task("starting", total=total, eta=self._eta())
            self.bar.start()

    def _eta(self) -> str:
        per_attempt = (time.monotonic() - self.started) / self.done if self.done else self.estimate_s
        seconds = int(per_attempt * max(0, self.total - self.done))
        return f"{seconds // 60}m{seconds % 60:02d}s"

    def extend(self, attempts: int) -> None:
        self.total += attempts
        if self.bar is not None:
            self.bar.update(self.task, total=self.total)

    def before(self, cell: Cell, round_number: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=f"{cell.server} × {cell.client}, round {round_number}",
                            eta=self._eta())

    def after(self, cell: Cell, attempt) -> None:
        self.done += 1
        outcome = (f"{attempt.roundtrips_per_s:,.0f} {self.unit}" if attempt.ok
                   else f"{attempt.status}: {attempt.reason}")
        if self.bar is None:
            print(f"[{self.done}/{self.total}] {cell.server} server × {cell.client} client, round {attempt.repeat}: "
                  f"{outcome}; ETA {self._eta()}", file=sys.stderr, flush=True)
            return
        if not attempt.ok:  # a set-aside attempt is no failure: its unit is measured again
            self.bar.console.print(f"{cell.server} × {cell.client} round {attempt.repeat}: {outcome}",
                                   style="yellow" if attempt.set_aside else "red", markup=False, highlight=False)
        self.bar.update(self.task, advance=1, eta=self._eta())

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.stop()
