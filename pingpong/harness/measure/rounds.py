"""The order of a run's measurements, in rounds: pure functions (engine.py measures).

A unit is one cell at one point of the run's dimensions (a run without lists in its settings has one point). A
round measures each of its units once. Units are grouped by the server process they need: the server's name and the
settings it is started with (loop, compression, TLS); within a round one process serves its group, each client a
new process in a room of its own (or, with fresh_server, a new server process per unit). The groups, and the units
within a group, are shuffled every round by a generator seeded from the run's seed and the round's number: random,
so no cell always follows the same neighbour, and reproducible from the recorded seed.

After min_rounds, every unit that has measured at all gets one more round while a whole round of them fits in the
budget, up to max_rounds: the decision looks at the clock, never at a value, so every cell ends with the same number
of rounds, and that number does not depend on what its rates were. A rule that gives more rounds to the cells whose
interval is still wide, and stops a cell the first time it looks narrow, lets a cell stop early when its first
rounds all fell in its fast mode: its interval then covers the median less often than its label says
(tests/test_round_rule_coverage.py simulates this rule on the engine itself; benchmarks/round_rule_coverage.py
both, the old one from its last commit; docs/methodology.md quotes them).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Iterable


# The settings a server process is started with: units that differ in one of these need another process.
SERVER_DIMENSIONS = ("loop", "compression", "tls", "malloc", "young_generation", "workers", "placement",
                     "room_placement", "python")


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


ServerStart = float | Callable[[str], float]  # seconds per server start: one figure, or one per server name


def estimated_round_s(units: list[Unit], attempt_s: dict[Unit, float], server_start_s: ServerStart,
                      server_key: Callable[[Unit], tuple], fresh_server: bool, default_attempt_s: float) -> float:
    """How long a round over these units should take, from the times measured so far: their attempts, and a
    server start per server process (server_start_s: one figure for all, or a function of the server's name)."""
    start_of = server_start_s if callable(server_start_s) else (lambda server: server_start_s)
    servers = ([unit.server for unit in units] if fresh_server
               else [server for server, _ in {(unit.server, server_key(unit)) for unit in units}])
    return sum(attempt_s.get(unit, default_attempt_s) for unit in units) + sum(start_of(server) for server in servers)


