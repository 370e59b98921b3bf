"""Does a plain client reach the settled state by itself? Each plain program, second by second, over a minute.

methodology.md says a long-running asyncio process reaches the allocator's settled state by itself (its first empty
read raises glibc's mmap threshold). This measures it: fresh processes of each plain program (measured from
outside, as in a run) ping-pong against one server for --seconds; every second their rate and their page faults
per roundtrip are read from outside (the kernel's counters of their two sockets, and /proc). Between them, in the
same server process, the driver twin of each program is measured as a run measures it (--malloc settled: the
reference), so the plain program's rate is also given as a ratio to its driver's.

A program in the unsettled state takes about 2 page faults per message it reads (4 per roundtrip for a client that
holds both ends); settled, about none. It prints one JSON object on stdout (every second of every process); a
table on stderr: per process, the first and last 5 s, and the second at which faults fell below 0.5 per roundtrip.
A server is asked the same question with --servers-as-is: fresh processes of each Python server started with
--malloc as-is (the server as its framework's documentation writes it, the allocator left alone) serve the plain
Node.js client (whose allocator is not in question) for --seconds, and the server's page faults per roundtrip are
followed second by second.
Usage: python -m benchmarks.plain_settling [--server node-ws] [--clients websockets-plain,aiohttp-plain]
       [--servers-as-is aiohttp,websockets] [--processes 3] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.rounds_setup import ROOT, implementations_by_role, matrix_settings
from pingpong.harness.measure.attempt_plan import process_environment
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.measure.outside import await_connections, outside_command
from pingpong.harness.measure.server import start_server
from pingpong.harness.settings.cell import CellSettings, cpus_for
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.system import cpu, kernel_signals, listeners, processes
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

SETTLED_FAULTS_PER_ROUNDTRIP = 0.5  # below this a second counts as settled (the matrix flags a side above it)
EDGE_S = 5  # the first and the last seconds compared


def follow(process: processes.ManagedProcess, port: int, seconds: int,
           faults_of: list[int] | None = None) -> list[dict]:
    """Every second of a running plain program: its roundtrips/s and page faults per roundtrip, from outside.
    faults_of: the processes whose page faults are counted (default: the program's own)."""
    tree = listeners.process_trees([process.pid]).get(process.pid, [process.pid])
    faulting = faults_of or tree
    began = time.monotonic()
    counters, faults, last = kernel_signals.connection_counters(tree, port), cpu.minor_faults(faulting), began
    series = []
    for second in range(1, seconds + 1):
        try:
            processes.wait(process.popen, max(0.0, began + second - time.monotonic()))
            break  # it ended by itself
        except subprocess.TimeoutExpired:  # the second has passed, and the program runs on
            pass
        now_counters, now_faults, now = (kernel_signals.connection_counters(tree, port),
                                         cpu.minor_faults(faulting), time.monotonic())
        roundtrips = kernel_signals.counters_delta(counters, now_counters)["data_segs_in"] / 2
        took = cpu.faults_delta(faults, now_faults)
        series.append({"second": second, "roundtrips_per_s": roundtrips / (now - last),
                       "faults_per_roundtrip": took / roundtrips if roundtrips and took is not None else None})
        counters, faults, last = now_counters, now_faults, now
    return series


def settled_from(series: list[dict]) -> int | None:
    """The first second from which every second took fewer than SETTLED_FAULTS_PER_ROUNDTRIP faults per roundtrip."""
    for index in range(len(series)):
        rest = [entry["faults_per_roundtrip"] for entry in series[index:]]
        if all(value is not None and value < SETTLED_FAULTS_PER_ROUNDTRIP for value in rest):
            return series[index]["second"]
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="node-ws")
    parser.add_argument("--clients", default="websockets-plain,aiohttp-plain")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--servers-as-is", default="",
                        help="Python servers to follow with --malloc as-is, serving node-ws-plain (comma-separated)")
    arguments = parser.parse_args()
    implementations = implementations_by_role()
    server = implementations[("server", arguments.server)]
    plain = [implementations[("client", name)] for name in filter(None, arguments.clients.split(","))]
    settings = matrix_settings()
    server_cpus, client_cpus = cpus_for(settings)
    found: dict = {"server": server.name, "seconds": arguments.seconds, "processes": []}
    with stop_signals_raise_interrupt(), tempfile.TemporaryDirectory(prefix="pingpong-settling-") as work:
        started = start_server(server, settings, ROOT, Path(work), server_cpus)
        try:
            for number in range(1, arguments.processes + 1):
                for client in plain:
                    driver = implementations[("client", client.twin)]
                    reference = [run_attempt_on(started, driver, settings, number * 100 + k, ROOT)
                                 for k in range(5)]
                    driver_rate = statistics.median(a.roundtrips_per_s for a in reference if a.ok)
                    url = f"{started.base_url}/settling-{client.name}-{number}"
                    process = processes.start(f"{client.name}-{number}", outside_command(client, settings, url, ROOT),
                                              ROOT, Path(work), cpus=client_cpus,
                                              env=process_environment(settings))
                    try:
                        connected, problem = await_connections(process, started.port, settings.ready_timeout_s)
                        series = [] if problem else follow(process, started.port, arguments.seconds)
                    finally:
                        processes.stop(process)
                    entry = summarize(client.name, number, series, driver_rate, problem)
                    found["processes"].append(entry | {"series": series})
                    print(describe(entry), file=sys.stderr)
        finally:
            processes.stop(started.process)
        for name in filter(None, arguments.servers_as_is.split(",")):
            for number in range(1, arguments.processes + 1):
                entry = follow_server(implementations[("server", name)], implementations[("client", "node-ws-plain")],
                                      replace(settings, malloc="as-is"), number, arguments.seconds, Path(work))
                found.setdefault("servers_as_is", []).append(entry)
                print(describe(entry), file=sys.stderr)
    print(json.dumps(found))
    return 0


