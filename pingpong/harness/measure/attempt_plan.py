"""What an attempt starts, named once for this machine and for a cluster's hosts alike: each client process's share
of the work, its room and its name, the commands and environments of servers and clients, the warmup a JIT runtime
needs, which processes measure a window, and every deadline an attempt is held to."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from pingpong.contract import MALLOC_ENV, NODE_EXTRA_CA_CERTS_ENV, NODE_MODULES_ENV
from pingpong.harness.settings.cell import (FIXED_YOUNG_GENERATION_NODE_OPTION, YOUNG_GENERATION_FIXED, CellSettings,
                                           pairs_per_process)
from pingpong.harness.settings.manifest import Implementation, resolve_command
from pingpong.harness.system import profilers
from pingpong.kit.allocator import tunables_environment

STDERR_TAIL_LINES = 20  # the lines of a process's stderr an attempt keeps when something went wrong
ROOM_PROBE_TIMEOUT_S = 3.0  # the handshake that shows a long-lived server still answers, before each attempt
CONNECTIONS_PER_S_AT_LEAST = 200  # the slowest client still opens this many per second (its stall timeout aside)

# Runtimes that compile a program's hot path while it runs, and need jit_warmup_s to be steady: V8 (Node.js) took
# about half a second on this 2-CPU machine (benchmarks/window_spread.py, docs/methodology.md); Bun's JavaScriptCore,
# CPython and C were steady after 0.1-0.2 s.
JIT_RUNTIMES = ("node",)


@dataclass(frozen=True)
class ClientShare:
    """What one client process of a cell drives."""

    pairs: int = 1
    idle_connections: int = 0
    receivers: int = 1
    role: str | None = None  # broadcast: "sender" (the sender and its receivers) or "receivers"
    ack_processes: int = 0  # broadcast sender: receivers processes that ack each message


def client_shares(settings: CellSettings) -> list[ClientShare]:
    """How a cell's work is spread over its client processes: pairs (or broadcast receivers) as evenly as possible,
    none without any. Idle connections are held by processes of their own (holders, --pairs 0) after the pairs'
    ones: the --client-processes the pairs leave over, at least one, so that the process measuring the pair pays
    nothing itself for the connections the server holds."""
    if settings.workload == "broadcast":
        receivers = pairs_per_process(settings.receivers, settings.client_processes)
        return [ClientShare(receivers=count, role="sender" if index == 0 else "receivers",
                            ack_processes=len(receivers) - 1 if index == 0 else 0)
                for index, count in enumerate(receivers)]
    pairs = [ClientShare(pairs=count) for count in pairs_per_process(settings.pairs, settings.client_processes)]
    if not settings.idle_connections:
        return pairs
    holders = max(1, min(settings.client_processes - len(pairs), settings.idle_connections))
    return pairs + [ClientShare(pairs=0, idle_connections=count)
                    for count in pairs_per_process(settings.idle_connections, holders)]


def window_processes(settings: CellSettings, shares: list[ClientShare]) -> int:
    """The client processes whose window-start opens the sampled window: the broadcast's sender, or those with pairs
    (not the idle holders)."""
    return 1 if settings.workload == "broadcast" else sum(share.pairs > 0 for share in shares)


# -- names: a long-lived server never reuses a room; a client is numbered by its turn on its server
def room_path(repeat: int, number: int, index: int = 0, processes: int = 1, workload: str = "pingpong") -> str:
    """The room of client process `index` of the attempt at round `repeat`, the `number`th on its server process
    (a broadcast's processes share one room: the sender's receivers may sit in other processes)."""
    return (f"/bench-r{repeat}" + (f"-n{number}" if number > 1 else "")
            + (f"-c{index}" if processes > 1 and workload != "broadcast" else ""))


def process_worker(index: int, workers: int) -> int:
    """--room-placement room: the worker whose own port client process `index` connects to. A process's pairs all
    have rooms of that process (pair_rooms), so each room's members sit on one worker, and with K >= N processes
    every worker gets rooms."""
    return index % workers


def pair_rooms(settings: CellSettings, repeat: int, number: int) -> list[list[str]]:
    """The room of each pair of a ping-pong attempt, per client process (holders, with none, give []): the process's
    room for one pair, ROOM-p0 .. ROOM-p<N-1> for N (as the drivers name them: pair_urls in pingpong/kit/driver/
    core.py and pairUrls in node/driver/core.js; tests/test_workers.py holds them together)."""
    shares = client_shares(settings)
    rooms = []
    for index, share in enumerate(shares):
        room = room_path(repeat, number, index, len(shares), settings.workload)
        rooms.append([room] if share.pairs == 1 else [f"{room}-p{pair}" for pair in range(share.pairs)])
    return rooms


def process_name(index: int, processes: int, number: int) -> str:
    """The name a client process's files and messages carry: client, client1, client-n3, ..."""
    return (f"client{index}" if processes > 1 else "client") + (f"-n{number}" if number > 1 else "")


