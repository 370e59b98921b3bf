"""--workers N: where each pair's members sat, and what one broker hop costs, measured inside one window.

With P ≥ 2 pairs on N ≥ 2 workers, the kernel's SO_REUSEPORT (or the cluster's primary) puts some pairs' two members
on one worker (local: each message is relayed in-process and costs the broker nothing) and others' on two (split:
every message is published once, reaches the room's two workers and is delivered by the other). Both kinds run in the same window of the same
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
from pingpong.harness.results import histograms
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


def process_pair_histograms(report: dict[str, Any]) -> list[list[str | None]]:
    """Each measuring client process's pairs' latency histograms (encoded), in process and pair order, as the drivers
    report them with several pairs (per_pair_hdr_histograms); a process with one pair has the report's histogram;
    None where a process reported none (latency not recorded)."""
    found = []
    for entry in report.get("per_process") or [report]:
        if "per_pair_hdr_histograms" in entry:
            found.append(list(entry["per_pair_hdr_histograms"]))
        elif entry.get("pairs", 1) == 1 and entry is report:  # one process, one pair: the report's own
            found.append([(report.get("latency") or {}).get("hdr_histogram")])
        else:
            found.append([None] * len(entry.get("per_pair_roundtrips") or [None]))
    return found


def pair_latency_percentiles(encoded: str | None) -> dict[str, int | None]:
    """{p50_ns, p99_ns} of one pair's histogram; None values without one (or an empty one)."""
    if not encoded:
        return {"p50_ns": None, "p99_ns": None}
    histogram = histograms.merge([encoded])
    if histogram.get_total_count() == 0:
        return {"p50_ns": None, "p99_ns": None}
    summary = histograms.latency_summary(histogram)
    return {"p50_ns": int(summary["p50_ns"]), "p99_ns": int(summary["p99_ns"])}


def pair_p50s(attempt: Attempt) -> list[int] | None:
    """Each pair's median roundtrip latency (ns) in a good closed-loop attempt with several pairs, from the client
    report's per-pair histograms; None when the attempt does not have them for every pair."""
    report = attempt.client_report
    if not attempt.ok or not report or report.get("pairs", 1) < 2:
        return None
    values = [pair_latency_percentiles(encoded)["p50_ns"]
              for process in process_pair_histograms(report) for encoded in process]
    return values if values and None not in values else None


def pair_latency_by_round(attempts: list[Attempt]) -> dict[int, tuple[float, float]]:
    """{round: (the median pair's p50, the slowest pair's p50)} in ns, over a cell's good attempts whose every pair
    has its own histogram (pair_p50s): how a pair's latency moves with a setting (--workers), round by round."""
    found = {}
    for attempt in attempts:
        values = pair_p50s(attempt)
        if values:
            found[attempt.repeat] = (statistics.median(values), max(values))
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


def room_publishes(per_worker: list[dict[str, Any]]) -> dict[str, int]:
    """{room: messages the workers published in it}, from each worker's published_per_room (absent before it)."""
    found: dict[str, int] = {}
    for record in per_worker:
        for room, published in (record.get("published_per_room") or {}).items():
            found[room] = found.get(room, 0) + published
    return found


def pair_records(rooms_per_process: list[list[str]], report: dict[str, Any] | None,
                 per_worker: list[dict[str, Any]], paused_s: float = 0.0) -> list[dict[str, Any]] | None:
    """Each pair of an attempt: its room, roundtrips and window (s) as the client counted them, its roundtrips'
    p50 and p99 latency (ns, from its own histogram; None without one), where its members sat: `workers`
    holding them, `members` that joined, `placement` (local, split or null), and `publishes`: the messages the
    workers published in its room over the server's life. None when the report does not give each pair's
    roundtrips or its processes do not match the rooms."""
    if not report or report.get("error"):
        return None
    measured = process_pair_roundtrips(report)
    rooms_per_process = [rooms for rooms in rooms_per_process if rooms]  # holders drive no pair
    if measured is None or [len(counts) for counts, _ in measured] != [len(rooms) for rooms in rooms_per_process]:
        return None
    latencies = process_pair_histograms(report)
    placements = room_placements(per_worker)
    publishes = room_publishes(per_worker)
    records = []
    for rooms, (counts, elapsed_s), encoded in zip(rooms_per_process, measured, latencies):
        encoded = encoded if len(encoded) == len(rooms) else [None] * len(rooms)
        for room, roundtrips, histogram in zip(rooms, counts, encoded):
            workers, members = placements.get(room, (0, 0))
            # elapsed_s: the process's window less its pauses (the host's pace in the window), its running time
            records.append({"room": room, "roundtrips": roundtrips, "elapsed_s": elapsed_s - paused_s,
                            **pair_latency_percentiles(histogram), "workers": workers, "members": members,
                            "placement": placement_of(workers, members), "publishes": publishes.get(room, 0)})
    return records


