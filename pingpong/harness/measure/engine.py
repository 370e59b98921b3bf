"""The measuring engine: rounds over every unit (cell x point), one server process per server group and round;
the minimum, then more rounds of every unit while a whole round fits in the budget. rounds.py decides the order;
this module runs it, records every attempt in its point's RunResult and saves as it goes."""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from pingpong.harness.measure.attempt_plan import jit_warmup_of
from pingpong.harness.measure.measurer import Measurer, ServerHandle
from pingpong.harness.measure.progress import Progress, plan_line
from pingpong.harness.measure.rounds import SERVER_DIMENSIONS, Unit, estimated_round_s, round_plan
from pingpong.harness.report.exporters import save
from pingpong.harness.report.formatting import rate_unit
from pingpong.harness.results.files import ResultPaths, save_record
from pingpong.harness.results.records import Attempt, Cell, RoundsOutcome, RunResult
from pingpong.harness.settings.cell import CellSettings, placement_of
from pingpong.harness.settings.configuration import RunConfiguration
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.settings.round_policy import RoundPolicy
from pingpong.harness.system import host_sentinel, processes, work_dirs
from pingpong.harness.system.stop_signals import clear_stop_requests, raise_if_stop_requested

NOT_READY_LIMIT = 2  # consecutive server starts that failed readiness after which a server is not tried again
FIRST_ATTEMPT_ESTIMATE_S = 0.3  # per attempt beyond warmup + duration, until a unit has been timed (client start,
SERVER_START_ESTIMATE_S = 0.6  # room probe, report) and per server start (readiness, verification, stop)


@dataclass
class Timings:
    """What the run has cost so far, to estimate whether another round fits in the budget."""

    attempt_s: dict[Unit, float] = field(default_factory=dict)  # last wall time of each unit's attempt
    server_start_s: list[float] = field(default_factory=list)  # each server start: readiness and verification
    # per server: each start plus the longer warmup its first client gets (a JIT server's: attempt_plan.with_jit_warmup),
    # which attempt_s leaves out; a round of few cells pays it once per server process
    group_start_s: dict[str, list[float]] = field(default_factory=dict)

    def server_start_estimate(self) -> float:
        return statistics.median(self.server_start_s) if self.server_start_s else SERVER_START_ESTIMATE_S

    def group_start_estimate(self, server: str) -> float:
        """What starting this server costs a round beyond its attempts' own times."""
        starts = self.group_start_s.get(server)
        return statistics.median(starts) if starts else self.server_start_estimate()