def room_probe_path(probes: int) -> str:
    """The room of a server's `probes`th room probe (before an attempt: the server still completes a handshake)."""
    return f"/__room_probe_{probes}"


# -- deadlines
def connecting_allowance_s(settings: CellSettings) -> float:
    """Time beyond the usual limits for opening many connections (idle ones, broadcast receivers) first."""
    extra = settings.idle_connections + (settings.receivers if settings.workload == "broadcast" else 0)
    return extra / CONNECTIONS_PER_S_AT_LEAST


def client_limit_s(settings: CellSettings) -> float:
    """How long an attempt's client processes may run, from their start, before they are stopped as hung."""
    return settings.warmup_s + settings.duration_s + settings.client_grace_s + connecting_allowance_s(settings)


def barrier_limit_s(settings: CellSettings) -> float:
    """How long several client processes may take to be connected and ready before the start barrier gives up."""
    return settings.start_barrier_timeout_s + connecting_allowance_s(settings)


# -- what each process is started with
def jit_warmup_of(runtime: str | None, settings: CellSettings) -> float:
    """The warm-up a side of this runtime needs for its compiler: Node.js's --jit-warmup; a Python side's when its
    interpreter compiles (PyPy: settings.python_jit_warmup_s); none for the others."""
    if runtime in JIT_RUNTIMES:
        return settings.jit_warmup_s
    return settings.python_jit_warmup_s if runtime == "python" else 0.0


def with_jit_warmup(settings: CellSettings, client_runtime: str | None, server_runtime: str | None,
                    client_number: int) -> CellSettings:
    """The warmup of one client process: a JIT client (Node.js, a Python client on PyPy) warms up at least its JIT
    warm-up, and the first client of a JIT server process that much longer (the new server is still compiling)."""
    warmup = max(settings.warmup_s, jit_warmup_of(client_runtime, settings))
    if client_number == 1:
        warmup += jit_warmup_of(server_runtime, settings)
    return settings if warmup == settings.warmup_s else replace(settings, warmup_s=warmup)


def process_environment(settings: CellSettings, **extra: str) -> dict[str, str]:
    """The environment of a server or client process: ours, its malloc mode (glibc's tunables fixed when settled,
    kit/allocator.py), V8's young generation fixed (NODE_OPTIONS, read by Node.js processes only; last wins, so
    after a user's own), plus the package environment's location."""
    environment = tunables_environment(settings.malloc, {**os.environ, **extra, MALLOC_ENV: settings.malloc})
    if settings.young_generation == YOUNG_GENERATION_FIXED:
        environment["NODE_OPTIONS"] = " ".join(filter(None, (environment.get("NODE_OPTIONS"),
                                                            FIXED_YOUNG_GENERATION_NODE_OPTION)))
    if settings.tls_ca:  # the WHATWG clients (Node built-in, Bun) take no CA option: the runtime reads this
        environment[NODE_EXTRA_CA_CERTS_ENV] = settings.tls_ca
    if settings.node_modules:
        environment[NODE_MODULES_ENV] = settings.node_modules
    if settings.profile_dir:  # a Node.js side's inspector can then be opened on a free port (system/profilers.py)
        environment["NODE_OPTIONS"] = " ".join(filter(None, (environment.get("NODE_OPTIONS"),
                                                            profilers.NODE_PROFILING_OPTIONS)))
    return environment