def follow_server(server: Implementation, client: Implementation, settings: CellSettings, number: int,
                  seconds: int, work: Path) -> dict:
    """A fresh server process (settings.malloc as it says) served client for seconds: its page faults per roundtrip
    and the rate, second by second, read from outside."""
    server_cpus, client_cpus = cpus_for(settings)
    started = start_server(server, settings, ROOT, work, server_cpus)
    try:
        url = f"{started.base_url}/settling-server-{number}"
        process = processes.start(f"{client.name}-{number}", outside_command(client, settings, url, ROOT), ROOT, work,
                                  cpus=client_cpus, env=process_environment(settings))
        try:
            connected, problem = await_connections(process, started.port, settings.ready_timeout_s)
            server_tree = listeners.process_trees([started.pid]).get(started.pid, [started.pid])
            series = [] if problem else follow(process, started.port, seconds, faults_of=server_tree)
        finally:
            processes.stop(process)
    finally:
        processes.stop(started.process)
    entry = summarize(f"{server.name} server (malloc {settings.malloc})", number, series, None, problem)
    return entry | {"series": series}


def summarize(name: str, number: int, series: list[dict], driver_rate: float | None, problem: str | None) -> dict:
    def median(key: str, part: list[dict]) -> float | None:
        values = [entry[key] for entry in part if entry[key] is not None]
        return statistics.median(values) if values else None

    first, last = series[:EDGE_S], series[-EDGE_S:]
    return {"client": name, "process": number, "problem": problem, "driver_settled_rate": driver_rate,
            "first_rate": median("roundtrips_per_s", first), "last_rate": median("roundtrips_per_s", last),
            "first_faults_per_roundtrip": median("faults_per_roundtrip", first),
            "last_faults_per_roundtrip": median("faults_per_roundtrip", last),
            "settled_from_second": settled_from(series)}


def describe(entry: dict) -> str:
    if entry["problem"]:
        return f"{entry['client']} process {entry['process']}: {entry['problem']}"
    settled = entry["settled_from_second"]
    return (f"{entry['client']} process {entry['process']}: first {EDGE_S} s {entry['first_rate']:.0f}/s, "
            f"{entry['first_faults_per_roundtrip']:.2f} faults/rt; last {EDGE_S} s {entry['last_rate']:.0f}/s, "
            f"{entry['last_faults_per_roundtrip']:.2f} faults/rt"
            + (f" ({entry['last_rate'] / entry['driver_settled_rate']:.2f}× its driver settled, "
               f"{entry['driver_settled_rate']:.0f}/s)" if entry["driver_settled_rate"] else "") + "; "
            + (f"settled from second {settled}" if settled else "never settled"))


if __name__ == "__main__":
    sys.exit(main())
