"""The settings every attempt of a run shares (CellSettings), and how a cell's pairs spread over client processes."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace

from pingpong.contract import DEFAULT_MALLOC

# Where the two sides of an attempt run (docs/methodology.md, "Placement"). same-cpu: server and client on one CPU,
# the orchestrator and its sampling on the others: a serial ping-pong, where one side works while the other waits,
# then pays no cross-CPU wakeup (about 35 µs each on this VM, four per roundtrip). split: each side on CPUs of its
# own (the server N of them for --workers N, the clients the others). auto: same-cpu for a serial workload (one
# pair, one client process, one worker, closed loop; broadcast is never serial), split for one with parallelism.
# unpinned: the kernel places them (--no-pin). same-cpu with --workers N above 1 (by room only): worker i and the
# client processes of its rooms share one CPU (worker_cpu), so N workers are N copies of the one-worker attempt.
HELPERS_ACROSS = "helpers-across"  # split, each side's helper threads on the other's CPU (measure/warmup_helpers.py)
PLACEMENTS = ("auto", "same-cpu", "split", "unpinned", HELPERS_ACROSS)
# What a split attempt gets when the server's --workers N take every CPU of ours (N = 2 on a 2-CPU host): no CPU is
# left for the clients, so both sides run on all of them and compete for them (recorded as the attempt's
# cpu_placement; docs/methodology.md, "Placement"). Not a choice: --placement split with fewer workers than CPUs.
SHARED = "shared"
DEFAULT_PLACEMENT = "auto"
# Which worker of a --workers server takes each connection (docs/workloads.md, "Every core"). kernel: the server's
# shared port, where the kernel or the framework places each connection (SO_REUSEPORT, node:cluster, a shared
# socket). room: all of a room's members on one worker, as a load balancer hashing on the room places them: each
# worker also listens on a port of its own (--worker-ports), and client process j gets worker j mod N's.
ROOM_PLACEMENTS = ("kernel", "room")
DEFAULT_ROOM_PLACEMENT = "kernel"
# --relay-silence: how long the relay check (measure/probe.py) watches the connections that must receive nothing; a
# copy the server sends them later than this goes unseen (tests/implementations/leaky_server.py leaks at 0.2 s)
DEFAULT_RELAY_SILENCE_S = 0.3
DEFAULT_SATURATION_P99_MS = 10.0  # open loop: p99 above this (or < 95% of the offered rate achieved) = saturated


# --warmup-helpers: where a client's helper threads run during its warm-up (measure/warmup_helpers.py)
WARMUP_HELPERS_SPARE = "spare"  # on the orchestrator's spare CPU until just before the window (the default)
WARMUP_HELPERS_MEASURED = "measured"  # on the measured CPU throughout (the suite before 2026-11-29)
WARMUP_HELPERS = (WARMUP_HELPERS_SPARE, WARMUP_HELPERS_MEASURED)

# --young-generation: V8's young generation in every Node.js process the run starts (docs/methodology.md, "V8's young
# generation held small"). fixed: a semi-space of at most 1 MiB (NODE_OPTIONS=--max-semi-space-size=1; Node.js 20
# starts it at 512 KiB, and it doubles once, early), so no window pays for its growth in page faults; grows: as
# Node.js has it (doubling up to 16 MiB as the heap's survivors ask; the suite before 2026-11-29). NODE_OPTIONS takes
# no --min-semi-space-size. Bun's JavaScriptCore and the other runtimes do not read it.
YOUNG_GENERATION_FIXED = "fixed"
YOUNG_GENERATION_GROWS = "grows"
YOUNG_GENERATIONS = (YOUNG_GENERATION_FIXED, YOUNG_GENERATION_GROWS)
FIXED_YOUNG_GENERATION_NODE_OPTION = "--max-semi-space-size=1"  # MiB, a semi-space (the young generation holds two)


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
    relay_silence_s: float = DEFAULT_RELAY_SILENCE_S  # how long the relay check watches for a stray copy
    placement: str = DEFAULT_PLACEMENT  # PLACEMENTS; placement_of() says what an attempt with these settings gets
    client_grace_s: float = 30.0  # a client may run warmup + duration + this before it is stopped as hung
    start_barrier_timeout_s: float = 30.0  # several client processes: all must be connected and ready within this
    pairs: int = 1  # independent pairs per cell, each in its own room
    client_processes: int = 1  # client processes the pairs are spread over (all on the client's CPUs)
    # --load-per-worker: the run's --pairs and --client-processes count per server worker; an attempt's pairs and
    # client_processes are then already N times them (RunConfiguration.settings_at)
    load_per_worker: bool = False
    tls_ca: str | None = None  # --tls: the run's throwaway CA (clients trust it) ...
    tls_cert: str | None = None  # ... and the server certificate chain and key (servers serve wss:// with them)
    tls_key: str | None = None
    workload: str = "pingpong"  # or "handshake": open, one roundtrip, close, in a loop; or "broadcast"
    receivers: int = 1  # broadcast: receivers in the sender's room, spread over the client processes
    idle_connections: int = 0  # extra connections held idle during the ping-pong, spread over the client processes
    rate: float | None = None  # open loop: messages/s each pair's A sends on a fixed schedule (None: closed loop)
    jit_warmup_s: float = 0.0  # Node.js sides: a client warms up at least this; a new server's first client, longer
    # a client's helper threads (a JIT's compilers and collectors) during its warm-up: on the orchestrator's spare
    # CPU until shortly before the window ("spare"), or on the measured CPU throughout ("measured"; the suite before
    # 2026-11-29): measure/warmup_helpers.py
    warmup_helpers: str = WARMUP_HELPERS_SPARE
    young_generation: str = YOUNG_GENERATION_FIXED  # V8's in every Node.js process: fixed or grows (above)
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
    python: str | None = None  # --python: the interpreter as asked ("3.9", "pypy3"); None: the running one
    # A Python side on a JIT interpreter (PyPy) warms up at least this long, like a Node.js side's --jit-warmup
    # (interpreters.JIT_WARMUP_S: PyPy reached its plateau after about 3 s, benchmarks/jit_warmup.py)
    python_jit_warmup_s: float = 0.0
    python_executable: str | None = None  # replaces "{python}" in every command
    node_modules: str | None = None  # JavaScript implementations load their packages from here
    # --workers: the server's worker processes (a server with the manifest's "workers" feature); above 1 the run
    # starts a Redis broker for each server process and passes --broker
    workers: int = 1
    room_placement: str = DEFAULT_ROOM_PLACEMENT  # ROOM_PLACEMENTS: which worker takes each connection
    # The CPUs planned for the run's point (plan_cpus for its --workers; pin on and two CPUs ours); None: plan them
    # per attempt, or not pinned.
    server_cpus: tuple[int, ...] | None = None
    client_cpus: tuple[int, ...] | None = None


def pairs_per_process(pairs: int, client_processes: int) -> list[int]:
    """How many pairs each client process drives: as even as possible, no process without a pair."""
    count = max(1, min(pairs, client_processes))
    return [pairs // count + (1 if index < pairs % count else 0) for index in range(count)]


@functools.cache
def our_cpus() -> tuple[int, ...]:
    """The CPUs this process may use when the run starts (read once: an attempt moves the orchestrator away from the
    CPU it measures on, and the plan must not shrink with it)."""
    return tuple(sorted(os.sched_getaffinity(0)))


def is_serial(settings: CellSettings) -> bool:
    """Whether the workload is one chain of messages, one side working while the other waits: one pair in one client
    process, one server worker, a closed loop, no broadcast. Only such a workload gains nothing from a second CPU."""
    return (settings.workload in ("pingpong", "handshake") and settings.pairs == 1 and settings.client_processes == 1
            and settings.workers == 1 and settings.rate is None)


def placement_of(settings: CellSettings) -> str:
    """What an attempt with these settings gets: same-cpu, split, shared or unpinned (auto resolved; a host with one
    CPU of ours can only share it; split becomes shared when the server's workers take every CPU)."""
    if not settings.pin or settings.placement == "unpinned":
        return "unpinned"
    if len(our_cpus()) < 2:
        return "same-cpu"
    placement = settings.placement if settings.placement != "auto" else (
        "same-cpu" if is_serial(settings) else "split")
    return SHARED if placement in ("split", HELPERS_ACROSS) and settings.workers >= len(our_cpus()) else placement


def plan_cpus(pin: bool, server_workers: int = 1) -> tuple[set[int] | None, set[int] | None]:
    """The server's and the clients' CPUs (placement split) when pinning is on and at least two CPUs are ours.

    server_workers: the CPUs the server is given (--workers N): it has the first min(N, ours) of ours, the clients
    all the others; so with N = 1 on a 2-CPU host one each, as before. When N takes every CPU (N = 2 here), none is
    left for the clients: both sides get all of ours, and such an attempt is recorded as placement shared."""
    if not pin:
        return None, None
    available = list(our_cpus())
    if len(available) < 2:
        return None, None
    server_count = max(1, min(server_workers, len(available)))
    if server_count == len(available):
        return set(available), set(available)
    return set(available[:server_count]), set(available[server_count:])


def with_planned_cpus(settings: CellSettings) -> CellSettings:
    """These settings with the server's and the clients' CPUs planned for their --workers (plan_cpus)."""
    server_cpus, client_cpus = plan_cpus(settings.pin, settings.workers)
    return replace(settings, server_cpus=tuple(sorted(server_cpus)) if server_cpus else None,
                   client_cpus=tuple(sorted(client_cpus)) if client_cpus else None)


def shared_cpu() -> int:
    """The CPU both sides share with placement same-cpu: our last one (the orchestrator keeps the others)."""
    return worker_cpu(0)


def by_worker(settings: CellSettings) -> bool:
    """Whether an attempt puts each of its server's workers on a CPU of its own beside the client processes of that
    worker's rooms: placement same-cpu with --workers N above 1, by room (a room's members all on one worker)."""
    return placement_of(settings) == "same-cpu" and settings.workers > 1 and settings.room_placement == "room"


def worker_cpu(index: int) -> int:
    """same-cpu by worker: the CPU of worker `index` and of its rooms' client processes; worker 0 on our last CPU (as
    one worker's same-cpu attempt), worker 1 on the one before, and so on, in turn when N is more than our CPUs."""
    cpus = our_cpus()
    return cpus[-1 - index % len(cpus)]


def cpus_for(settings: CellSettings) -> tuple[set[int] | None, set[int] | None]:
    """The server's and the client's CPUs for an attempt with these settings: the run's planned split when it has
    one, else a plan for these settings (diagnose's pinning switches); one CPU for both with same-cpu."""
    placement = placement_of(settings)
    if placement == "unpinned":
        return None, None
    if placement == "same-cpu":
        both = {worker_cpu(index) for index in range(settings.workers if by_worker(settings) else 1)}
        return both, set(both)  # by worker, each client process then runs on its worker's one (client_process_cpus)
    if placement == SHARED:
        return set(our_cpus()), set(our_cpus())
    if settings.server_cpus is not None and settings.client_cpus is not None:
        return set(settings.server_cpus), set(settings.client_cpus)
    return plan_cpus(settings.pin, settings.workers)


def orchestrator_cpus(settings: CellSettings) -> set[int] | None:
    """Where the orchestrator (its sampling, clients loading ahead of their turn) runs during an attempt: off the
    shared CPU (by worker, off every worker's) with same-cpu when another CPU is ours; None: where it is (split and
    unpinned attempts, and same-cpu by worker when the workers have every CPU)."""
    if placement_of(settings) != "same-cpu":
        return None
    others = set(our_cpus()) - cpus_for(settings)[0]
    return others or None


def client_process_cpus(settings: CellSettings, worker: int, client_cpus: set[int] | None) -> set[int] | None:
    """Where a client process whose rooms sit on `worker` runs: that worker's CPU when placed by worker
    (by_worker), else the clients' CPUs."""
    return {worker_cpu(worker)} if by_worker(settings) else client_cpus