def measure_rounds(configuration: RunConfiguration, runs: list[RunResult], paths: list[ResultPaths],
                   measurer: Measurer, progress_factory: Callable | None = None,
                   clock: Callable[[], float] = time.monotonic) -> None:
    """Measure every unit of every point in rounds until the policy is satisfied; save whatever happens.

    Attempts already in the results (a resumed run) are not measured again. Ctrl-C or SIGTERM stops the rounds;
    what was measured is saved and the runs are marked interrupted.
    """
    policy = configuration.rounds
    points = configuration.points
    settings_of = [configuration.settings_at(point) for point in points]
    by_name = ({("server", s.name): s for s in configuration.servers}
               | {("client", c.name): c for c in configuration.clients})
    cells: dict[Unit, Cell] = {Unit(index, cell.server, cell.client): cell
                               for index, run in enumerate(runs) for cell in run.cells if not cell.skipped}
    units = list(cells)

    def server_key(unit: Unit) -> tuple:  # and where its attempts run (auto differs with the point's pairs)
        return (*(points[unit.point].get(name) for name in SERVER_DIMENSIONS), placement_of(settings_of[unit.point]))

    began = clock()
    timings = Timings()
    window_s = settings_of[0].warmup_s + settings_of[0].duration_s
    minimum = sum(1 for unit in units for r in range(1, policy.min_rounds + 1) if not has_round(cells[unit], r))
    print(plan_line(runs, len(units), minimum, policy, settings_of[0].warmup_s, settings_of[0].duration_s,
                    window_s + FIRST_ATTEMPT_ESTIMATE_S + SERVER_START_ESTIMATE_S / max(1, len(configuration.clients))),
          file=sys.stderr, flush=True)
    progress = (progress_factory or Progress)(minimum, window_s + FIRST_ATTEMPT_ESTIMATE_S)
    progress.unit = rate_unit(runs[0])
    state = EngineState(cells, by_name, settings_of, measurer, progress, timings, policy, clock)
    stopped_by = None
    try:
        round_number = 1
        while round_number <= policy.max_rounds:
            raise_if_stop_requested()
            if round_number <= policy.min_rounds:
                due = [unit for unit in units if not has_round(cells[unit], round_number)]
            else:
                # beyond the minimum: one more round of every unit that has measured at all, if the whole round
                # fits in the budget. The decision looks at times only, never at the values: every cell of the run
                # ends with the same number of rounds, fixed before any of its values is judged, so the interval
                # of its median covers as stated (rounds.py; tests/test_round_rule_coverage.py simulates it)
                due = units_measuring(cells, units)
                remaining = None if policy.budget_s is None else policy.budget_s - (clock() - began)
                if not due:
                    stopped_by = "rounds"
                    break
                if remaining is not None and estimated_round_s(
                        due, {u: timings.attempt_s.get(u, window_s + FIRST_ATTEMPT_ESTIMATE_S) for u in due},
                        timings.group_start_estimate, server_key, policy.fresh_server,
                        window_s + FIRST_ATTEMPT_ESTIMATE_S) > remaining:
                    stopped_by = "budget"
                    break
                progress.extend(len(due))
            if due:
                state.measure_round(round_number, round_plan(due, server_key, policy.seed, round_number))
                for run, path in zip(runs, paths):
                    save_record(run, path)
            round_number += 1
        else:
            stopped_by = "max-rounds" if policy.max_rounds > policy.min_rounds else "rounds"
    except KeyboardInterrupt:
        clear_stop_requests()
        for run in runs:
            run.interrupted = True
        stopped_by = "interrupted"
        print("\ninterrupted: saving what was measured", file=sys.stderr)
    finally:
        host_sentinel.close_all()  # the in-window pace's sentinels (measure/pacer.py)
        progress.finish()
        finished = datetime.now(timezone.utc).isoformat(timespec="seconds")
        outcome = RoundsOutcome(stopped_by=stopped_by, measuring_s=round(clock() - began, 1),
                                server_start_s=round(timings.server_start_estimate(), 3))
        for run, path in zip(runs, paths):  # what the run learned goes in its record; its settings stay as they were
            run.finished_at = finished
            run.rounds_outcome = outcome
            save(run, path)


def has_round(cell: Cell, round_number: int) -> bool:
    return any(attempt.repeat == round_number for attempt in cell.attempts)


def rounds_done(cell: Cell) -> int:
    return len({attempt.repeat for attempt in cell.attempts})


def units_measuring(cells: dict[Unit, Cell], units: list[Unit]) -> list[Unit]:
    """The units that get rounds beyond the minimum: those with at least one good attempt (a unit that has failed
    every attempt gets no more than the minimum). A choice by outcome, never by value."""
    return [unit for unit in units if cells[unit].rates()]


