"""Stress the --tls path: WebSocket-over-TLS handshakes against every TLS server, and the TLS cells of the tests.

Two measurements, each printing one JSON object on stdout and a summary on stderr:

  handshakes  For each TLS-capable WebSocket server (started as a run starts it, pinned to the server's CPU),
              --connections trials per opener, openers interleaved. A trial is the relay check's pattern: three
              wss:// connections (TCP + TLS + HTTP upgrade), a text and a binary message relayed, all closed.
              'thread' opens them with the websockets sync client (a background thread reads the TLS socket while
              the caller writes to it), 'asyncio' with the probe's connection (the asyncio client, one thread).
              Reports trial times, failures and hangs.
  cells       The TLS cells of tests/test_tls.py, measured --rounds times through the runner: failures / attempts.

--busy K keeps K extra processes spinning on the CPUs during the measurement (the load of the suite and more).
Usage: python -m benchmarks.tls_stress handshakes [--connections 200] [--busy 2]
       python -m benchmarks.tls_stress cells [--rounds 30] [--busy 0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from pingpong.harness.measure import probe
from pingpong.harness.measure.local import run_attempt
from pingpong.harness.settings.cell import CellSettings, plan_cpus
from pingpong.harness.settings.manifest import load_manifest, resolve_command
from pingpong.harness.system import processes
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt
from pingpong.kit.tls import client_context, make_tls_files

ROOT = Path(__file__).resolve().parent.parent
HANDSHAKE_TIMEOUT_S = probe.VERIFY_TIMEOUT_S
TEST_SERVERS = ("aiohttp", "node-ws", "bun")
TEST_CLIENTS = ("websockets", "node-builtin", "bun")


@contextmanager
def busy_processes(count: int, log_dir: Path):
    """count processes spinning in a loop for as long as the block runs; stopped and reaped after it."""
    spinners = [processes.start(f"busy{index}", [sys.executable, "-c", "while True: pass"], ROOT, log_dir)
                for index in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            processes.stop(spinner, grace_s=1)


def relay_with(open_connection, url: str, ca_file: str) -> None:
    """The relay check's pattern: A and B in a room, C in another; A sends text to B, B sends bytes to A."""
    room = f"/stress-{time.monotonic_ns()}"
    with open_connection(url, room, ca_file) as a, open_connection(url, room, ca_file) as b, \
            open_connection(url, f"{room}-other", ca_file):
        a.send("stress: text")
        if b.recv(timeout=HANDSHAKE_TIMEOUT_S) != "stress: text":
            raise AssertionError("B did not receive A's text")
        b.send(b"stress: bytes")
        if a.recv(timeout=HANDSHAKE_TIMEOUT_S) != b"stress: bytes":
            raise AssertionError("A did not receive B's bytes")


def open_with_thread(url: str, path: str, ca_file: str):
    """The websockets sync client (what the probe used before): a background thread reads the TLS socket."""
    from websockets.sync.client import connect

    return connect(f"{url}{path}", open_timeout=HANDSHAKE_TIMEOUT_S, compression=None, ping_interval=None,
                   ssl=client_context(ca_file))


def open_with_asyncio(url: str, path: str, ca_file: str):
    """The probe's connection now: the asyncio client driven on a private loop by blocking calls, one thread."""
    return probe.open_connection(url, path, HANDSHAKE_TIMEOUT_S, ca_file)


OPENERS = {"thread": open_with_thread, "asyncio": open_with_asyncio}
HANG_LIMIT_S = 15.0  # a trial still running after this is counted as hung (its thread is abandoned)


def timed_trial(opener, url: str, ca_file: str) -> tuple[float | None, str | None]:
    """(seconds, None) when the relay pattern completed, else (None, why); runs in a thread so a hang is seen."""
    outcome: dict = {}

    def trial() -> None:
        started = time.perf_counter()
        try:
            relay_with(opener, url, ca_file)
            outcome["seconds"] = time.perf_counter() - started
        except Exception as exc:
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    thread = threading.Thread(target=trial, daemon=True)
    thread.start()
    thread.join(HANG_LIMIT_S)
    if thread.is_alive():
        return None, f"hung for more than {HANG_LIMIT_S:g} s"
    return outcome.get("seconds"), outcome.get("error")


