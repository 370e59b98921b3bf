"""The entry of a Python client driver: parse the contract's flags, hand the run to one workload module's measure(),
print the one JSON report. node/driver/main.js is its twin."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
from typing import Any, Awaitable, Callable

from pingpong import contract
from pingpong.contract import CLIENT_REPORT_FORMAT_VERSION
from pingpong.kit.driver import broadcast, handshakes, idle_holders, open_loop, ping_pong
from pingpong.kit.driver.core import (DriverError, OpenConnection, WindowEvents, library_versions, parse_args,
                                      raise_nofile_limit, run_on_loop)


def main(implementation: str, libraries: list[str], open_connection: OpenConnection,
         settings: Callable[[argparse.Namespace], dict[str, Any]],
         shutdown: Callable[[], Awaitable[Any]] | None = None) -> None:
    """Entry point of a Python client driver: run, print one JSON object on stdout, exit 0 or 1.

    shutdown, if given, runs on the loop after the measurement (e.g. to close a shared client session).
    """
    args = parse_args()
    report = {
        "format_version": CLIENT_REPORT_FORMAT_VERSION,
        "role": "client",
        "implementation": implementation,
        "runtime": {"name": platform.python_implementation().lower(), "version": platform.python_version()},
        "libraries": library_versions(libraries + (["uvloop"] if args.loop == "uvloop" else [])),
        "settings": {contract.COMPRESSION_SETTING: args.compression, contract.TLS_SETTING: bool(args.tls_ca),
                     contract.MALLOC_SETTING: args.malloc, **settings(args)},
        "payload": {"kind": args.payload_kind, "size": args.payload_size},
        "workload": args.workload,
        "error": None,
    }
    workload = {"pingpong": ping_pong if args.rate is None else open_loop, "handshake": handshakes,
                "broadcast": broadcast}[args.workload]
    if args.pairs == 0:  # idle connections only (parse_args allows it with the pingpong workload alone)
        workload = idle_holders
    measurement = workload.measure
    if args.idle_connections or args.workload == "broadcast":
        raise_nofile_limit()

    async def run_then_shut_down():
        try:
            return await measurement(open_connection, args)
        finally:
            if shutdown is not None:
                await shutdown()

    importlib.import_module("hdrh.histogram")  # loaded before the gate, not after the window (encode_histogram)

    if not WindowEvents().armed_then_wait_for_start():
        return  # started ahead of its turn, and the orchestrator closed the gate: nothing to measure or report
    try:
        report.update(run_on_loop(args.loop, run_then_shut_down))
    except Exception as exc:  # every failure becomes a reported error, never a count
        report["error"] = f"{type(exc).__name__}: {exc}" if not isinstance(exc, DriverError) else str(exc)
    report["errors"] = 0 if report["error"] is None else 1
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    if report["error"]:
        print(f"{implementation} client: {report['error']}", file=sys.stderr)
    sys.stderr.flush()
    # Its connections are closed and its report is out: exit without the interpreter's finalization, which took
    # 20-35 ms here (the Python clients' exit came that long after their report), a wait the next attempt had too.
    os._exit(1 if report["error"] else 0)
