"""What the Python relay servers (servers/*.py) share: the CLI contract, room names, and the server report."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import sys
from typing import Any

from pingpong import contract
from pingpong.contract import (COMPRESSION_MODES, DEFAULT_COMPRESSION, DEFAULT_HOST, DEFAULT_LOOP, INFO_FILE_ENV, LOOPS,
                               SERVER_REPORT_FORMAT_VERSION)
from pingpong.kit import allocator
from pingpong.kit.driver import library_versions, run_on_loop, running_loop_name


def parse_args(description: str, compression_choices: tuple[str, ...] = COMPRESSION_MODES,
               workers: bool = False) -> argparse.Namespace:
    """The contract's server flags. workers: this server runs --workers N processes, joined by --broker (a server
    without the manifest's "workers" feature refuses both)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--loop", choices=LOOPS, default=DEFAULT_LOOP,
                        help="auto: whatever the framework picks by itself")
    parser.add_argument("--compression", choices=COMPRESSION_MODES, default=DEFAULT_COMPRESSION,
                        help="permessage-deflate: the framework's default, refused, or accepted when offered")
    parser.add_argument("--tls-cert", help="PEM certificate chain: serve wss:// (TLS) instead of ws://")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument("--workers", type=int, default=1, help="worker processes serving the port (default 1)")
    parser.add_argument("--broker", help="the Redis broker joining rooms across workers: redis://H:P or unix:///PATH")
    parser.add_argument("--worker-ports", action="store_true",
                        help="each worker also listens on a port of its own, worker i on PORT+1+i (placement by room)")
    args = parser.parse_args()
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.exit(2, f"{parser.prog}: --tls-cert and --tls-key go together\n")
    if not workers and (args.workers != 1 or args.broker or args.worker_ports):
        parser.exit(2, f"{parser.prog}: this server runs one process: no --workers, --broker or --worker-ports\n")
    if args.workers < 1 or (args.workers > 1 and not args.broker):
        parser.exit(2, f"{parser.prog}: --workers must be at least 1, and more than 1 needs --broker\n")
    if args.compression not in compression_choices:
        parser.exit(2, f"{parser.prog}: --compression {args.compression} is not supported by this server "
                       f"(supported: {', '.join(compression_choices)})\n")
    args.malloc = allocator.settle()  # before the framework starts (in sanic's worker too, which re-imports)
    return args


def worker_port_socket(args: argparse.Namespace, index: int | None = None) -> socket.socket:
    """The listening socket of a worker's own port (--worker-ports): worker `index` on PORT+1+index; a worker that its
    framework does not number (Sanic's, uvicorn's) claims the lowest of PORT+1..PORT+N no other worker bound yet.
    Bound without SO_REUSEPORT, so two workers can never share one; OSError when none is free."""
    ports = [args.port + 1 + index] if index is not None else range(args.port + 1, args.port + 1 + args.workers)
    for port in ports:
        listener = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((args.host, port))
            # Two workers may both bind one port before either listens (SO_REUSEADDR allows it); the second to
            # listen is refused (EADDRINUSE) and takes the next port, as a refused bind does.
            listener.listen(socket.SOMAXCONN)
        except OSError:
            listener.close()
            continue
        listener.setblocking(False)
        return listener
    raise OSError(f"--worker-ports: none of the ports {ports[0]}-{ports[-1]} is free for this worker")


def ssl_context(args: argparse.Namespace):
    """The server's TLS context when --tls-cert/--tls-key are given, else None (plain ws://)."""
    if not args.tls_cert:
        return None
    from pingpong.kit.tls import server_context

    return server_context(args.tls_cert, args.tls_key)


def room_of(path: str) -> str:
    """The room a connection joins: its request path without the query string ('/' when empty)."""
    path = path.split("?", 1)[0]
    return path or "/"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def write_server_info(implementation: str, libraries: list[str], args: argparse.Namespace,
                      settings: dict[str, Any]) -> None:
    """Record, from inside the running event loop, what actually runs: loop, versions, settings.

    Written atomically to the file named by PINGPONG_INFO_FILE (set by the orchestrator); a no-op otherwise.
    Frameworks that serve from a worker process call this from the worker, where the loop really runs.
    """
    path = os.environ.get(INFO_FILE_ENV)
    if not path:
        return
    info = {
        "format_version": SERVER_REPORT_FORMAT_VERSION,
        "role": "server",
        "implementation": implementation,
        "pid": os.getpid(),
        "runtime": {"name": platform.python_implementation().lower(), "version": platform.python_version()},
        "libraries": library_versions(libraries + (["uvloop"] if running_loop_name() == "uvloop" else [])),
        "loop_requested": args.loop,
        "loop": running_loop_name(),
        "settings": {contract.COMPRESSION_SETTING: args.compression,
                     contract.TLS_SETTING: bool(getattr(args, "tls_cert", None)),
                     contract.MALLOC_SETTING: getattr(args, "malloc", None), **settings},
    }
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as file:
        json.dump(info, file)
    os.replace(temporary, path)


def stop_requested() -> asyncio.Future:
    """A future that completes on the first SIGTERM or SIGINT: await it to serve until told to stop."""
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, lambda: stop.done() or stop.set_result(None))
    return stop


def run(main, args: argparse.Namespace) -> None:
    """Run main(args) on the loop --loop asks for ('auto' = plain asyncio.run, what the program gets by itself)."""
    run_on_loop(args.loop, lambda: main(args))
