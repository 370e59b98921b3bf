"""What WebSocket costs in a cell, held against the raw-TCP floors: pure functions of one run's attempts.

Every runtime has its floor (raw-tcp-python, raw-tcp-node, raw-tcp-bun; raw-tcp-c for native programs), the same
relay and ping-pong without WebSocket. In a serial ping-pong the costs add up in time, so each figure is µs per
roundtrip beyond a floor's, all against one floor pair: the same two runtimes without WebSocket, (floor of S's
runtime × floor of C's runtime). A WebSocket server cannot be paired with a raw-TCP client, so the cost of cell
(S, C) is split by each side's CPU time per roundtrip:
- server part: S's server CPU µs per roundtrip in (S, C) less the floor pair's server CPU µs per roundtrip;
- client part: C's client CPU µs per roundtrip in (S, C) less the floor pair's client CPU µs per roundtrip;
- end to end: the cell's roundtrip time (1e6 / its rate, µs) less the floor pair's;
- other: end to end less both parts, so that the four add up: the time of the roundtrip neither side's CPU accounts
  for (wake-ups, the kernel's path between the two, waiting on a CPU), less the CPU time the two sides spent at the
  same time on their two CPUs (work off the roundtrip's path: a side's bookkeeping after a send while the other
  side works). Below 0 when that overlap grew more than the waiting did.
One floor pair for all three, so that the parts of one roundtrip are subtracted from the parts of another (a floor
measured against a faster peer, such as the C floor, spends less CPU per roundtrip than in the pair: the parts then
overstate what each side adds).
A part below 0 means the floor spent more CPU per roundtrip than the WebSocket side in that run. Differences are
taken within one run only, from per-round values (round = attempt.repeat), by difference_by_round.
"""

from __future__ import annotations

from dataclasses import dataclass

from pingpong.harness.analysis.stats import Difference, paired_difference, remainder
from pingpong.harness.analysis.summary import cpu_us_per_roundtrip
from pingpong.harness.results.records import Cell, RunResult

ByRound = dict[int, float]  # a figure of each good attempt of a cell, keyed by its round (attempt.repeat)


def difference_by_round(minuend: ByRound, subtrahend: ByRound) -> Difference | None:
    """minuend's figure less subtrahend's, with its interval: the one place that picks the statistic.

    Both are keyed by round: the median of the per-round differences over the rounds both have, with its
    order-statistic interval (stats.paired_difference); None when they share no round.
    """
    if not minuend.keys() & subtrahend.keys():
        return None
    return paired_difference(minuend, subtrahend)


def cpu_by_round(cell: Cell | None, side: str) -> ByRound:
    """µs of one side's CPU per roundtrip in each good attempt that sampled it, by round ({} for no cell)."""
    values = {attempt.repeat: cpu_us_per_roundtrip(attempt, side) for attempt in (cell.attempts if cell else ())
              if attempt.ok}
    return {round_: value for round_, value in values.items() if value is not None}


def roundtrip_us_by_round(cell: Cell | None) -> ByRound:
    """µs per roundtrip (1e6 / roundtrips per second) of each good attempt, by round ({} for no cell)."""
    rates = cell.rates_by_round() if cell else {}
    return {round_: 1e6 / rate for round_, rate in rates.items() if rate}


@dataclass(frozen=True)
class CostSplit:
    """One WebSocket cell's cost against the floors, µs per roundtrip: server + client + other = end_to_end. A figure
    is None when its floor cell has no good attempt (or no CPU sample); its floor, the (server, client) cell it is
    compared with, is then None too; other is None unless the three others are all there."""

    server: Difference | None  # S's server CPU µs per roundtrip less the floor pair's server's
    client: Difference | None  # C's client CPU µs per roundtrip less the floor pair's client's
    other: Difference | None  # end_to_end − server − client: what neither side's CPU accounts for
    end_to_end: Difference | None  # the cell's roundtrip µs (1e6 / rate) less the same runtimes' floor pair's
    server_floor: tuple[str, str] | None
    client_floor: tuple[str, str] | None
    end_to_end_floor: tuple[str, str] | None

    def parts(self) -> tuple[tuple[str, Difference | None], ...]:
        """(name, figure) in the order they add up: server, client, other, end_to_end."""
        return (("server", self.server), ("client", self.client), ("other", self.other),
                ("end_to_end", self.end_to_end))


def floor_name(run: RunResult, role: str, runtime: str | None) -> str | None:
    """The raw-TCP implementation of a runtime in a role, as the run records its manifest; None when there is none."""
    for name, entry in run.implementations.get(role, {}).items():
        if entry.get("protocol") == "raw-tcp" and entry.get("runtime") == runtime:
            return name
    return None


def websocket_costs(run: RunResult) -> dict[tuple[str, str], CostSplit]:
    """The cost split of every WebSocket cell with a good attempt and at least one of its figures."""
    servers, clients = run.implementations.get("server", {}), run.implementations.get("client", {})
    measured = {(cell.server, cell.client): cell for cell in run.cells if any(a.ok for a in cell.attempts)}

    costs = {}
    for (server, client), cell in measured.items():
        if servers.get(server, {}).get("protocol") != "websocket":
            continue
        floor_server = floor_name(run, "server", servers[server].get("runtime"))
        floor_client = floor_name(run, "client", clients.get(client, {}).get("runtime"))
        server_floor = client_floor = end_to_end_floor = (floor_server, floor_client)
        parts = [_compared(cpu_by_round(cell, "server"), cpu_by_round(measured.get(server_floor), "server"),
                           server_floor),
                 _compared(cpu_by_round(cell, "client"), cpu_by_round(measured.get(client_floor), "client"),
                           client_floor),
                 _compared(roundtrip_us_by_round(cell), roundtrip_us_by_round(measured.get(end_to_end_floor)),
                           end_to_end_floor)]
        if any(difference for difference, _ in parts):
            (server_part, server_floor), (client_part, client_floor), (end_to_end, end_to_end_floor) = parts
            other = (remainder(end_to_end, [server_part, client_part])
                     if server_part and client_part and end_to_end else None)
            costs[(server, client)] = CostSplit(server_part, client_part, other, end_to_end, server_floor,
                                                client_floor, end_to_end_floor)
    return costs


def _compared(minuend: ByRound, subtrahend: ByRound, floor: tuple[str, str]):
    """The difference and the floor cell it involves, or (None, None) when either side has no value."""
    difference = difference_by_round(minuend, subtrahend) if minuend and subtrahend else None
    return (difference, floor) if difference is not None else (None, None)
