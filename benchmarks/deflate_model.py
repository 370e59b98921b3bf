"""A model of a cell's roundtrip from what this host can vary, checked across placements, and what it would take to
give a published rate (the seed's 200-270/s deflate cells).

In a serial ping-pong, a roundtrip is the CPU both sides spend on it plus what the wakeups between them cost beyond
it. With both sides on one CPU nothing overlaps and a wakeup's cost is CPU the sides are charged with, so

    T(same-cpu) = CPU(server) + CPU(client)                          (every thread: zlib's pool threads too)
    T(split)    = CPU(server) + CPU(client) + W × w                  (W: the wakeups that cross to the other CPU)
    CPU(split)  = CPU(same-cpu) + W × c

where w is the host's cost of one cross-CPU wakeup (the run's host figure, the C floor in both placements), c the
part of it the sides are charged as CPU time (the same figure's CPU per roundtrip, split less one CPU, over W; on
this VM most of w: the floor's CPU per roundtrip grows about fourfold on two CPUs; 0 for files without it), and W
the roundtrip's four messages, each waking the side on the other CPU (a side's threads share its CPU, so a thread
pool's hand-offs do not cross). Each placement is predicted from the CPU measured in the *other*, so the check is
not circular: a CPU figure that moved with the placement, or a wakeup count other than W, shows as an error.

A second column charges each side by its runtime: when the run holds a runtime's raw-TCP floor against itself
(raw-tcp-python, raw-tcp-node, raw-tcp-c) in both placements, a side of that runtime is charged, on each of the two
wakeups it takes per roundtrip, what that floor's side of the same role was charged (its CPU per roundtrip, split
less one CPU, over 2); the rest of a wakeup, w - c, is the host's and the same for all:

    CPU(split)  = CPU(same-cpu) + 2 c(server's runtime) + 2 c(client's runtime)
    T(split)    = CPU(same-cpu) + 2 c(server's runtime) + 2 c(client's runtime) + W × (w - c)

With every side charged c this is the first model. The floors calibrate it, so they are not its check: the WebSocket
cells and the floors of two runtimes are. Then,
per cell, the wakeup cost that would stretch the split roundtrip to the published rate, and the count of hand-offs
(voluntary switches of both sides' threads per roundtrip) that an unpinned host could make cross.

Both placements are measured in the same rounds (`--placement same-cpu,split`), so the check is also made round by
round, every figure from one round: the C floor's w and c from its cell in that round, the runtimes' charges from
their floors in that round. Per cell it gives each placement's median error with its order-statistic interval, and
a verdict: "holds" when both intervals lie within the tolerance, "misses" when one lies wholly outside it, "not
settled" when the rounds cannot tell. A median within 25% is not yet a model that holds: the one-CPU prediction is a
difference of two CPU figures, and for a fast cell a few µs of noise in either is tens of per cent of it.

Further placements of the same run (`--from-split`, helpers-across and unpinned, measured with
PINGPONG_COUNT_WAKEUPS=1, which counts each side's threads woken from another CPU) are predicted from split by
the crossings counted in both: T(placement) = T(split) + (X(placement) - X(split)) × w. helpers-across puts each
side's thread pool on the other side's CPU, so Node.js's zlib hand-offs cross as the messages do; the cost of one
crossing that would stretch a cell's one-CPU roundtrip to the published rate, at that placement's crossings, is the
host figure the seed's table asks for.

Usage: python -m benchmarks.deflate_model RUN-placement-same-cpu.json RUN-placement-split.json [--setup lemire-2023]
       [--from-split RUN-placement-helpers-across.json RUN-placement-unpinned.json]
Prints one JSON object on stdout and a table on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from pingpong.harness.analysis.host_wakeup import WAKEUPS_PER_ROUNDTRIP, HostWakeup
from pingpong.harness.analysis.published import SETUPS
from pingpong.harness.analysis.stats import Ratio, median_with_interval, percent
from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.results.records import load

TOLERANCE = 0.25  # the issue's: predictions within 25% of what the suite measures
# the server is woken by A's and B's messages, the client's process by both replies
WAKEUPS_PER_SIDE = WAKEUPS_PER_ROUNDTRIP // 2
FLOOR_OF_RUNTIME = {"python": "raw-tcp-python", "node": "raw-tcp-node", "native": "raw-tcp-c", "bun": "raw-tcp-bun"}


def side_figures(summary) -> dict[str, float] | None:
    """A cell's measured roundtrip, both sides' CPU and hand-offs per roundtrip, or None without them."""
    if not summary.roundtrips_per_s or not summary.server_time_budget or not summary.client_time_budget:
        return None
    server, client = summary.server_time_budget, summary.client_time_budget
    return {"roundtrip_us": 1e6 / summary.roundtrips_per_s.median, "cpu_us": server.cpu_us + client.cpu_us,
            "server_cpu_us": server.cpu_us, "client_cpu_us": client.cpu_us,
            "other_threads_cpu_us": (server.other_threads_cpu_us or 0) + (client.other_threads_cpu_us or 0),
            # both sides' threads woken from another CPU per roundtrip (PINGPONG_COUNT_WAKEUPS=1), or None
            "crossings": (None if server.cross_cpu_wakeups is None or client.cross_cpu_wakeups is None
                          else server.cross_cpu_wakeups + client.cross_cpu_wakeups),
            "handoffs": server.voluntary_switches + client.voluntary_switches}


def predict(same: dict[str, float], split: dict[str, float], wakeup_us: float,
            charged_us: float = 0.0) -> dict[str, float]:
    """Each placement's roundtrip from the other's CPU, and the errors; pure. charged_us: the part of one wakeup the
    sides are charged as CPU time (the host's figure, from the C floor), which the split CPU holds W times over."""
    same_predicted = split["cpu_us"] - WAKEUPS_PER_ROUNDTRIP * charged_us
    split_predicted = same["cpu_us"] + WAKEUPS_PER_ROUNDTRIP * wakeup_us
    return {"same_cpu_predicted_us": same_predicted, "split_predicted_us": split_predicted,
            "same_cpu_error": same_predicted / same["roundtrip_us"] - 1,
            "split_error": split_predicted / split["roundtrip_us"] - 1}


def runtime_charges(same: dict[tuple[str, str], dict[str, float]],
                    split: dict[tuple[str, str], dict[str, float]]) -> dict[tuple[str, str], float]:
    """(role, runtime) -> µs of CPU a side of that runtime and role is charged per wakeup, from the runtime's own
    raw-TCP floor against itself in both placements (cells' side_figures by (server, client)); pure."""
    charges = {}
    for runtime, floor in FLOOR_OF_RUNTIME.items():
        together, apart = same.get((floor, floor)), split.get((floor, floor))
        if together is None or apart is None:
            continue
        for role in ("server", "client"):
            charges[(role, runtime)] = (apart[f"{role}_cpu_us"] - together[f"{role}_cpu_us"]) / WAKEUPS_PER_SIDE
    return charges


def predict_by_runtime(same: dict[str, float], split: dict[str, float], wakeup_us: float, charged_us: float,
                       server_charge_us: float, client_charge_us: float) -> dict[str, float]:
    """As predict, with each side charged per wakeup by its runtime's floor (server_charge_us, client_charge_us)
    and the uncharged rest of a wakeup (wakeup_us - charged_us, the C floor's) the host's; pure."""
    charged = WAKEUPS_PER_SIDE * (server_charge_us + client_charge_us)
    same_predicted = split["cpu_us"] - charged
    split_predicted = same["cpu_us"] + charged + WAKEUPS_PER_ROUNDTRIP * (wakeup_us - charged_us)
    return {"same_cpu_predicted_us": same_predicted, "split_predicted_us": split_predicted,
            "same_cpu_error": same_predicted / same["roundtrip_us"] - 1,
            "split_error": split_predicted / split["roundtrip_us"] - 1}


def round_figures(run) -> dict[tuple[str, str], dict[int, dict[str, float]]]:
    """Per cell (server, client) and round, the attempt's raw roundtrip µs and each side's CPU µs per roundtrip;
    pure. A paced window's raw rate (its pauses left out) is used, so both placements are on the host's own scale."""
    figures: dict[tuple[str, str], dict[int, dict[str, float]]] = {}
    for cell in run.cells:
        for attempt in cell.attempts:
            rate = attempt.raw_roundtrips_per_s or attempt.roundtrips_per_s
            if (not attempt.ok or not attempt.roundtrips or not rate or attempt.server_cpu_s is None
                    or attempt.client_cpu_s is None):
                continue
            server_us = attempt.server_cpu_s * 1e6 / attempt.roundtrips
            client_us = attempt.client_cpu_s * 1e6 / attempt.roundtrips
            sides = (attempt.server_scheduling, attempt.client_scheduling)
            crossings = (None if any(side is None or side.cross_cpu_wakeups is None for side in sides)
                         else sum(side.cross_cpu_wakeups for side in sides) / attempt.roundtrips)
            figures.setdefault((cell.server, cell.client), {})[attempt.repeat] = {
                "roundtrip_us": 1e6 / rate, "cpu_us": server_us + client_us, "server_cpu_us": server_us,
                "client_cpu_us": client_us, "crossings": crossings}
    return figures


def round_host(same: dict[tuple[str, str], dict[int, dict[str, float]]],
               split: dict[tuple[str, str], dict[int, dict[str, float]]], repeat: int,
               floor: str = FLOOR_OF_RUNTIME["native"]) -> tuple[float, float | None] | None:
    """The host's figure of one round: one wakeup's cost w and the part of it charged as CPU, c (None without the
    floor's CPU), from the floor's cell in both placements of that round; None when the round lacks either; pure."""
    together, apart = same.get((floor, floor), {}).get(repeat), split.get((floor, floor), {}).get(repeat)
    if together is None or apart is None:
        return None
    charged = (None if together.get("cpu_us") is None or apart.get("cpu_us") is None
               else (apart["cpu_us"] - together["cpu_us"]) / WAKEUPS_PER_ROUNDTRIP)
    return (apart["roundtrip_us"] - together["roundtrip_us"]) / WAKEUPS_PER_ROUNDTRIP, charged


def paired_by_round(same: dict[tuple[str, str], dict[int, dict[str, float]]],
                    split: dict[tuple[str, str], dict[int, dict[str, float]]],
                    runtimes: dict[tuple[str, str], str | None],
                    floor: str = FLOOR_OF_RUNTIME["native"]) -> dict[tuple[str, str], dict[str, Ratio]]:
    """Each cell's prediction errors round by round, every figure from the same round: the host's w and c from the
    C floor's cell in both placements of that round, the runtime charges from that round's floors; per cell the
    median error of each placement with its order-statistic interval (the coverage it really has), for one charge
    ("same_cpu_error", "split_error") and by runtime ("by_runtime_same_cpu_error", ...); pure.
    runtimes: (role, implementation) -> runtime."""
    errors: dict[tuple[str, str], dict[str, list[float]]] = {}
    repeats = {repeat for cells in (same, split) for rounds in cells.values() for repeat in rounds}
    charges_of = {repeat: runtime_charges({k: v[repeat] for k, v in same.items() if repeat in v},
                                          {k: v[repeat] for k, v in split.items() if repeat in v})
                  for repeat in repeats}
    for key in sorted(set(same) & set(split)):
        for repeat in sorted(set(same[key]) & set(split[key])):
            if (host := round_host(same, split, repeat, floor)) is None or host[1] is None:
                continue
            wakeup_us, charged_us = host
            found = errors.setdefault(key, {})
            for name, value in predict(same[key][repeat], split[key][repeat], wakeup_us, charged_us).items():
                if name.endswith("_error"):
                    found.setdefault(name, []).append(value)
            charges = charges_of[repeat]
            server_charge = charges.get(("server", runtimes.get(("server", key[0]))))
            client_charge = charges.get(("client", runtimes.get(("client", key[1]))))
            if server_charge is not None and client_charge is not None:
                for name, value in predict_by_runtime(same[key][repeat], split[key][repeat], wakeup_us, charged_us,
                                                      server_charge, client_charge).items():
                    if name.endswith("_error"):
                        found.setdefault("by_runtime_" + name, []).append(value)
    return {key: {name: median_with_interval(values) for name, values in found.items()}
            for key, found in errors.items() if found}


def predict_crossed(split: dict[str, float], crossed: dict[str, float], wakeup_us: float) -> dict[str, float]:
    """A placement's roundtrip from the split one by the crossings counted in both (helpers-across: a thread pool's
    hand-offs cross too; unpinned: wherever the kernel put the threads): each crossing beyond split's costs the
    host's w; pure."""
    predicted = split["roundtrip_us"] + (crossed["crossings"] - split["crossings"]) * wakeup_us
    return {"crossed_predicted_us": predicted, "crossed_error": predicted / crossed["roundtrip_us"] - 1}


def crossed_by_round(split: dict[tuple[str, str], dict[int, dict[str, float]]],
                     same: dict[tuple[str, str], dict[int, dict[str, float]]],
                     crossed: dict[tuple[str, str], dict[int, dict[str, float]]],
                     floor: str = FLOOR_OF_RUNTIME["native"]) -> dict[tuple[str, str], Ratio]:
    """predict_crossed round by round, w from the C floor's cell of the same round in one CPU and split; per cell
    the median error with its order-statistic interval; pure."""
    errors: dict[tuple[str, str], list[float]] = {}
    for key in sorted(set(split) & set(crossed)):
        for repeat in sorted(set(split[key]) & set(crossed[key])):
            host = round_host(same, split, repeat, floor)
            apart, across = split[key][repeat], crossed[key][repeat]
            if host is None or apart["crossings"] is None or across["crossings"] is None:
                continue
            wakeup_us = host[0]
            errors.setdefault(key, []).append(predict_crossed(apart, across, wakeup_us)["crossed_error"])
    return {key: median_with_interval(values) for key, values in errors.items()}


def verdict(same_cpu_error: Ratio, split_error: Ratio, tolerance: float = TOLERANCE) -> str:
    """"holds" when both placements' intervals lie within ±tolerance, "misses" when either lies wholly outside it,
    else "not settled" (the rounds cannot tell); an error without an interval is judged on its median; pure."""
    def bounds(error: Ratio) -> tuple[float, float]:
        return (error.value, error.value) if error.low is None else (error.low, error.high)

    placed = [bounds(error) for error in (same_cpu_error, split_error)]
    if any(high < -tolerance or low > tolerance for low, high in placed):
        return "misses"
    if all(-tolerance <= low and high <= tolerance for low, high in placed):
        return "holds"
    return "not settled"


def wakeup_for_rate(rate: float, cpu_us: float, wakeups: float) -> float | None:
    """The cost of one wakeup that would make a roundtrip of cpu_us and that many wakeups run at rate; pure."""
    missing = 1e6 / rate - cpu_us
    return missing / wakeups if wakeups > 0 and missing > 0 else None


VERDICTS = ("holds", "not settled", "misses")


def print_crossed(rows: list[dict], placement: str, wakeup_us: float) -> None:
    """A further placement's table on stderr: crossings counted, the roundtrip predicted from split's, the cost of a
    crossing that would give the published rate."""
    print(f"{placement} predicted from split: + (crossings there - crossings in split) × w ({wakeup_us:.1f} µs); "
          f"the error round by round (w from that round's C floor) with its interval", file=sys.stderr)
    print(f"{'cell':<40}{'crossings: split':>17}{'there':>8}{'split µs':>10}{'there µs':>10}{'predicted':>10}"
          f"{'error':>8}{'by round':>22}{'a crossing for published':>26}", file=sys.stderr)
    for row in rows:
        across = row["from_split"][placement]
        by_round = across.get("by_round")
        interval = "" if by_round is None else (
            f"{by_round['value']:+.0%}" + ("" if by_round["low"] is None else
                                           f" [{by_round['low']:+.0%}, {by_round['high']:+.0%}]"))
        needed = across.get("wakeup_for_published_us")
        print(f"{row['server'] + ' × ' + row['client']:<40}{across['split_crossings']:>17.2f}"
              f"{across['crossings']:>8.2f}{row['split']['roundtrip_us']:>10.0f}{across['roundtrip_us']:>10.0f}"
              f"{across['crossed_predicted_us']:>10.0f}{across['crossed_error']:>+8.0%}{interval:>22}"
              f"{'' if needed is None else f'{needed:.0f} µs':>26}", file=sys.stderr)


def print_by_round(rows: list[dict]) -> None:
    """The paired check's table on stderr: per cell each placement's median error with its interval, and verdicts."""
    def shown(error: dict | None) -> str:
        if error is None:
            return f"{'':>22}"
        interval = "" if error["low"] is None else f" [{error['low']:+.0%}, {error['high']:+.0%}]"
        return f"{error['value']:>+5.0%}{interval:>17}"

    coverage = next(iter(rows[0]["by_round"].values()))
    print(f"Round by round, each round's figures from that round (the C floor's w and c, the runtimes' floors); "
          f"medians over {coverage['n']} rounds with intervals covering {percent(coverage['coverage'] or 0)} "
          f"(order statistics); a verdict holds when both intervals lie within ±{TOLERANCE:.0%}, misses when one "
          f"lies wholly outside", file=sys.stderr)
    print(f"{'cell':<40}{'one CPU':>22}{'two CPUs':>22}{'verdict':>13}"
          f"{'by runtime: one CPU':>22}{'two CPUs':>22}{'verdict':>13}", file=sys.stderr)
    for row in rows:
        errors = row["by_round"]
        print(f"{row['server'] + ' × ' + row['client']:<40}{shown(errors['same_cpu_error'])}"
              f"{shown(errors['split_error'])}{row['verdict_by_round']:>13}"
              f"{shown(errors.get('by_runtime_same_cpu_error'))}{shown(errors.get('by_runtime_split_error'))}"
              f"{row.get('verdict_by_round_by_runtime', ''):>13}", file=sys.stderr)
    for name, label in (("verdict_by_round", "one charge for all"), ("verdict_by_round_by_runtime", "by runtime")):
        counted = [row[name] for row in rows if name in row]
        if counted:
            print(f"{label}: " + ", ".join(f"{counted.count(kind)} {kind}" for kind in VERDICTS)
                  + f" of {len(counted)}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("same_cpu", type=Path)
    parser.add_argument("split", type=Path)
    parser.add_argument("--setup", default="lemire-2023", choices=sorted(SETUPS))
    parser.add_argument("--from-split", type=Path, nargs="+", default=[], metavar="RUN-placement-P.json",
                        help="the same run's other placements (helpers-across, unpinned), measured with "
                             "PINGPONG_COUNT_WAKEUPS=1: their roundtrips predicted from split's and the crossings "
                             "counted in both")
    args = parser.parse_args()
    runs = {"same-cpu": load(args.same_cpu), "split": load(args.split)}
    further = []
    for path in args.from_split:
        run = load(path)
        placements = {attempt.cpu_placement for cell in run.cells for attempt in cell.attempts}
        if len(placements) != 1 or None in placements or placements & set(runs):
            raise SystemExit(f"deflate_model: {path} is not one further placement's point of the run")
        placement = placements.pop()
        runs[placement] = run
        further.append(placement)
    host = HostWakeup.from_json(runs["split"].host_wakeup) or HostWakeup.from_json(runs["same-cpu"].host_wakeup)
    if host is None:
        raise SystemExit("deflate_model: neither run has the host's figure (run with --host-figure on)")
    wakeup_us = host.wakeup_us.value
    charged_us = host.cpu_per_wakeup_us.value if host.cpu_per_wakeup_us is not None else 0.0  # none in older files
    summaries = {name: summarize_run(run) for name, run in runs.items()}
    figures = {name: {key: found for key, summary in cells.items() if (found := side_figures(summary)) is not None}
               for name, cells in summaries.items()}
    runtimes = {(role, name): entry.get("runtime") for role, entries in runs["same-cpu"].implementations.items()
                for name, entry in entries.items()}
    charges = runtime_charges(figures["same-cpu"], figures["split"])
    published = SETUPS[args.setup].published
    floors = set(FLOOR_OF_RUNTIME.values())
    by_round = {name: round_figures(run) for name, run in runs.items()}
    paired = paired_by_round(by_round["same-cpu"], by_round["split"], runtimes)
    crossed_paired = {placement: crossed_by_round(by_round["split"], by_round["same-cpu"], by_round[placement])
                      for placement in further}
    cells = []
    for key in sorted(set(figures["same-cpu"]) & set(figures["split"])):
        same, split = figures["same-cpu"][key], figures["split"][key]
        row = {"server": key[0], "client": key[1], "same_cpu": same, "split": split,
               "server_runtime": runtimes.get(("server", key[0])), "client_runtime": runtimes.get(("client", key[1])),
               # a floor against itself calibrates the runtime charges, so it is no check of them
               "calibrates": key[0] == key[1] and key[0] in floors,
               **predict(same, split, wakeup_us, charged_us),
               # what this cell's own sides were charged per wakeup beyond their one-CPU CPU, beside the floor's
               "charged_per_wakeup_us": (split["cpu_us"] - same["cpu_us"]) / WAKEUPS_PER_ROUNDTRIP}
        server_charge = charges.get(("server", row["server_runtime"]))
        client_charge = charges.get(("client", row["client_runtime"]))
        if server_charge is not None and client_charge is not None:
            row["by_runtime"] = {"server_charge_us": server_charge, "client_charge_us": client_charge,
                                 **predict_by_runtime(same, split, wakeup_us, charged_us, server_charge,
                                                      client_charge)}
        paired_errors = paired.get(key, {})
        if "same_cpu_error" in paired_errors:
            row["by_round"] = {name: asdict(error) for name, error in paired_errors.items()}
            row["verdict_by_round"] = verdict(paired_errors["same_cpu_error"], paired_errors["split_error"])
            if "by_runtime_same_cpu_error" in paired_errors:
                row["verdict_by_round_by_runtime"] = verdict(paired_errors["by_runtime_same_cpu_error"],
                                                             paired_errors["by_runtime_split_error"])
        for placement in further:
            crossed = figures[placement].get(key)
            if crossed is None or crossed["crossings"] is None or split["crossings"] is None:
                continue
            there = row.setdefault("from_split", {})[placement] = {
                "roundtrip_us": crossed["roundtrip_us"], "crossings": crossed["crossings"],
                "split_crossings": split["crossings"], **predict_crossed(split, crossed, wakeup_us)}
            if key in crossed_paired[placement]:
                there["by_round"] = asdict(crossed_paired[placement][key])
            if key in published:
                # every crossing of that placement at one cost: the cost that stretches the one-CPU roundtrip to
                # the published rate
                there["wakeup_for_published_us"] = wakeup_for_rate(published[key], same["roundtrip_us"],
                                                                    crossed["crossings"])
        if key in published:
            row["published"] = published[key]
            row["wakeup_for_published_us"] = wakeup_for_rate(published[key], same["cpu_us"], WAKEUPS_PER_ROUNDTRIP)
            row["handoff_for_published_us"] = wakeup_for_rate(published[key], same["cpu_us"], split["handoffs"])
        cells.append(row)

    def holds(prediction) -> bool:
        return abs(prediction["same_cpu_error"]) <= TOLERANCE and abs(prediction["split_error"]) <= TOLERANCE

    checked = [row for row in cells if not row["calibrates"]]
    within = sum(holds(row) for row in checked)
    by_runtime = [row for row in checked if "by_runtime" in row]
    within_by_runtime = sum(holds(row["by_runtime"]) for row in by_runtime)
    print(f"host: {host.sentence()}", file=sys.stderr)
    if charges:
        print("charged per wakeup by each runtime's floor (server / client): " + "; ".join(
            f"{runtime} {charges[('server', runtime)]:.1f} / {charges[('client', runtime)]:.1f} µs"
            for runtime in FLOOR_OF_RUNTIME if ("server", runtime) in charges), file=sys.stderr)

    def errors(prediction) -> str:
        return f"{prediction['same_cpu_error']:>+7.0%}{prediction['split_error']:>+7.0%}"

    print(f"{'cell':<44}{'same: meas':>11}{'pred':>8}{'split: meas':>12}{'pred':>8}{'errors':>14}"
          f"{'by runtime':>16}{'CPU':>7}{'other':>7}{'charged':>8}{'hand-offs':>10}{'w for published':>16}",
          file=sys.stderr)
    for row in cells:
        needed = row.get("wakeup_for_published_us")
        name = row["server"] + " × " + row["client"] + (" (calibrates)" if row["calibrates"] else "")
        print(f"{name:<44}{row['same_cpu']['roundtrip_us']:>11.0f}"
              f"{row['same_cpu_predicted_us']:>8.0f}{row['split']['roundtrip_us']:>12.0f}"
              f"{row['split_predicted_us']:>8.0f}{errors(row)}"
              f"{errors(row['by_runtime']) if 'by_runtime' in row else '':>16}{row['same_cpu']['cpu_us']:>7.0f}"
              f"{row['same_cpu']['other_threads_cpu_us']:>7.0f}{row['charged_per_wakeup_us']:>8.0f}"
              f"{row['split']['handoffs']:>10.1f}"
              f"{'' if needed is None else f'{needed:.0f} µs':>16}", file=sys.stderr)
    print(f"{within} of {len(checked)} cells predicted within {TOLERANCE:.0%} in both placements with one charge for "
          f"every side (the C floor's)" + (f"; {within_by_runtime} of {len(by_runtime)} with each side charged by "
                                           f"its runtime's floor" if by_runtime else ""), file=sys.stderr)
    judged = [row for row in checked if "verdict_by_round" in row]
    if judged:
        print_by_round(judged)
    for placement in further:
        crossed_rows = [row for row in cells if placement in row.get("from_split", {})]
        if crossed_rows:
            print_crossed(crossed_rows, placement, wakeup_us)
    verdicts = {name: {kind: sum(row.get(name) == kind for row in judged) for kind in VERDICTS}
                for name in ("verdict_by_round", "verdict_by_round_by_runtime")}
    print(json.dumps({"files": [str(args.same_cpu), str(args.split)], "host_wakeup_us": wakeup_us,
                      "host_cpu_per_wakeup_us": charged_us,
                      "wakeups_per_roundtrip": WAKEUPS_PER_ROUNDTRIP, "tolerance": TOLERANCE,
                      "runtime_charges_us": [{"role": role, "runtime": runtime, "charge_us": charge}
                                             for (role, runtime), charge in sorted(charges.items())],
                      "within_both": within, "checked": len(checked),
                      "within_both_by_runtime": within_by_runtime if by_runtime else None,
                      "checked_by_runtime": len(by_runtime), "by_round": verdicts, "cells": cells}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
