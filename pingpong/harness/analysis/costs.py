"""What WebSocket costs in a cell, held against the raw-TCP floors: pure functions of one run's attempts.

Every runtime has its floor (raw-tcp-python, raw-tcp-node, raw-tcp-bun; raw-tcp-c for native programs), the same
relay and ping-pong without WebSocket. A WebSocket server cannot be paired with a raw-TCP client, so the cost of
cell (S, C) is split by each side's CPU time per roundtrip:
- server part: S's server CPU per roundtrip in (S, C) over the server CPU per roundtrip of S's runtime's floor
  facing the C floor client, in (floor of S's runtime × raw-tcp-c);
- client part: C's client CPU per roundtrip in (S, C) over the client CPU per roundtrip of C's runtime's floor
  facing the C floor server, in (raw-tcp-c × floor of C's runtime);
- end to end: the rate of the same two runtimes without WebSocket, (floor of S's runtime × floor of C's
  runtime), over the cell's rate.
Ratios are taken within one run only, from per-round values (round = attempt.repeat), by ratio_by_round.
"""

from __future__ import annotations

from dataclasses import dataclass

from pingpong.harness.analysis.stats import Ratio, paired_ratio
from pingpong.harness.analysis.summary import cpu_us_per_roundtrip
from pingpong.harness.results.records import Cell, RunResult

REFERENCE_PEER_RUNTIME = "native"  # each side's floor is measured against the C floor on the other side

ByRound = dict[int, float]  # a figure of each good attempt of a cell, keyed by its round (attempt.repeat)


def ratio_by_round(numerator: ByRound, denominator: ByRound) -> Ratio | None:
    """numerator's figure over denominator's, with its interval: the one place that picks the statistic.

    Both are keyed by round: the median of the per-round ratios over the rounds both have, with its
    order-statistic interval (stats.paired_ratio); None when they share no round.
    """
    if not numerator.keys() & denominator.keys():
        return None
    return paired_ratio(numerator, denominator)


def cpu_by_round(cell: Cell | None, side: str) -> ByRound:
    """µs of one side's CPU per roundtrip in each good attempt that sampled it, by round ({} for no cell)."""
    values = {attempt.repeat: cpu_us_per_roundtrip(attempt, side) for attempt in (cell.attempts if cell else ())
              if attempt.ok}
    return {round_: value for round_, value in values.items() if value is not None}


def rates_by_round(cell: Cell | None) -> ByRound:
    """Roundtrips per second of each good attempt, by round ({} for no cell)."""
    return cell.rates_by_round() if cell else {}


@dataclass(frozen=True)
class CostSplit:
    """One WebSocket cell's cost against the floors. A figure is None when its floor cell has no good attempt (or
    no CPU sample); its floor, the (server, client) cell it is compared with, is then None too."""

    server: Ratio | None  # S's server CPU per roundtrip over its runtime's floor server's (facing raw-tcp-c)
    client: Ratio | None  # C's client CPU per roundtrip over its runtime's floor client's (facing raw-tcp-c)
    end_to_end: Ratio | None  # the rate of the same runtimes' floors, paired, over the cell's rate
    server_floor: tuple[str, str] | None
    client_floor: tuple[str, str] | None
    end_to_end_floor: tuple[str, str] | None


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
    reference_server = floor_name(run, "server", REFERENCE_PEER_RUNTIME)
    reference_client = floor_name(run, "client", REFERENCE_PEER_RUNTIME)

    costs = {}
    for (server, client), cell in measured.items():
        if servers.get(server, {}).get("protocol") != "websocket":
            continue
        floor_server = floor_name(run, "server", servers[server].get("runtime"))
        floor_client = floor_name(run, "client", clients.get(client, {}).get("runtime"))
        server_floor, client_floor = (floor_server, reference_client), (reference_server, floor_client)
        end_to_end_floor = (floor_server, floor_client)
        parts = [_compared(cpu_by_round(cell, "server"), cpu_by_round(measured.get(server_floor), "server"),
                           server_floor),
                 _compared(cpu_by_round(cell, "client"), cpu_by_round(measured.get(client_floor), "client"),
                           client_floor),
                 _compared(rates_by_round(measured.get(end_to_end_floor)), rates_by_round(cell), end_to_end_floor)]
        if any(ratio for ratio, _ in parts):
            (server_part, server_floor), (client_part, client_floor), (end_to_end, end_to_end_floor) = parts
            costs[(server, client)] = CostSplit(server_part, client_part, end_to_end, server_floor, client_floor,
                                                end_to_end_floor)
    return costs


def _compared(numerator: ByRound, denominator: ByRound, floor: tuple[str, str]):
    """The ratio and the floor cell it involves, or (None, None) when either side has no value."""
    ratio = ratio_by_round(numerator, denominator) if numerator and denominator else None
    return (ratio, floor) if ratio is not None else (None, None)
