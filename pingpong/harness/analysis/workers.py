"""--workers N: where each pair's members sat, and what one broker hop costs, measured inside one window.

With P ≥ 2 pairs on N ≥ 2 workers, the kernel's SO_REUSEPORT (or the cluster's primary) puts some pairs' two members
on one worker (local: each message is relayed in-process; it is published too, but nobody else delivers it) and
others' on two (split: every delivery comes back through Redis). Both kinds run in the same window of the same
attempt, so the machine's state is the same for both: the split pairs' rate over the local pairs' is a paired
comparison within the attempt. Over the rounds it is the median of the per-attempt ratios (and of the per-attempt
differences in µs per roundtrip) with the order-statistic interval of that median (stats.py).

pair_records() reads an attempt's placement from what the workers wrote (the members that joined each room on each
worker) and its pairs' roundtrips from the client report; workers_figures() summarizes a run's cells. Pure.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, fields
from typing import Any

from pingpong.harness.analysis.stats import Difference, Ratio, median_with_interval
from pingpong.harness.results.records import Attempt, RunResult

LOCAL, SPLIT = "local", "split"  # a pair's placement: both members on one worker, or on two
MEMBERS_PER_PAIR = 2


def process_pair_roundtrips(report: dict[str, Any]) -> list[tuple[list[int], float]] | None:
    """Each measuring client process's pairs' roundtrips in its window, with the window's length (s), in process
    order: from a merged report's per_process, or from a single process's report. None when a process with several
    pairs did not report them one by one (an open loop of the Python driver)."""
    found = []
    for entry in report.get("per_process") or [report]:
        if "per_pair_roundtrips" in entry:
            counts = list(entry["per_pair_roundtrips"])
        elif entry.get("pairs", 1) == 1:
            counts = [entry["roundtrips"]]
        else:
            return None
        found.append((counts, entry["elapsed_s"]))
    return found


def room_placements(per_worker: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """{room: (workers that held some of its members, members that joined it)}, from each worker's joined_per_room."""
    placements: dict[str, tuple[int, int]] = {}
    for record in per_worker:
        for room, joined in (record.get("joined_per_room") or {}).items():
            if joined:
                workers, members = placements.get(room, (0, 0))
                placements[room] = (workers + 1, members + joined)
    return placements


def placement_of(workers: int, members: int) -> str | None:
    """LOCAL, SPLIT, or None when the counts do not describe one pair (a worker did not write, a member missing)."""
    if members != MEMBERS_PER_PAIR:
        return None
    return LOCAL if workers == 1 else SPLIT