@dataclass
class EngineState:
    """What one run of the engine carries from server group to server group."""

    cells: dict[Unit, Cell]
    by_name: dict[tuple[str, str], Implementation]
    settings_of: list[CellSettings]
    measurer: Measurer
    progress: object
    timings: Timings
    policy: RoundPolicy
    clock: Callable[[], float]
    not_ready_streak: dict[str, int] = field(default_factory=dict)
    given_up: dict[str, str] = field(default_factory=dict)

    def record(self, unit: Unit, attempt: Attempt) -> None:
        cell = self.cells[unit]
        cell.attempts.append(attempt)
        cell.attempts.sort(key=lambda a: a.repeat)
        self.progress.after(cell, attempt)

    def measure_round(self, round_number: int, plan) -> None:
        for group in plan:
            raise_if_stop_requested()
            if group.server in self.given_up:
                for unit in group.units:
                    self.record(unit, not_attempted(round_number, self.given_up[group.server]))
                continue
            if self.policy.fresh_server:
                for unit in group.units:
                    raise_if_stop_requested()
                    self.progress.before(self.cells[unit], round_number)
                    began = self.clock()
                    attempt = self.measurer.fresh_attempt(self.by_name[("server", unit.server)],
                                                          self.by_name[("client", unit.client)],
                                                          self.settings_of[unit.point], round_number)
                    self.timings.attempt_s[unit] = self.clock() - began
                    self.note_readiness(unit.server, attempt)
                    self.record(unit, attempt)
            else:
                self.measure_group(round_number, group)

    def note_readiness(self, server: str, attempt: Attempt) -> None:
        streak = self.not_ready_streak.get(server, 0) + 1 if attempt.status == "not-ready" else 0
        self.not_ready_streak[server] = streak
        if streak >= NOT_READY_LIMIT:
            self.given_up[server] = (f"not attempted: server {server} failed to become ready {streak} times in a "
                                     f"row (last: {attempt.reason})")

    def measure_group(self, round_number: int, group) -> None:
        """One server process for the group's units; a server that dies meanwhile is started again."""
        server = self.by_name[("server", group.server)]
        server_settings = self.settings_of[group.units[0].point]
        pending = list(group.units)
        while pending:
            with work_dirs.temporary("pingpong-server-") as work:
                began = self.clock()
                upcoming = ([(self.by_name[("client", unit.client)], self.settings_of[unit.point], round_number)
                             for unit in pending] if self.policy.spawn_ahead else None)
                started = self.measurer.start(server, server_settings, Path(work), upcoming)
                start_s = self.clock() - began
                # the first client of a JIT server's process warms up this much longer (attempt_plan.with_jit_warmup)
                first_extra_s = jit_warmup_of(server.runtime, server_settings)
                self.timings.server_start_s.append(start_s)
                self.timings.group_start_s.setdefault(group.server, []).append(start_s + first_extra_s)
                measured: list[Unit] = []
                try:
                    for unit in pending:
                        raise_if_stop_requested()
                        if started.problem is None and not started.alive():
                            break  # the server died after its last attempt: start another for the rest
                        self.progress.before(self.cells[unit], round_number)
                        began = self.clock()
                        attempt = self.measurer.attempt_on(started, self.by_name[("client", unit.client)],
                                                           self.settings_of[unit.point], round_number)
                        if started.problem is None:  # a server that failed its checks costs no client time
                            self.timings.attempt_s[unit] = max(0.0, self.clock() - began
                                                               - (0.0 if measured else first_extra_s))
                        measured.append(unit)
                        self.record(unit, attempt)
                finally:
                    exit_code = self.measurer.stop(started)
                    self.finish_attempts(started, measured, exit_code)
                if started.problem is not None:  # not ready or not relaying: every unit of the group says so
                    self.note_readiness(group.server, self.cells[measured[-1]].attempts[-1] if measured else
                                        not_attempted(round_number, str(started.problem.reason)))
                else:
                    self.not_ready_streak[group.server] = 0
            pending = pending[len(measured):]
            if pending and not measured:  # a server that cannot serve one unit is not started forever
                for unit in pending:
                    self.record(unit, not_attempted(round_number, "not attempted: the server exited before it"))
                return

    def finish_attempts(self, started: ServerHandle, units: list[Unit], exit_code: int | None) -> None:
        """The server's exit code, and its stderr tail when it did not stop cleanly, on each attempt it served."""
        unclean = exit_code not in processes.CLEAN_EXIT_CODES
        tail = started.stderr_tail() if unclean else None
        for unit in units:
            cell = self.cells[unit]
            for index, attempt in enumerate(cell.attempts):
                if attempt.server_pid == started.pid and attempt.server_exit_code is None:
                    cell.attempts[index] = replace(
                        attempt, server_exit_code=exit_code,
                        server_stderr_tail=attempt.server_stderr_tail or tail)


def not_attempted(round_number: int, reason: str) -> Attempt:
    return Attempt(repeat=round_number, status="not-ready", reason=reason,
                   started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
