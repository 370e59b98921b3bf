"""The order of a run's measurements, in rounds: pure functions (engine.py measures).

A unit is one cell at one point of the run's dimensions (a run without lists in its settings has one point). A
round measures each of its units once. Units are grouped by the server process they need: the server's name and the
settings it is started with (loop, compression, TLS); within a round one process serves its group, each client a
new process in a room of its own (or, with fresh_server, a new server process per unit). The groups, and the units
within a group, are shuffled every round by a generator seeded from the run's seed and the round's number: random,
so no cell always follows the same neighbour, and reproducible from the recorded seed.

After min_rounds, a unit gets more rounds only while its median's interval is wider than the precision asked
for, and only as a block that can pay off: the order-statistic interval of a rate sets aside one more value only at
certain counts (the slowest at 8 rounds, then the fastest too at 9, two slowest at 11, ...: stats.py, "disturbed
side"); a round short of that can only widen the interval.
So the units nearest the precision by their *next* interval get the rounds up to that count, as many units as the
budget can take through that count, none beyond max_rounds.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Callable, Iterable

from pingpong.harness.analysis.stats import RATE_DISTURBED_SIDE, order_statistic_ranks
from pingpong.harness.settings.round_policy import RoundPolicy

# The settings a server process is started with: units that differ in one of these need another process.
SERVER_DIMENSIONS = ("loop", "compression", "tls", "malloc")


@dataclass(frozen=True, order=True)
class Unit:
    """One cell at one point of the run (point: its index in the run's points)."""

    point: int
    server: str
    client: str


@dataclass(frozen=True)
class ServerGroup:
    """The units one server process serves in a round, in the order they are measured."""

    server: str
    server_key: tuple  # the point's SERVER_DIMENSIONS values: one process per distinct key
    units: tuple[Unit, ...]


def round_plan(units: Iterable[Unit], server_key: Callable[[Unit], tuple], seed: int,
               round_number: int) -> list[ServerGroup]:
    """This round's server groups and their units, both shuffled with a generator of (seed, round_number)."""
    generator = random.Random(f"{seed}/{round_number}")
    groups: dict[tuple[str, tuple], list[Unit]] = {}
    for unit in units:
        groups.setdefault((unit.server, server_key(unit)), []).append(unit)
    plan = []
    for (server, key), members in sorted(groups.items(), key=lambda item: (item[0][0], repr(item[0][1]))):
        ordered = sorted(members, key=lambda unit: (unit.point, unit.client))
        generator.shuffle(ordered)
        plan.append(ServerGroup(server, key, tuple(ordered)))
    generator.shuffle(plan)
    return plan


def units_wanting_more(precision_of: dict[Unit, float | None], rounds_done: dict[Unit, int],
                       policy: RoundPolicy) -> list[Unit]:
    """The units that get another round beyond min_rounds, before the budget is considered.

    precision_of: each unit's reached precision (relative half-width of its median's interval), None when it has no
    interval (too few good attempts, or none at all: a failing unit gets no more rounds than the minimum).
    """
    if not policy.adaptive:
        return []
    return [unit for unit, reached in precision_of.items()
            if reached is not None and reached > policy.precision and rounds_done.get(unit, 0) < policy.max_rounds]


def set_aside(rounds: int) -> int:
    """How many values a rate's median interval at `rounds` rounds sets aside, both ends together."""
    low_rank, high_rank, _ = order_statistic_ranks(rounds, disturbed_side=RATE_DISTURBED_SIDE)
    return low_rank + high_rank - 2


def next_step(rounds: int) -> int:
    """The fewest rounds beyond `rounds` whose rate interval sets aside one more value (8 for 6 and 7: the slowest;
    9 for 8: the fastest too; 11 for 9 and 10): before it, another round keeps the same order statistics and can
    only widen them."""
    more = rounds + 1
    while set_aside(more) <= set_aside(rounds):
        more += 1
    return more


def predicted_precision(values: list[float], rounds: int) -> float | None:
    """The precision the median's interval would have at `rounds` rounds if the new values fell among these: these
    values without the ones that interval sets aside at each end. None without enough values."""
    low_rank, high_rank, _ = order_statistic_ranks(rounds, disturbed_side=RATE_DISTURBED_SIDE)
    if len(values) < low_rank + high_rank:
        return None
    ordered = sorted(values)
    median = statistics.median(ordered)
    if median <= 0:
        return None
    return max(median - ordered[low_rank - 1], ordered[-high_rank] - median) / median


ServerStart = float | Callable[[str], float]  # seconds per server start: one figure, or one per server name


def plan_extra_rounds(wanting: dict[Unit, list[float]], attempt_s: dict[Unit, float], server_start_s: ServerStart,
                      server_key: Callable[[Unit], tuple], policy: RoundPolicy, default_attempt_s: float,
                      remaining_s: float | None) -> dict[Unit, int]:
    """Which units get more rounds, and up to how many: unit -> the round count it is taken to.

    wanting: the rates so far of each unit whose interval is still too wide (units_wanting_more). Each is taken to
    its next step, within max_rounds, nearest the precision by its predicted interval first; as many as the
    remaining budget takes through all their rounds (None: no budget, all of them).
    """
    candidates = []
    for unit, values in wanting.items():
        target = next_step(len(values))
        if target > policy.max_rounds:
            continue
        predicted = predicted_precision(values, target)
        candidates.append((math.inf if predicted is None else predicted, unit, target))
    candidates.sort(key=lambda candidate: (candidate[0], candidate[1]))
    chosen: dict[Unit, int] = {}
    for _, unit, target in candidates:
        trial = {**chosen, unit: target}
        if remaining_s is None or _plan_cost(trial, {u: len(wanting[u]) for u in trial}, attempt_s, server_start_s,
                                             server_key, policy.fresh_server, default_attempt_s) <= remaining_s:
            chosen = trial
    return chosen


def units_that_fit(units: list[Unit], attempt_s: dict[Unit, float], server_start_s: ServerStart,
                   server_key: Callable[[Unit], tuple], fresh_server: bool, default_attempt_s: float,
                   remaining_s: float) -> list[Unit]:
    """The units, taken in the order given (the most wanted first), that one round can measure within remaining_s:
    for a block of extra rounds whose next round no longer fits as a whole, since a unit left one round short of its
    step gains nothing from the rounds it had."""
    chosen: list[Unit] = []
    for unit in units:
        if estimated_round_s(chosen + [unit], attempt_s, server_start_s, server_key, fresh_server,
                             default_attempt_s) <= remaining_s:
            chosen.append(unit)
    return chosen


def _plan_cost(targets: dict[Unit, int], done: dict[Unit, int], attempt_s: dict[Unit, float],
               server_start_s: ServerStart,
               server_key: Callable[[Unit], tuple], fresh_server: bool, default_attempt_s: float) -> float:
    """Seconds to take every unit to its target: round by round, the units still short of theirs."""
    total = 0.0
    for extra in range(1, max(target - done[unit] for unit, target in targets.items()) + 1):
        members = [unit for unit, target in targets.items() if target - done[unit] >= extra]
        total += estimated_round_s(members, attempt_s, server_start_s, server_key, fresh_server, default_attempt_s)
    return total


def estimated_round_s(units: list[Unit], attempt_s: dict[Unit, float], server_start_s: ServerStart,
                      server_key: Callable[[Unit], tuple], fresh_server: bool, default_attempt_s: float) -> float:
    """How long a round over these units should take, from the times measured so far: their attempts, and a
    server start per server process (server_start_s: one figure for all, or a function of the server's name)."""
    start_of = server_start_s if callable(server_start_s) else (lambda server: server_start_s)
    servers = ([unit.server for unit in units] if fresh_server
               else [server for server, _ in {(unit.server, server_key(unit)) for unit in units}])
    return sum(attempt_s.get(unit, default_attempt_s) for unit in units) + sum(start_of(server) for server in servers)


