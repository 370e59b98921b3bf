"""The settings every attempt of a run shares (CellSettings), and how a cell's pairs spread over client processes."""

from __future__ import annotations

import os
from dataclasses import dataclass

from pingpong.contract import DEFAULT_MALLOC

DEFAULT_SATURATION_P99_MS = 10.0  # open loop: p99 above this (or < 95% of the offered rate achieved) = saturated


@dataclass(frozen=True)
class CellSettings:
    """The settings every attempt of a run shares; recorded in the results as the run's configuration."""

    duration_s: float
    warmup_s: float
    loop: str
    compression: str
    payload_size: int
    payload_kind: str
    ready_timeout_s: float
    stall_timeout_s: float
    pin: bool
    client_grace_s: float = 30.0  # a client may run warmup + duration + this before it is stopped as hung
    start_barrier_timeout_s: float = 30.0  # several client processes: all must be connected and ready within this
    pairs: int = 1  # independent pairs per cell, each in its own room
    client_processes: int = 1  # client processes the pairs are spread over (all on the client's CPUs)
    tls_ca: str | None = None  # --tls: the run's throwaway CA (clients trust it) ...
    tls_cert: str | None = None  # ... and the server certificate chain and key (servers serve wss:// with them)
    tls_key: str | None = None
    workload: str = "pingpong"  # or "handshake": open, one roundtrip, close, in a loop; or "broadcast"
    receivers: int = 1  # broadcast: receivers in the sender's room, spread over the client processes
    idle_connections: int = 0  # extra connections held idle during the ping-pong, spread over the client processes
    rate: float | None = None  # open loop: messages/s each pair's A sends on a fixed schedule (None: closed loop)
    jit_warmup_s: float = 0.0  # Node.js sides: a client warms up at least this; a new server's first client, longer
    malloc: str = DEFAULT_MALLOC  # glibc malloc in the Python programs: settled, or as-is (pingpong/kit/allocator.py)
    # sample the server's memory and connections before the go even with no idle connection (the N = 0 point of a
    # run over --idle-connections, which the fit of memory per connection needs)
    sample_server_memory: bool = False
    saturation_p99_ms: float = DEFAULT_SATURATION_P99_MS  # open loop: the p99 beyond which an offered rate counts as saturating the pair
    # Switches for diagnose's A/B experiments; the defaults are what the matrix always runs with.
    client_host: str = "127.0.0.1"  # the host in the client's URL; the server always listens on 127.0.0.1
    client_compression: str | None = None  # overrides compression for the client only
    force_nodelay: bool = False  # set TCP_NODELAY on both sides' sockets from outside when the window starts
    trace_syscalls: bool = False  # attach strace -c -f to both sides for the window (slows the cell down)
    # diagnose --profile: profile both sides for the window (system/profilers.py) into this folder (slows the cell)
    profile_dir: str | None = None
    # Old releases on demand (--python-packages, --node-packages): where the other versions are installed.
    python_executable: str | None = None  # replaces "{python}" in every command
    node_modules: str | None = None  # JavaScript implementations load their packages from here
    # --workers: the server's worker processes (a server with the manifest's "workers" feature); above 1 the run
    # starts a Redis broker for each server process and passes --broker
    workers: int = 1
    # The CPUs planned once for the run (pin on and two CPUs ours); None: plan them per attempt, or not pinned.
    server_cpus: tuple[int, ...] | None = None
    client_cpus: tuple[int, ...] | None = None


def pairs_per_process(pairs: int, client_processes: int) -> list[int]:
    """How many pairs each client process drives: as even as possible, no process without a pair."""
    count = max(1, min(pairs, client_processes))
    return [pairs // count + (1 if index < pairs % count else 0) for index in range(count)]


def plan_cpus(pin: bool, server_workers: int = 1) -> tuple[set[int] | None, set[int] | None]:
    """Disjoint CPUs for server and client when pinning is on and at least two CPUs are ours.

    server_workers: the most worker processes a server of the run gets (--workers): the server has k = min(N, half
    the CPUs) of them and the client the next k, so one each on a 2-CPU host whatever N, one each with N = 1 as
    before, and the same CPUs at every point of a --workers sweep."""
    if not pin:
        return None, None
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        return None, None
    server_count = max(1, min(server_workers, len(available) // 2))
    return set(available[:server_count]), set(available[server_count:2 * server_count])


def cpus_for(settings: CellSettings) -> tuple[set[int] | None, set[int] | None]:
    """The run's planned CPUs when it has them, else a plan for these settings (diagnose's pinning switches)."""
    if settings.pin and settings.server_cpus is not None and settings.client_cpus is not None:
        return set(settings.server_cpus), set(settings.client_cpus)
    return plan_cpus(settings.pin, settings.workers)
