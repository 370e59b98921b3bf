"""What a flagged cell costs beyond a healthy pair, in µs per roundtrip: pure functions of one run.

A ratio to another cell moves with everything the two share (on a host where a cross-CPU wakeup costs 35 µs, the
deflate cells read 0.68-0.71x of sanic x node-ws; on a 16-core host 0.42-0.48x), while the time the cause adds to
each roundtrip stays put (+90 to +126 µs on both). So each flagged cell is set against a healthy pair: the same
client with an unflagged WebSocket server, preferably of the flagged server's runtime (the same client and the same
kind of server, without the cause), the fastest such; the difference is the cell's roundtrip time less the pair's,
per round (both measured in it), with the order-statistic interval of its median (costs.difference_by_round).
"""

from __future__ import annotations

from dataclasses import dataclass

from pingpong.harness.analysis.costs import difference_by_round, roundtrip_us_by_round
from pingpong.harness.analysis.stats import Difference
from pingpong.harness.results.records import RunResult

Key = tuple[str, str]  # (server, client)


@dataclass(frozen=True)
class Excess:
    """A flagged cell's roundtrip time beyond its healthy pair's, µs per roundtrip, with its interval."""

    healthy: Key  # the (server, client) it is set against
    difference: Difference

    def text(self) -> str:
        """'+107 µs per roundtrip over sanic × node-ws (interval +95 to +121, 95% CI ...)'."""
        value = self.difference
        interval = (f" (interval {value.low:+,.0f} to {value.high:+,.0f}, {value.label()})"
                    if value.low is not None else "")
        return f"{value.value:+,.0f} µs per roundtrip over {self.healthy[0]} × {self.healthy[1]}{interval}"


def healthy_pair(cell: Key, summaries: dict, runtimes: dict[Key, str | None],
                 contenders: set[str]) -> Key | None:
    """The pair a flagged cell is set against: the same client, a measured unflagged server among contenders (not
    a raw-TCP floor), of the cell's server's runtime when there is one, the fastest; None when there is none."""
    server, client = cell
    candidates = [(other, summary.roundtrips_per_s.median) for (other, column), summary in summaries.items()
                  if column == client and other != server and other in contenders and summary.measured
                  and not summary.flags]
    if not candidates:
        return None
    same_runtime = [c for c in candidates if runtimes.get(("server", c[0])) == runtimes.get(("server", server))]
    best = max(same_runtime or candidates, key=lambda candidate: candidate[1])
    return best[0], client


def flagged_excess(run: RunResult, summaries: dict, runtimes: dict[Key, str | None],
                   contenders: set[str]) -> dict[Key, Excess]:
    """Each flagged cell's excess over its healthy pair, where it has one that shares a round with it."""
    found: dict[Key, Excess] = {}
    for key, summary in summaries.items():
        if not summary.flags or not summary.measured:
            continue
        healthy = healthy_pair(key, summaries, runtimes, contenders)
        if healthy is None:
            continue
        difference = difference_by_round(roundtrip_us_by_round(run.cell(*key)),
                                         roundtrip_us_by_round(run.cell(*healthy)))
        if difference is not None:
            found[key] = Excess(healthy, difference)
    return found