def attempt_workers_record(count: int, broker: dict[str, Any] | None, per_worker: list[dict[str, Any]],
                           outcome: Any, rooms_per_process: list[list[str]] | None,
                           room_placement: str = "kernel", worker_ports: list[int] | None = None) -> dict[str, Any]:
    """An attempt's `workers` record: how many workers, the broker (its record, and its PUBLISH calls and CPU over
    the window: outcome.window.broker) and each worker's counts over the server's life (this attempt's client, the
    room probe and the relay verification), summed: how many deliveries crossed the broker, how many stayed in one
    worker, the subscribers each PUBLISH reached (deliveries_per_publish: the workers with members in its room);
    and, for a closed-loop ping-pong (rooms_per_process given) that succeeded, each pair's roundtrips, placement and
    publishes (pair_records), and local_pair_publishes: the messages published in the rooms of its local pairs (0:
    a pair on one worker costs the broker nothing). The same for a server on this machine and on a cluster's server
    host.
    room_placement: --room-placement (kernel, or room: each client process on one worker's own port, worker_ports).

    outcome: the attempt's measure/boundary.Outcome (its window, measured figures and client report)."""
    totals = {name: sum(int(record.get(name, 0)) for record in per_worker)
              for name in ("relayed_local", "published", "publish_deliveries", "delivered_from_broker")}
    delivered = totals["relayed_local"] + totals["delivered_from_broker"]
    window = dict(outcome.window.broker) if outcome.window is not None and outcome.window.broker else None
    if window is not None and outcome.measured is not None and outcome.window.wall_s:
        # the client's raw rate over the orchestrator's window, its pauses left out: the roundtrips in the window
        # the broker was sampled over
        measured = outcome.measured
        paused = (outcome.window.host_pace or {}).get("paused_s") or 0.0
        roundtrips = (measured.raw_roundtrips_per_s or measured.roundtrips_per_s) * (outcome.window.wall_s - paused)
        window["publishes_per_roundtrip"] = round(window["publishes"] / roundtrips, 3) if roundtrips else None
    paused_s = ((outcome.window.host_pace or {}).get("paused_s") or 0.0) if outcome.window is not None else 0.0
    pairs = (pair_records(rooms_per_process, outcome.client.report, per_worker, paused_s)
             if rooms_per_process is not None and outcome.ok else None)
    return {"count": count, "reported": len(per_worker), "room_placement": room_placement,
            "worker_ports": worker_ports or None,
            "broker": {**broker, "window": window} if broker is not None else None,
            "per_worker": per_worker, **totals,
            "deliveries_per_publish": (round(totals["publish_deliveries"] / totals["published"], 3)
                                       if totals["published"] else None),
            "crossed_broker_share": round(totals["delivered_from_broker"] / delivered, 4) if delivered else None,
            "pairs": pairs,
            "local_pair_publishes": (sum(pair["publishes"] for pair in pairs if pair["placement"] == LOCAL)
                                     if pairs is not None else None)}


@dataclass(frozen=True)
class AttemptHop:
    """One attempt's local and split pairs set side by side: the mean rate of a pair of each kind."""

    repeat: int
    local_pairs: int
    split_pairs: int
    local_per_s: float  # roundtrips/s of a local pair (the mean over them)
    split_per_s: float
    local_p50_ns: float | None = None  # a local pair's median latency (the median over them); None unrecorded
    split_p50_ns: float | None = None

    @property
    def extra_p50_us(self) -> float | None:
        """µs a split pair's median roundtrip latency lies above a local pair's."""
        if self.local_p50_ns is None or self.split_p50_ns is None:
            return None
        return (self.split_p50_ns - self.local_p50_ns) / 1e3

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
    p50s: dict[str, list[int]] = {LOCAL: [], SPLIT: []}
    for pair in pairs or ():
        if pair.get("placement") in rates and pair["elapsed_s"] > 0:
            rates[pair["placement"]].append(pair["roundtrips"] / pair["elapsed_s"])
            if pair.get("p50_ns") is not None:
                p50s[pair["placement"]].append(pair["p50_ns"])
    if not rates[LOCAL] or not rates[SPLIT]:
        return None
    local, split = statistics.fmean(rates[LOCAL]), statistics.fmean(rates[SPLIT])
    if local <= 0 or split <= 0:
        return None
    latency = ((statistics.median(p50s[LOCAL]), statistics.median(p50s[SPLIT]))
               if len(p50s[LOCAL]) == len(rates[LOCAL]) and len(p50s[SPLIT]) == len(rates[SPLIT]) else (None, None))
    return AttemptHop(repeat, len(rates[LOCAL]), len(rates[SPLIT]), local, split, *latency)


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
    # µs a split pair's median latency lies above a local pair's (each kind's median over its pairs per attempt),
    # median of per-attempt differences; None when the pairs' latencies were not recorded (files before them too)
    hop_p50_us: Difference | None = None
    # subscribers a PUBLISH reached (the workers with members in its room), median over the attempts; None when
    # nothing was published, or in files from before the count (every worker subscribed to every room: N)
    deliveries_per_publish: Ratio | None = None
    # messages published in the rooms of local pairs, over every attempt (0 since rooms cross workers only when they
    # must); None when no attempt recorded it
    local_pair_publishes: int | None = None
    room_placement: str | None = None  # --room-placement: kernel or room (None: files from before it, the kernel's)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "WorkersFigures":
        """The record saved by to_json() (a sweep's index keeps it per point)."""
        kinds = {"hop_us": Difference, "hop_p50_us": Difference}
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
        room_placement=records[0][1].get("room_placement"),
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
        hop_us=_difference([hop.extra_us for hop in hops]),
        hop_p50_us=_difference([hop.extra_p50_us for hop in hops if hop.extra_p50_us is not None]),
        deliveries_per_publish=_median([record["deliveries_per_publish"] for _, record in records
                                        if record.get("deliveries_per_publish") is not None]),
        local_pair_publishes=(sum(record["local_pair_publishes"] for _, record in records
                                  if record.get("local_pair_publishes") is not None)
                              if any(record.get("local_pair_publishes") is not None for _, record in records)
                              else None))


def workers_figures(run: RunResult) -> list[WorkersFigures]:
    """Every cell of the run measured with more than one worker, in the run's order."""
    found = [cell_figures(cell.server, cell.client, cell.attempts) for cell in run.cells]
    return [figures for figures in found if figures is not None]
