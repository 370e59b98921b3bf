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

Usage: python -m benchmarks.deflate_model RUN-placement-same-cpu.json RUN-placement-split.json [--setup lemire-2023]
Prints one JSON object on stdout and a table on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pingpong.harness.analysis.host_wakeup import WAKEUPS_PER_ROUNDTRIP, HostWakeup
from pingpong.harness.analysis.published import SETUPS
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


def wakeup_for_rate(rate: float, cpu_us: float, wakeups: float) -> float | None:
    """The cost of one wakeup that would make a roundtrip of cpu_us and that many wakeups run at rate; pure."""
    missing = 1e6 / rate - cpu_us
    return missing / wakeups if wakeups > 0 and missing > 0 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("same_cpu", type=Path)
    parser.add_argument("split", type=Path)
    parser.add_argument("--setup", default="lemire-2023", choices=sorted(SETUPS))
    args = parser.parse_args()
    runs = {"same-cpu": load(args.same_cpu), "split": load(args.split)}
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
    print(json.dumps({"files": [str(args.same_cpu), str(args.split)], "host_wakeup_us": wakeup_us,
                      "host_cpu_per_wakeup_us": charged_us,
                      "wakeups_per_roundtrip": WAKEUPS_PER_ROUNDTRIP, "tolerance": TOLERANCE,
                      "runtime_charges_us": [{"role": role, "runtime": runtime, "charge_us": charge}
                                             for (role, runtime), charge in sorted(charges.items())],
                      "within_both": within, "checked": len(checked),
                      "within_both_by_runtime": within_by_runtime if by_runtime else None,
                      "checked_by_runtime": len(by_runtime), "cells": cells}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
