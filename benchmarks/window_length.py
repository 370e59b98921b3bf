"""Does a longer window make a driver slower? Each client driver against one server, 0.2 s and 3 s windows back to back.

A user picks a longer --duration for steadier figures; a driver whose recording grows with the window (one array
reallocated for the whole window, into glibc's mapped blocks) then runs slower than it does in the matrix's 0.2 s
windows. Each round starts one server process per protocol and measures every client once with each window length,
in alternating order, each a fresh client process; the ratio long/short is taken within the round (paired) and
summarised as the median with its order-statistic interval. Placement same-cpu by default (issue 39's criterion: on
one CPU, within 3%). Prints one JSON object on stdout; one line per client on stderr.
Usage: python -m benchmarks.window_length [--rounds 5] [--long 3] [--short 0.2] [--placement same-cpu]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from benchmarks.rounds_setup import ROOT, implementations_by_role, matrix_settings
from pingpong.harness.analysis.stats import paired_ratio
from pingpong.harness.measure.local import LocalMeasurer
from pingpong.harness.settings.cell import PLACEMENTS, placement_of
from pingpong.harness.settings.manifest import check_availability

WEBSOCKET_CLIENTS = "websockets,aiohttp,picows,node-ws,node-builtin,bun"
RAW_CLIENTS = "raw-tcp-python,raw-tcp-c,raw-tcp-node,raw-tcp-bun"
TARGET = 0.03  # issue 39: a long window's rate within 3% of a short one's


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--short", type=float, default=0.2, help="the matrix's window, s (default %(default)g)")
    parser.add_argument("--long", type=float, default=3.0, help="a user's longer window, s (default %(default)g)")
    parser.add_argument("--clients", default=f"{WEBSOCKET_CLIENTS},{RAW_CLIENTS}")
    parser.add_argument("--server", default="node-ws", help="the WebSocket clients' server (default %(default)s)")
    parser.add_argument("--raw-server", default="raw-tcp-c", help="the raw-TCP clients' server (default %(default)s)")
    parser.add_argument("--placement", default="same-cpu", choices=PLACEMENTS[1:])
    args = parser.parse_args()
    found = implementations_by_role()
    clients = [found[("client", name)] for name in args.clients.split(",")
               if check_availability(found[("client", name)], ROOT).available]
    servers = {"websocket": found[("server", args.server)], "raw-tcp": found[("server", args.raw_server)]}
    base = replace(matrix_settings(), placement=args.placement)
    lengths = {"short": replace(base, duration_s=args.short), "long": replace(base, duration_s=args.long)}
    rates: dict[str, dict[str, dict[int, float]]] = {c.name: {"short": {}, "long": {}} for c in clients}
    # the client's minor page faults per roundtrip in each window: a recording that grows shows here first
    faults: dict[str, dict[str, list[float]]] = {c.name: {"short": [], "long": []} for c in clients}
    measurer = LocalMeasurer()
    for number in range(1, args.rounds + 1):
        for protocol, server in servers.items():
            members = [c for c in clients if c.protocol == protocol]
            if not members:
                continue
            with tempfile.TemporaryDirectory(prefix="pingpong-window-length-") as work:
                started = measurer.start(server, lengths["short"], Path(work))
                try:
                    for client in members:
                        order = ("short", "long") if (number + len(client.name)) % 2 else ("long", "short")
                        for length in order:
                            attempt = measurer.attempt_on(started, client, lengths[length], number)
                            if attempt.ok:
                                rates[client.name][length][number] = attempt.roundtrips_per_s
                                window_roundtrips = attempt.roundtrips_per_s * (attempt.window_wall_s or 0)
                                if attempt.client_minor_faults is not None and window_roundtrips:
                                    faults[client.name][length].append(attempt.client_minor_faults / window_roundtrips)
                            else:
                                print(f"{client.name} {length} round {number}: {attempt.status}: {attempt.reason}",
                                      file=sys.stderr)
                finally:
                    measurer.stop(started)
    report = {"placement": placement_of(base), "short_s": args.short, "long_s": args.long, "rounds": args.rounds,
              "target": TARGET, "clients": {}}
    for client in clients:
        short, long = rates[client.name]["short"], rates[client.name]["long"]
        if not short.keys() & long.keys():
            report["clients"][client.name] = {"error": "no round measured both windows"}
            continue
        ratio = paired_ratio(long, short)
        within = ratio.low is not None and ratio.low >= 1 - TARGET and ratio.high <= 1 + TARGET
        client_faults = {length: statistics.median(values) if values else None
                         for length, values in faults[client.name].items()}
        report["clients"][client.name] = {"short_rates": short, "long_rates": long, "long_over_short": asdict(ratio),
                                          "within_target": within,
                                          "client_faults_per_roundtrip_median": client_faults}
        interval = f" [{ratio.low:.3f}-{ratio.high:.3f}, {ratio.label()}]" if ratio.low is not None else ""
        print(f"{client.name:<15} {statistics.median(short.values()):>9,.0f}/s in {args.short:g} s windows, "
              f"{statistics.median(long.values()):>9,.0f}/s in {args.long:g} s: long/short {ratio.value:.3f}"
              f"{interval}{'' if within else '  (not shown within ±3%)'}; client page faults per roundtrip "
              f"{client_faults['short'] or 0:.2f} and {client_faults['long'] or 0:.2f}", file=sys.stderr)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
