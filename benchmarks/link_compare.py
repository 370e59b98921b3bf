"""Loopback against a veth link: the same cells, client beside the server or on another host, interleaved per round.

It builds hosts on this machine (netns_lab: network namespaces on a bridge, one veth link each), runs a Dask
scheduler with the cluster's mutual TLS and three workers: the server host's worker (server=1), a client worker on
that same host (its traffic to the server goes over loopback), and a client worker on a host of its own (over the
veth link). Every round measures each cell and payload size once over each link, in a shuffled order, on a fresh
server each time; the ratio veth / loopback is paired per round. Beside the rates it reports what explains them:
each path's MTU, and TCP segments per message on each side (a message bigger than the MTU's segment is split in
several over veth, but rides as one over loopback's 64 KiB MTU).

Needs root (namespaces). Prints one JSON object on stdout; a table on stderr.
Usage: python -m benchmarks.link_compare [--rounds 5] [--cells node-ws:node-ws,...] [--payloads 32,65536]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from dataclasses import asdict, replace
from pathlib import Path

from benchmarks import netns_lab
from benchmarks.rounds_setup import implementations_by_role, matrix_settings
from pingpong.harness.analysis.stats import paired_ratio

DEFAULT_CELLS = "raw-tcp-c:raw-tcp-c,node-ws:node-ws,sanic:websockets,aiohttp:node-ws"
LINKS = ("loopback", "veth")


def measure_in_h0(arguments: argparse.Namespace, scheduler: str, tls: Path) -> dict:
    """The rounds, run inside the orchestrator's namespace (this same file, with --inside)."""
    from pingpong.harness.cluster import connection
    from pingpong.harness.cluster import measurer as cluster

    implementations = implementations_by_role()
    connected = connection.Cluster(scheduler, tls)
    measurers = {"loopback": cluster.ClusterMeasurer(connected, clients_on="same-host"),
                 "veth": cluster.ClusterMeasurer(connected, clients_on="other-host")}
    try:
        topology = connected.topology()
        cells = [tuple(pair.split(":")) for pair in arguments.cells.split(",")]
        payloads = [int(size) for size in arguments.payloads.split(",")]
        base = replace(matrix_settings(), duration_s=arguments.duration, compression="off")
        rates: dict[tuple, dict[int, float]] = {}
        segments: dict[tuple, list[dict]] = {}
        generator = random.Random(arguments.seed)
        for round_number in range(1, arguments.rounds + 1):
            jobs = [(cell, size, link) for cell in cells for size in payloads for link in LINKS]
            generator.shuffle(jobs)
            for (server, client), size, link in jobs:
                settings = replace(base, payload_size=size,
                                   payload_kind="binary" if size > 1000 else base.payload_kind)
                attempt = measurers[link].fresh_attempt(implementations[("server", server)],
                                                        implementations[("client", client)], settings,
                                                        round_number)
                key = (server, client, size, link)
                if not attempt.ok:
                    print(f"{server} × {client} {size} B {link} round {round_number}: {attempt.status}: "
                          f"{attempt.reason}", file=sys.stderr)
                    continue
                rates.setdefault(key, {})[round_number] = attempt.roundtrips_per_s
                messages = 2 * attempt.roundtrips  # each side sends two messages per roundtrip
                sides = attempt.placement["tcp_counters"]
                segments.setdefault(key, []).append(
                    {side: (sides[side] or {}).get("Tcp.OutSegs", 0) / messages for side in ("server", "client")}
                    if not attempt.placement["same_network"] else  # one host counts both sides: per side, halved
                    {"per_side": attempt.tcp_counters["Tcp.OutSegs"] / 2 / messages})
            print(f"round {round_number}/{arguments.rounds} done", file=sys.stderr, flush=True)
    finally:
        connected.close()
    report = {"rounds": arguments.rounds, "seed": arguments.seed, "window_s": arguments.duration,
              "links": {link["interface"]: {"mtu": link["mtu"], "loopback": link["loopback"]}
                        for link in topology["links"]}, "cells": []}
    for server, client in cells:
        for size in payloads:
            loop = rates.get((server, client, size, "loopback"), {})
            veth = rates.get((server, client, size, "veth"), {})
            entry = {"server": server, "client": client, "payload_size": size, "loopback": loop, "veth": veth}
            if loop and veth and loop.keys() & veth.keys():
                entry["veth_over_loopback"] = asdict(paired_ratio(veth, loop))
            for link in LINKS:
                seen = segments.get((server, client, size, link), [])
                entry[f"segments_per_message_{link}"] = {
                    side: round(statistics.median(s[side] for s in seen), 2) for side in (seen[0] if seen else {})}
            report["cells"].append(entry)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", default=DEFAULT_CELLS, help="server:client pairs, comma-separated")
    parser.add_argument("--payloads", default="32,65536", help="payload sizes in bytes, comma-separated")
    parser.add_argument("--duration", type=float, default=1.0, help="each attempt's window in seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--inside", nargs=2, metavar=("SCHEDULER", "TLS_DIR"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.inside:
        print(json.dumps(measure_in_h0(arguments, arguments.inside[0], Path(arguments.inside[1]))))
        return 0
    problem = netns_lab.available()
    if problem:
        print(f"link_compare: {problem}", file=sys.stderr)
        return 2
    workers = [("server", "server", "server-host"), ("server", "client", "client-beside-server"),
               ("client", "client", "client-host")]
    with netns_lab.dask_cluster(workers) as (lab, scheduler, tls):
        done = netns_lab.run_in(lab, "h0", [sys.executable, "-m", "benchmarks.link_compare", *sys.argv[1:],
                                            "--inside", scheduler, str(tls)])
    if done.returncode != 0:
        return done.returncode
    report = json.loads(done.stdout)
    for cell in report["cells"]:
        ratio = cell.get("veth_over_loopback")
        text = (f"{ratio['value']:.3f} [{ratio['low']:.3f}–{ratio['high']:.3f}] ({ratio['kind']}, "
                f"{ratio['coverage']:.0%})" if ratio and ratio.get("low") is not None else "n/a")
        medians = {link: f"{statistics.median(cell[link].values()):,.0f}/s" if cell[link] else "n/a"
                   for link in LINKS}
        print(f"{cell['server']} × {cell['client']} {cell['payload_size']} B: loopback {medians['loopback']}, "
              f"veth {medians['veth']}; veth / loopback = {text}; "
              f"segments per message loopback {cell['segments_per_message_loopback']}, "
              f"veth {cell['segments_per_message_veth']}", file=sys.stderr)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
