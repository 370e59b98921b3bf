"""The round engine's logic without sockets: order, one server per round, rounds alike within the budget.

The measurements are a fake (rates drawn from a seeded generator, a fake clock); everything else is the engine.
"""

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from benchmarks.round_rule_coverage import FakeClock, QuietProgress  # the engine's fakes, shared with the simulation
from pingpong.harness.measure import engine, rounds
from pingpong.harness.measure.boundary import Outcome, failed
from pingpong.harness.measure.rounds import Unit, estimated_round_s
from pingpong.harness.results.files import ResultPaths
from pingpong.harness.results.records import Attempt, Cell, RunResult
from pingpong.harness.settings import round_policy
from pingpong.harness.settings.configuration import RunConfiguration
from pingpong.harness.settings.round_policy import RoundPolicy
from tests.test_orchestration_logic import SETTINGS, implementation

POINT = {"loop": "auto", "compression": "default", "tls": False, "payload_size": 4, "payload_kind": "text-ascii",
         "pairs": 1}


@dataclass
class FakeServer:
    """A ServerHandle (measure/measurer.py) that never exits."""

    name: str
    pid: int
    problem: Outcome | None = None
    runtime: str | None = None

    def alive(self):
        return True

    def exit_code(self):
        return None

    def stderr_tail(self):
        return ""


@dataclass
class FakeMeasurer:
    """Rates around 1000/s with a relative spread per client name; every attempt takes 1 s of the fake clock."""

    clock: FakeClock
    spread: dict[str, float]
    not_ready: set[str] = field(default_factory=set)
    starts: list[tuple[str, int]] = field(default_factory=list)  # (server, round) of every server start
    order: list[tuple[int, str, str]] = field(default_factory=list)  # (round, server, client) of every attempt
    upcoming: list[tuple[str, list | None]] = field(default_factory=list)  # (server, upcoming) of every start
    generator: random.Random = field(default_factory=lambda: random.Random(7))
    round_now: int = 0
    attempt_s_in_round: dict[int, float] = field(default_factory=dict)  # rounds whose attempts take more than 1 s

    def start(self, server, settings, work_dir, upcoming=None):
        self.upcoming.append((server.name, upcoming))
        self.clock.now += 0.5
        self.starts.append((server.name, len(self.order)))
        problem = failed("not-ready", "never answered") if server.name in self.not_ready else None
        return FakeServer(server.name, 1000 + len(self.starts), problem)

    def attempt_on(self, started, client, settings, round_number):
        self.order.append((round_number, started.name, client.name))
        if started.problem:
            return Attempt(repeat=round_number, status=started.problem.status,
                           reason=started.problem.reason, started_at="t", server_pid=started.pid)
        self.clock.now += self.attempt_s_in_round.get(round_number, 1.0)
        rate = 1000 * (1 + self.generator.gauss(0, self.spread.get(client.name, 0.001)))
        return Attempt(repeat=round_number, status="ok", reason=None, started_at="t", roundtrips=int(rate),
                       elapsed_s=1.0, roundtrips_per_s=rate, server_pid=started.pid)

    def stop(self, started):
        return 0

    def fresh_attempt(self, server, client, settings, round_number):
        started = self.start(server, settings, None)
        return self.attempt_on(started, client, settings, round_number)


def run_engine(tmp_path: Path, policy: RoundPolicy, spread: dict[str, float], servers=("s1", "s2"),
               clients=("c1", "c2", "c3"), not_ready=(), attempt_s_in_round=None):
    server_list = [implementation("server", name) for name in servers]
    client_list = [implementation("client", name) for name in clients]
    configuration = RunConfiguration(
        settings=SETTINGS, points=(POINT,), rounds=policy, servers=tuple(server_list), clients=tuple(client_list),
        implementations=(), manifests=(), python_packages=None, node_packages=None, package_environments={},
        results_dir=tmp_path, output_format="md", resume=None, command_line=())
    run = RunResult(started_at="2026-01-01T00:00:00+00:00", command_line=[], environment={},
                    configuration=configuration.recorded(SETTINGS), implementations={},
                    cells=[Cell(s, c) for s in servers for c in clients])
    tmp_path.mkdir(parents=True, exist_ok=True)
    clock = FakeClock()
    measurer = FakeMeasurer(clock, spread, set(not_ready), attempt_s_in_round=attempt_s_in_round or {})
    paths = ResultPaths.for_run(tmp_path, run.started_at)
    engine.measure_rounds(configuration, [run], [paths], measurer, QuietProgress, clock)
    return run, measurer, clock, paths