def describe(times_s: list[float], failures: list[str]) -> dict:
    attempts = len(times_s) + len(failures)
    result = {"attempts": attempts, "failures": len(failures), "failure_reasons": sorted(set(failures))[:5]}
    if times_s:
        ordered = sorted(times_s)
        result |= {"median_ms": round(statistics.median(ordered) * 1e3, 2),
                   "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3, 2),
                   "max_ms": round(ordered[-1] * 1e3, 2)}
    return result


def measure_handshakes(connections: int, busy: int) -> dict:
    servers = [i for i in load_manifest(ROOT / "manifest.toml")
               if i.role == "server" and i.protocol == "websocket" and "tls" in i.features]
    server_cpus, _ = plan_cpus(True)
    report: dict = {"connections_per_opener": connections, "busy_processes": busy, "servers": {}}
    with tempfile.TemporaryDirectory(prefix="pingpong-tls-stress-") as folder:
        work = Path(folder)
        files = make_tls_files(work)
        with busy_processes(busy, work):
            for server in servers:
                port = processes.free_port()
                argv = resolve_command(server, ROOT) + ["--host", "127.0.0.1", "--port", str(port),
                                                        "--tls-cert", files.cert, "--tls-key", files.key]
                process = processes.start(server.name, argv, ROOT, work, cpus=server_cpus)
                try:
                    url = f"wss://127.0.0.1:{port}"
                    probe.wait_until_ready(url, process, 20, files.ca)
                    times: dict[str, list[float]] = {name: [] for name in OPENERS}
                    failures: dict[str, list[str]] = {name: [] for name in OPENERS}
                    for _ in range(connections):
                        for name, opener in OPENERS.items():
                            seconds, problem = timed_trial(opener, url, files.ca)
                            if problem:
                                failures[name].append(problem)
                            else:
                                times[name].append(seconds)
                    report["servers"][server.name] = {name: describe(times[name], failures[name]) for name in OPENERS}
                finally:
                    processes.stop(process)
                line = ", ".join(f"{name} {r['failures']}/{r['attempts']} failed, median {r.get('median_ms')} ms, "
                                 f"max {r.get('max_ms')} ms" for name, r in report["servers"][server.name].items())
                print(f"{server.name}: {line}", file=sys.stderr)
    return report


def measure_cells(rounds: int, busy: int) -> dict:
    implementations = {(i.role, i.name): i for i in load_manifest(ROOT / "manifest.toml")}
    failures: list[dict] = []
    attempts = 0
    with tempfile.TemporaryDirectory(prefix="pingpong-tls-stress-") as folder:
        files = make_tls_files(Path(folder))
        settings = CellSettings(duration_s=0.5, warmup_s=0.2, loop="auto", compression="default", payload_size=4,
                                payload_kind="text-ascii", ready_timeout_s=15, stall_timeout_s=10, pin=True,
                                tls_ca=files.ca, tls_cert=files.cert, tls_key=files.key)
        with busy_processes(busy, Path(folder)):
            for round_number in range(1, rounds + 1):
                for server in TEST_SERVERS:
                    for client in TEST_CLIENTS:
                        attempt = run_attempt(implementations[("server", server)],
                                              implementations[("client", client)], settings, round_number, ROOT)
                        attempts += 1
                        if not attempt.ok:
                            failures.append({"round": round_number, "server": server, "client": client,
                                             "status": attempt.status, "reason": attempt.reason})
                print(f"round {round_number}: {len(failures)} failures / {attempts} attempts so far", file=sys.stderr)
    return {"rounds": rounds, "busy_processes": busy, "attempts": attempts, "failures": len(failures),
            "failed_attempts": failures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("handshakes", "cells"))
    parser.add_argument("--connections", type=int, default=200, help="trials per opener per server")
    parser.add_argument("--rounds", type=int, default=30, help="times each TLS cell of the tests is measured")
    parser.add_argument("--busy", type=int, default=0, help="extra processes spinning on the CPUs meanwhile")
    args = parser.parse_args()
    with stop_signals_raise_interrupt():  # `kill PID` stops the servers and spinners this started, as Ctrl-C does
        if args.what == "handshakes":
            report = measure_handshakes(args.connections, args.busy)
        else:
            report = measure_cells(args.rounds, args.busy)
            print(f"TLS cells: {report['failures']} failures / {report['attempts']} attempts", file=sys.stderr)
    report["python"] = sys.version.split()[0]
    report["cpus"] = sorted(os.sched_getaffinity(0))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