def pair_records(rooms_per_process: list[list[str]], report: dict[str, Any] | None,
                 per_worker: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Each pair of an attempt: its room, roundtrips and window (s) as the client counted them, and where its
    members sat: `workers` holding them, `members` that joined, `placement` (local, split or null). None when the
    report does not give each pair's roundtrips or its processes do not match the rooms."""
    if not report or report.get("error"):
        return None
    measured = process_pair_roundtrips(report)
    rooms_per_process = [rooms for rooms in rooms_per_process if rooms]  # holders drive no pair
    if measured is None or [len(counts) for counts, _ in measured] != [len(rooms) for rooms in rooms_per_process]:
        return None
    placements = room_placements(per_worker)
    records = []
    for rooms, (counts, elapsed_s) in zip(rooms_per_process, measured):
        for room, roundtrips in zip(rooms, counts):
            workers, members = placements.get(room, (0, 0))
            records.append({"room": room, "roundtrips": roundtrips, "elapsed_s": elapsed_s, "workers": workers,
                            "members": members, "placement": placement_of(workers, members)})
    return records


@dataclass(frozen=True)
class AttemptHop:
    """One attempt's local and split pairs set side by side: the mean rate of a pair of each kind."""

    repeat: int
    local_pairs: int
    split_pairs: int
    local_per_s: float  # roundtrips/s of a local pair (the mean over them)
    split_per_s: float

    @property
    def ratio(self) -> float:
        """A split pair's rate over a local pair's: below 1 when the hop costs."""
        return self.split_per_s / self.local_per_s

    @property
    def extra_us(self) -> float:
        """µs a split pair's roundtrip takes beyond a local pair's (a roundtrip is two messages, two hops)."""
        return 1e6 / self.split_per_s - 1e6 / self.local_per_s


def attempt_hop(repeat: int, pairs: list[dict[str, Any]] | None) -> AttemptHop | None:
    """The attempt's local pairs against its split ones; None unless it had both kinds, each with roundtrips."""
    rates: dict[str, list[float]] = {LOCAL: [], SPLIT: []}
    for pair in pairs or ():
        if pair.get("placement") in rates and pair["elapsed_s"] > 0:
            rates[pair["placement"]].append(pair["roundtrips"] / pair["elapsed_s"])
    if not rates[LOCAL] or not rates[SPLIT]:
        return None
    local, split = statistics.fmean(rates[LOCAL]), statistics.fmean(rates[SPLIT])
    if local <= 0 or split <= 0:
        return None
    return AttemptHop(repeat, len(rates[LOCAL]), len(rates[SPLIT]), local, split)


@dataclass(frozen=True)
class WorkersFigures:
    """A cell measured with --workers N > 1, over its good attempts: what the broker did and what its hop cost.
    Each figure is the median over the attempts with its interval (None where no attempt had it)."""

    server: str
    client: str
    workers: int
    attempts: int  # good attempts with a workers record
    publishes_per_roundtrip: Ratio | None  # PUBLISH calls the broker counted per roundtrip (2 in a ping-pong)
    cpu_us_per_publish: Ratio | None  # the broker's CPU µs per PUBLISH over the window
    crossed_broker_share: Ratio | None  # deliveries that came through the broker, over all deliveries
    local_pairs: int  # over every attempt: pairs with both members on one worker
    split_pairs: int  # pairs with their members on two workers
    unplaced_pairs: int  # pairs whose placement the counts did not tell
    both_kinds: int  # attempts with local and split pairs (the hop cost's n)
    hop_ratio: Ratio | None  # a split pair's rate over a local pair's, median of per-attempt ratios
    hop_us: Difference | None  # µs per roundtrip a split pair takes beyond a local one, median of per-attempt

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "WorkersFigures":
        """The record saved by to_json() (a sweep's index keeps it per point)."""
        kinds = {"hop_us": Difference}
        values = {}
        for field in fields(cls):
            value = data.get(field.name)
            if isinstance(value, dict):
                kind = kinds.get(field.name, Ratio)
                value = kind(**{name.name: value.get(name.name) for name in fields(kind)})
            values[field.name] = value
        return cls(**values)


def _median(values: list[float]) -> Ratio | None:
    return median_with_interval(values) if values else None


def _difference(values: list[float]) -> Difference | None:
    if not values:
        return None
    median = median_with_interval(values)
    return Difference(median.value, median.low, median.high, median.coverage, median.kind, median.n)


def cell_figures(server: str, client: str, attempts: list[Attempt]) -> WorkersFigures | None:
    """The cell's figures over its good attempts that ran more than one worker; None when none did."""
    records = [(attempt.repeat, attempt.workers) for attempt in attempts
               if attempt.ok and attempt.workers and attempt.workers.get("count", 1) > 1]
    if not records:
        return None
    windows = [(record.get("broker") or {}).get("window") or {} for _, record in records]
    pairs = [pair for _, record in records for pair in record.get("pairs") or ()]
    hops = [hop for hop in (attempt_hop(repeat, record.get("pairs")) for repeat, record in records) if hop]
    return WorkersFigures(
        server=server, client=client, workers=records[0][1]["count"], attempts=len(records),
        publishes_per_roundtrip=_median([w["publishes_per_roundtrip"] for w in windows
                                         if w.get("publishes_per_roundtrip") is not None]),
        cpu_us_per_publish=_median([w["cpu_us_per_publish"] for w in windows
                                    if w.get("cpu_us_per_publish") is not None]),
        crossed_broker_share=_median([record["crossed_broker_share"] for _, record in records
                                      if record.get("crossed_broker_share") is not None]),
        local_pairs=sum(pair.get("placement") == LOCAL for pair in pairs),
        split_pairs=sum(pair.get("placement") == SPLIT for pair in pairs),
        unplaced_pairs=sum(pair.get("placement") is None for pair in pairs),
        both_kinds=len(hops),
        hop_ratio=_median([hop.ratio for hop in hops]),
        hop_us=_difference([hop.extra_us for hop in hops]))


def workers_figures(run: RunResult) -> list[WorkersFigures]:
    """Every cell of the run measured with more than one worker, in the run's order."""
    found = [cell_figures(cell.server, cell.client, cell.attempts) for cell in run.cells]
    return [figures for figures in found if figures is not None]