def test_one_server_process_per_server_and_round_serves_every_client_in_shuffled_order(tmp_path):
    policy = RoundPolicy(min_rounds=4, max_rounds=4, precision=None, budget_s=None, seed=11)
    run, measurer, _, paths = run_engine(tmp_path, policy, {})
    assert len(measurer.starts) == 2 * 4  # two servers, four rounds
    assert all(len(cell.attempts) == 4 for cell in run.cells)
    assert all([a.repeat for a in cell.attempts] == [1, 2, 3, 4] for cell in run.cells)
    orders = {tuple((s, c) for r, s, c in measurer.order if r == round_number) for round_number in (1, 2, 3, 4)}
    assert len(orders) > 1  # shuffled from round to round
    again = run_engine(tmp_path / "again", policy, {})[1]
    assert again.order == measurer.order  # and reproducible from the seed
    other = run_engine(tmp_path / "other", RoundPolicy(4, 4, None, None, seed=12), {})[1]
    assert other.order != measurer.order
    for round_number in (1, 2, 3, 4):  # each server's clients follow its start, together
        servers_in_order = [s for r, s, c in measurer.order if r == round_number]
        assert servers_in_order in (["s1"] * 3 + ["s2"] * 3, ["s2"] * 3 + ["s1"] * 3)
    assert run.configuration["rounds"]["seed"] == 11 and run.rounds_outcome.stopped_by == "rounds"
    assert not {"stopped_by", "measuring_s", "server_start_s"} & set(run.configuration["rounds"])  # settings stay
    assert paths.json.exists() and paths.latest_markdown.exists()
    assert {a.server_exit_code for cell in run.cells for a in cell.attempts} == {0}


def test_every_cell_gets_the_same_rounds_whatever_its_values_up_to_max_rounds(tmp_path):
    """A cell precise after the minimum and a cell at 20% noise get the same rounds: values decide none."""
    policy = RoundPolicy(min_rounds=6, max_rounds=12, precision=0.03, budget_s=None, seed=1)
    run, measurer, _, _ = run_engine(tmp_path, policy, {"c1": 0.001, "c2": 0.001, "c3": 0.2})
    assert {len(cell.attempts) for cell in run.cells} == {12}
    every_cell = {(s, c) for s in ("s1", "s2") for c in ("c1", "c2", "c3")}
    assert {(s, c) for r, s, c in measurer.order if r == 12} == every_cell
    assert run.rounds_outcome.stopped_by == "max-rounds"
    assert run.configuration["rounds"]["rule"] == "alike-within-budget"


def test_the_budget_stops_extra_rounds_but_never_the_minimum(tmp_path):
    """6 cells x 1 s + 2 starts x 0.5 s = 7 s a round: after 6 rounds (42 s), 45 s holds no 7th; 56 s holds two more."""
    policy = RoundPolicy(min_rounds=6, max_rounds=50, precision=0.03, budget_s=45.0, seed=1)
    run, measurer, clock, _ = run_engine(tmp_path, policy, {"c1": 0.2, "c2": 0.2, "c3": 0.2})
    assert {len(cell.attempts) for cell in run.cells} == {6}
    assert clock.now <= 45.0 + 1e-9
    assert run.rounds_outcome.stopped_by == "budget"
    roomy = RoundPolicy(min_rounds=6, max_rounds=50, precision=0.03, budget_s=56.0, seed=1)
    run, _, clock, _ = run_engine(tmp_path / "roomy", roomy, {"c1": 0.001, "c2": 0.2, "c3": 0.2})
    assert {len(cell.attempts) for cell in run.cells} == {8} and clock.now <= 56.0
    tight = RoundPolicy(min_rounds=6, max_rounds=50, precision=0.03, budget_s=5.0, seed=1)
    run, _, clock, _ = run_engine(tmp_path / "tight", tight, {"c1": 0.2})
    assert all(len(cell.attempts) == 6 for cell in run.cells) and clock.now > 5.0