def loop_for(implementation: Implementation, requested: str) -> str:
    """The --loop an implementation gets: the requested one, or 'auto' in single-loop runtimes."""
    return requested if requested in implementation.loops else "auto"


def server_scheme(server: Implementation, settings: CellSettings) -> str:
    return "tcp" if server.protocol == "raw-tcp" else "wss" if settings.tls_ca else "ws"


def profiled_command(argv: list[str], implementation: Implementation, side: str,
                     settings: CellSettings) -> list[str]:
    """A Bun side of a profiled attempt runs its own CPU profiler from the start (system/profilers.py: Bun's cannot
    be attached later); every other command is left as it is."""
    if not settings.profile_dir or implementation.runtime != "bun":
        return argv
    return [argv[0], *profilers.bun_profiling_arguments(profilers.bun_profile_folder(Path(settings.profile_dir), side)),
            *argv[1:]]


def server_command(server: Implementation, settings: CellSettings, project_root: Path, host: str,
                   port: int, broker_url: str | None = None, worker_ports: bool = False) -> list[str]:
    """The server's argv; with settings.workers above 1, --workers N too, and the run's --broker URL for a server
    whose N workers are processes (manifest feature "workers"; one with "threads" needs none); worker_ports: each
    worker on a port of its own too (placement by room)."""
    argv = profiled_command(resolve_command(server, project_root, settings.python_executable), server, "server",
                            settings) + [
        "--host", host, "--port", str(port),
        "--loop", loop_for(server, settings.loop), "--compression", settings.compression]
    if settings.tls_cert:
        argv += ["--tls-cert", settings.tls_cert, "--tls-key", settings.tls_key]
    if settings.workers > 1:
        argv += ["--workers", str(settings.workers)]
        if "workers" in server.features:
            argv += ["--broker", broker_url or ""]
    if worker_ports:
        argv += ["--worker-ports"]
    return argv


def client_command(client: Implementation, settings: CellSettings, url: str, pairs: int,
                   project_root: Path, share: ClientShare | None = None) -> list[str]:
    argv = profiled_command(resolve_command(client, project_root, settings.python_executable), client, "client",
                            settings) + [
        "--url", url,
        "--duration", str(settings.duration_s), "--warmup", str(settings.warmup_s),
        "--loop", loop_for(client, settings.loop),
        "--compression", settings.client_compression or settings.compression,
        "--payload-size", str(settings.payload_size), "--payload-kind", settings.payload_kind,
        "--stall-timeout", str(settings.stall_timeout_s)]
    if pairs != 1:
        argv += ["--pairs", str(pairs)]
    if settings.workload != "pingpong":
        argv += ["--workload", settings.workload]
    if settings.tls_ca:
        argv += ["--tls-ca", settings.tls_ca]
    share = share or ClientShare(pairs=pairs, idle_connections=settings.idle_connections,
                                 receivers=settings.receivers, role="sender" if settings.workload == "broadcast"
                                 else None)
    if share.role is not None:
        argv += ["--receivers", str(share.receivers), "--broadcast-role", share.role]
        if share.ack_processes:
            argv += ["--ack-processes", str(share.ack_processes)]
    if share.idle_connections:
        argv += ["--idle-connections", str(share.idle_connections)]
    if settings.rate is not None:
        argv += ["--rate", f"{settings.rate:g}"]
    return argv