def test_a_round_that_no_longer_fits_is_not_started_for_some_cells_only(tmp_path):
    """Round 7 runs slow (1.5 s per attempt): the 6 s left cannot hold round 8 for all six cells, so no cell gets it
    (a part of a round would give the cells different counts, chosen by the order of the plan)."""
    policy = RoundPolicy(min_rounds=6, max_rounds=20, precision=0.03, budget_s=56.0, seed=1)
    run, measurer, clock, _ = run_engine(tmp_path, policy, {"c1": 0.2, "c2": 0.2, "c3": 0.2},
                                         attempt_s_in_round={7: 1.5, 8: 1.5})
    assert {len(cell.attempts) for cell in run.cells} == {7}
    assert clock.now <= 56.0 and run.rounds_outcome.stopped_by == "budget"


def test_a_cell_that_failed_every_attempt_gets_only_the_minimum(tmp_path):
    policy = RoundPolicy(min_rounds=3, max_rounds=5, precision=0.03, budget_s=None, seed=3)
    run, _, _, _ = run_engine(tmp_path, policy, {}, not_ready={"s1"})
    assert {len(cell.attempts) for cell in run.cells if cell.server == "s1"} == {3}
    assert {len(cell.attempts) for cell in run.cells if cell.server == "s2"} == {5}


def test_a_server_that_is_never_ready_is_given_up_after_two_starts(tmp_path):
    policy = RoundPolicy(min_rounds=4, max_rounds=4, precision=None, budget_s=None, seed=3)
    run, measurer, _, _ = run_engine(tmp_path, policy, {}, not_ready={"s1"})
    assert [s for s, _ in measurer.starts].count("s1") == 2
    for cell in run.cells:
        assert len(cell.attempts) == 4
        if cell.server == "s1":
            assert all(a.status == "not-ready" for a in cell.attempts)
            assert "failed to become ready 2 times in a row" in cell.attempts[-1].reason
        else:
            assert all(a.ok for a in cell.attempts)


def test_fresh_server_mode_starts_one_server_per_attempt(tmp_path):
    policy = RoundPolicy(min_rounds=2, max_rounds=2, precision=None, budget_s=None, seed=3, fresh_server=True)
    run, measurer, _, _ = run_engine(tmp_path, policy, {})
    assert len(measurer.starts) == len(measurer.order) == 12


def test_round_plan_groups_by_server_settings_and_is_a_permutation():
    units = [Unit(point, server, client) for point in (0, 1) for server in ("a", "b") for client in ("x", "y")]
    loops = {0: "auto", 1: "uvloop"}
    plan = rounds.round_plan(units, lambda unit: (loops[unit.point],), seed=5, round_number=1)
    assert len(plan) == 4  # two servers x two loops: four server processes
    assert sorted(u for group in plan for u in group.units) == sorted(units)
    assert all(len({(u.server, loops[u.point]) for u in group.units}) == 1 for group in plan)


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("4.5m", 270), ("1h", 3600), ("1m30s", 90)])
def test_durations_parse(text, seconds):
    assert round_policy.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "-5s", "5x", "m", "soon"])
def test_bad_durations_are_refused(text):
    with pytest.raises(ValueError):
        round_policy.parse_duration(text)


def test_precision_is_a_percentage():
    assert round_policy.parse_precision("3%") == pytest.approx(0.03)
    assert round_policy.parse_precision("3") == pytest.approx(0.03)
    assert round_policy.parse_precision("0.5") == pytest.approx(0.005)
    for text in ("0", "100", "-1", "x"):
        with pytest.raises(ValueError):
            round_policy.parse_precision(text)


def test_a_round_estimate_charges_each_server_process_its_own_start():
    """Two cells of sanic share one process (0.75 s to start, its first client's longer warmup included), bun's
    cell starts another (0.02 s); with a fresh server per attempt each cell pays its server's start."""
    units = [Unit(0, "sanic", "a"), Unit(0, "sanic", "b"), Unit(0, "bun", "a")]
    attempts = {unit: 1.0 for unit in units}
    starts = {"sanic": 0.75, "bun": 0.02}.get
    assert estimated_round_s(units, attempts, starts, lambda unit: (), False, 1.0) == pytest.approx(3.77)
    assert estimated_round_s(units, attempts, starts, lambda unit: (), True, 1.0) == pytest.approx(4.52)
    assert estimated_round_s(units, attempts, 0.5, lambda unit: (), False, 1.0) == pytest.approx(4.0)
