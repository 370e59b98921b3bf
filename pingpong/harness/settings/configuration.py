"""One run's settings: the measuring options (shared by `run` and `diagnose`), resolved once into a frozen record."""

from __future__ import annotations

import argparse
import os
import random
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from pingpong.contract import (COMPRESSION_MODES, DEFAULT_COMPRESSION, DEFAULT_DURATION_S, DEFAULT_LOOP, DEFAULT_MALLOC,
                               DEFAULT_PAIRS, DEFAULT_PAYLOAD_KIND, DEFAULT_PAYLOAD_SIZE, DEFAULT_STALL_TIMEOUT_S,
                               DEFAULT_WARMUP_S, DEFAULT_WORKLOAD, LOOPS, MALLOC_MODES, MEASUREMENT_SWITCHES,
                               PAYLOAD_KINDS, RETIRED_SWITCHES, WORKLOADS)
from pingpong.harness.settings import interpreters, package_envs
from pingpong.harness.settings.catalog import DEFAULT_MANIFEST, PROJECT_ROOT
from pingpong.harness.settings.cell import (DEFAULT_PLACEMENT, DEFAULT_RELAY_SILENCE_S, DEFAULT_ROOM_PLACEMENT,
                                           DEFAULT_SATURATION_P99_MS, PLACEMENTS, ROOM_PLACEMENTS, WARMUP_HELPERS,
                                           WARMUP_HELPERS_SPARE, YOUNG_GENERATION_FIXED, YOUNG_GENERATIONS,
                                           CellSettings, plan_cpus, with_planned_cpus)
from pingpong.harness.settings.interpreters import Interpreter
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.settings.round_policy import RoundPolicy, parse_duration, parse_precision
from pingpong.harness.settings.usage import UsageError

QUICK = {"duration": 0.5, "warmup": 0.2, "repeat": 1}  # a smoke run: one round
# Rounds until precise (benchmarks/window_spread.py measured these on a 2-CPU machine; docs/methodology.md):
# the spread between rounds did not shrink with longer windows (0.25 to 2 s), so the shortest, cheapest one. On one
# CPU a cell's rounds differ mostly by the process each got; 0.1 s windows (the shortest the pacer paces) buy an 8th
# round within the budget where 0.2 s ones stopped at 7: on the calm host of 2026-11-29 28-31 of 58 cells within ±3%
# in three runs against 13-16, the rates alike (median ratio 0.996-1.004); on a noisy host the pace read from 6
# slices instead of 12 should cost about as much as the extra round gives (reasoned from stored slices, not measured:
# docs/methodology.md, "A shorter window, an 8th round").
DEFAULT_MATRIX_DURATION_S = 0.1
DEFAULT_MATRIX_WARMUP_S = 0.2
# Node.js needs about half a second to compile its hot path: a Node.js client warms up at least this, the first
# client of a Node.js server process this much longer (benchmarks/window_spread.py measured it; docs/methodology.md).
DEFAULT_JIT_WARMUP_S = 0.5
DEFAULT_MIN_ROUNDS = 6  # the smallest n whose min-max interval of the median covers >= 95% (1 - 2 * 0.5**6)
DEFAULT_MAX_ROUNDS = 20
DEFAULT_PRECISION = 0.03  # the run says how many cells' median intervals are within +-3%, and what the rest would take
DEFAULT_BUDGET_S = 290.0  # rounds beyond the minimum stop when the next one would end after this (the run: ~5 s more)
DEFAULT_REPEAT = 3  # diagnose's repeats of each variant (its intervals say what 3 values can cover)
DEFAULT_READY_TIMEOUT_S = 15.0
DEFAULT_CLIENT_GRACE_S = 30.0


def add_measuring_options(parser: argparse.ArgumentParser, duration: float = DEFAULT_DURATION_S,
                          warmup: float = DEFAULT_WARMUP_S, repeat: int = DEFAULT_REPEAT) -> None:
    """How to measure: the options `run` and `diagnose` share (each with its own window and repeats).

    --duration, --warmup and --repeat stay None when not given, so that resolve_options() can tell an explicit
    value (which beats --quick) from a default. --loop, --compression and --tls take lists (a dimension of the run);
    diagnose refuses a list (its A/B switches are its dimensions).
    """
    measuring = parser.add_argument_group("how to measure")
    measuring.add_argument("--duration", type=float, help=f"measured seconds per attempt (default {duration:g})")
    measuring.add_argument("--warmup", type=float, help=f"unmeasured seconds first (default {warmup:g})")
    measuring.add_argument("--jit-warmup", type=float, default=DEFAULT_JIT_WARMUP_S, metavar="S",
                           help="Node.js sides (V8 compiles while running): a Node.js client warms up at least S "
                                "seconds, the first client of a Node.js server process S longer (default %(default)g)")
    measuring.add_argument("--warmup-helpers", choices=WARMUP_HELPERS, default=WARMUP_HELPERS_SPARE,
                           help="a client's helper threads (a JIT's compilers and collectors) during its warm-up: on "
                                "the orchestrator's spare CPU until just before the window (spare, the default), or "
                                "on the measured CPU throughout (measured); every window has all threads on its CPU")
    measuring.add_argument("--repeat", "--rounds", type=int, dest="repeat", metavar="N",
                           help=f"exactly N rounds (default: {repeat} for diagnose; the matrix runs --min-rounds, then "
                                "more rounds of every cell while a round fits in --budget)")
    measuring.add_argument("--quick", action="store_true",
                           help=f"smoke run: --duration {QUICK['duration']:g} --warmup {QUICK['warmup']:g} "
                                f"--repeat {QUICK['repeat']} (an explicit --duration, --warmup or --repeat wins)")
    parser.set_defaults(measuring_defaults={"duration": duration, "warmup": warmup, "repeat": repeat})
    measuring.add_argument("--loop", default=DEFAULT_LOOP, metavar="LOOP[,LOOP...]",
                           help=f"event loop of the Python implementations: {' | '.join(LOOPS)} (auto: what each "
                                "picks by itself); a list is a dimension, e.g. auto,uvloop")
    measuring.add_argument("--compression", default=DEFAULT_COMPRESSION, metavar="MODE[,MODE...]",
                           help=f"permessage-deflate: {' | '.join(COMPRESSION_MODES)} (each library's "
                                "out-of-the-box behaviour, off, on); a list is a dimension, e.g. default,off")
    measuring.add_argument("--malloc", default=DEFAULT_MALLOC, metavar="MODE[,MODE...]",
                           help=f"glibc malloc in the Python programs: {' | '.join(MALLOC_MODES)} (settled: its mmap "
                                "threshold raised past asyncio's 256 KiB reads before measuring, as a long-running "
                                "process has it; as-is: left as each process finds it, fast or slow by chance); a "
                                "list is a dimension")
    measuring.add_argument("--young-generation", default=YOUNG_GENERATION_FIXED, metavar="MODE[,MODE...]",
                           help=f"V8's young generation in every Node.js process: {' | '.join(YOUNG_GENERATIONS)} "
                                "(fixed: a semi-space of at most 1 MiB, reached early, so no window pays for its "
                                "growth; grows: as Node.js has it, up to 16 MiB); a list is a dimension")
    measuring.add_argument("--payload-size", default=str(DEFAULT_PAYLOAD_SIZE), metavar="BYTES[,BYTES...]",
                           help=f"bytes per message (default {DEFAULT_PAYLOAD_SIZE}); a list sweeps, e.g. 16,1024,65536")
    measuring.add_argument("--payload-kind", default=DEFAULT_PAYLOAD_KIND, metavar="KIND[,KIND...]",
                           help=f"{' | '.join(PAYLOAD_KINDS)} (default {DEFAULT_PAYLOAD_KIND}); a list sweeps")
    measuring.add_argument("--pairs", default=str(DEFAULT_PAIRS), metavar="N[,N...]",
                           help="independent pairs per cell, each in its own room, all driven by the client "
                                "(default 1; see --client-processes); a list sweeps, e.g. 1,10,100")
    measuring.add_argument("--client-processes", type=int, default=1, metavar="K",
                           help="spread each cell's pairs over K client processes (default 1), for when one client "
                                "process saturates its CPU; they share the client's CPUs")
    measuring.add_argument("--load-per-worker", action="store_true",
                           help="--pairs and --client-processes are per server worker: at --workers N, N times as "
                                "many (every worker gets the same load at every N: weak scaling); without it they "
                                "are the whole load, shared by the N workers (strong scaling)")
    measuring.add_argument("--workers", default="1", metavar="N[,N...]",
                           help="worker processes per server, for the servers whose manifest entry declares "
                                "workers (the others are skipped above 1); above 1 a Redis broker (redis-server) "
                                "joins each room across them; a list sweeps, e.g. 1,2")
    measuring.add_argument("--room-placement", default=DEFAULT_ROOM_PLACEMENT, metavar="PLACE[,PLACE...]",
                           help=f"which worker takes each connection: {' | '.join(ROOM_PLACEMENTS)} (kernel: the "
                                "kernel or the framework, on the shared port; room: all of a room's members on one "
                                "worker, client process j on worker j mod N's own port, so --client-processes >= N); "
                                "a list is a dimension, e.g. kernel,room")
    measuring.add_argument("--tls", nargs="?", const="on", default="off", metavar="off,on",
                           help="wss:// everywhere, with a throwaway CA and server certificate made for this run; "
                                "'--tls off,on' measures both, interleaved")
    measuring.add_argument("--workload", choices=WORKLOADS, default=DEFAULT_WORKLOAD,
                           help="pingpong: roundtrips/s on open connections; handshake: connections opened, one "
                                "roundtrip, closed, per second; broadcast: one sender, --receivers N in its room, "
                                "messages delivered per second")
    measuring.add_argument("--receivers", default="1", metavar="N[,N...]",
                           help="broadcast: receivers in the sender's room (default 1), spread over "
                                "--client-processes; a list sweeps, e.g. 1,10,100,1000")
    measuring.add_argument("--idle-connections", default="0", metavar="N[,N...]",
                           help="extra WebSocket connections held open and idle while the pair ping-pongs, spread "
                                "over --client-processes; the server's memory per connection comes from a fit "
                                "over a list, e.g. 0,2500,5000,10000 (a fresh server per attempt)")
    measuring.add_argument("--rate", default=None, metavar="R[,R...]",
                           help="open loop: each pair's A sends R messages/s on a fixed schedule whatever the "
                                "replies, latency from the intended send time; a list sweeps, e.g. 1000,2000,4000")
    measuring.add_argument("--saturation-p99", type=float, default=DEFAULT_SATURATION_P99_MS, metavar="MS",
                           help="open loop: a rate saturates a pair when its p99 latency exceeds MS milliseconds "
                                "or it achieves less than 95%% of the offered rate (default %(default)g)")
    measuring.add_argument("--placement", default=DEFAULT_PLACEMENT, metavar="PLACE[,PLACE...]",
                           help=f"where the two sides run: {' | '.join(PLACEMENTS)} (same-cpu: server and client on "
                                "one CPU, the orchestrator on another: a serial ping-pong pays no cross-CPU wakeup; "
                                "split: each side on CPUs of its own; helpers-across: split, each side's helper "
                                "threads on the other's CPU, so a thread pool's hand-offs cross; auto: same-cpu "
                                "for one pair, split for workloads with parallelism); a list is a dimension, e.g. "
                                "same-cpu,split")
    measuring.add_argument("--no-pin", action="store_true",
                           help="pin nothing: the kernel places server and client (--placement unpinned)")
    measuring.add_argument("--ready-timeout", type=float, default=DEFAULT_READY_TIMEOUT_S,
                           help="seconds a server may take to accept its first WebSocket (default %(default)g)")
    measuring.add_argument("--stall-timeout", type=float, default=DEFAULT_STALL_TIMEOUT_S,
                           help="seconds without a completed roundtrip before a client gives up (default %(default)g)")
    measuring.add_argument("--relay-silence", type=float, default=DEFAULT_RELAY_SILENCE_S, metavar="S",
                           help="each new server's relay check: how long the connections that must receive nothing "
                                "(the sender, another room) are watched for a stray copy (default %(default)g)")
    measuring.add_argument("--client-grace", type=float, default=DEFAULT_CLIENT_GRACE_S,
                           help="seconds a client may take beyond warmup + duration before it is stopped as hung")


def add_round_options(parser: argparse.ArgumentParser) -> None:
    """How many rounds the matrix runs, and in what order (run only; see rounds.py)."""
    rounds = parser.add_argument_group("rounds: the minimum, then every cell alike while a round fits the budget")
    rounds.add_argument("--precision", default=f"{DEFAULT_PRECISION:.0%}", metavar="PCT",
                        help="the report counts the cells whose median's interval is within +-PCT and says how many "
                             "rounds the others would take; it decides no round (default %(default)s)")
    rounds.add_argument("--budget", default=f"{DEFAULT_BUDGET_S:g}s", metavar="DURATION",
                        help="no round beyond the minimum starts if it would end after this much of the run, "
                             "e.g. 90s, 10m, 1h (default %(default)s)")
    rounds.add_argument("--min-rounds", type=int, default=DEFAULT_MIN_ROUNDS, metavar="N",
                        help="rounds every cell gets (default %(default)s: the fewest whose min-max interval of the "
                             "median is a 95%% interval)")
    rounds.add_argument("--max-rounds", type=int, default=DEFAULT_MAX_ROUNDS, metavar="N",
                        help="rounds no cell goes beyond (default %(default)s)")
    rounds.add_argument("--seed", type=int, default=None,
                        help="seed of the rounds' shuffled order (default: drawn at random; always recorded)")
    rounds.add_argument("--host-figure", choices=("auto", "on", "off"), default="auto",
                        help="before the rounds, measure the C raw-TCP floor on one CPU and on two, back to back, "
                             "and derive what one cross-CPU wakeup costs on this host (about 3 s); auto: when "
                             "raw-tcp-c is both a server and a client of the run, as in the default matrix")
    rounds.add_argument("--fresh-server", action="store_true",
                        help="a new server process for every attempt (default: one per server per round, each "
                             "client a new process in a room of its own)")
    rounds.add_argument("--no-spawn-ahead", dest="spawn_ahead", action="store_false",
                        help="start each client process at its turn (default: ahead of it, while the server gets "
                             "ready or the attempt before ends; it loads, then waits unconnected for its go)")


def add_package_options(parser: argparse.ArgumentParser) -> None:
    versions = parser.add_argument_group("other package versions (old releases on demand)")
    versions.add_argument("--python-packages", metavar="SPECS",
                          help='e.g. "aiohttp==3.9.1 uvicorn==0.24.0.post1": every Python implementation runs in a '
                               'cached virtual environment with these instead of the pinned versions')
    versions.add_argument("--python", metavar="PYTHON[,PYTHON...]", dest="pythons",
                          help="the interpreter(s) every Python implementation runs on, each in a cached environment: "
                               "a version (3.9: pyenv's, or pythonX.Y on PATH), a name on PATH (pypy3) or a path; "
                               "a list is a dimension, e.g. 3.9,3.13,pypy3 (`list` shows those found)")
    versions.add_argument("--node-packages", metavar="SPECS",
                          help='e.g. "ws@8.14.2": every JavaScript implementation loads these versions from a cached '
                               'node_modules instead of the project\'s')


@dataclass(frozen=True)
class RunConfiguration:
    """Every setting of a run, resolved once from the command line: what `run` and `diagnose` measure with.

    Results files record it as "configuration" (see recorded()).
    """

    settings: CellSettings  # what every attempt shares; each point sets its dimensions (settings_at)
    points: tuple[dict[str, Any], ...]  # the run's points, in order (one point: no dimension)
    rounds: RoundPolicy
    servers: tuple[Implementation, ...]  # the rows and columns measured
    clients: tuple[Implementation, ...]
    implementations: tuple[Implementation, ...]  # every one the manifests list (recorded with its availability)
    manifests: tuple[Path, ...]
    python_packages: str | None  # --python-packages / --node-packages as given ...
    node_packages: str | None
    package_environments: dict[str, Any]  # ... and what the environments built for them hold
    results_dir: Path
    output_format: str  # what goes to stdout: terminal, md, csv, json or html (results.files.FORMATS)
    resume: Path | None  # the interrupted run to continue
    command_line: tuple[str, ...]  # as recorded in the results: interpreter, run_bench.py, the arguments

    tls_files: tuple[str, str, str] | None = None  # the run's throwaway CA, certificate chain and key (with_tls_files)
    interpreters: tuple[Interpreter, ...] = ()  # --python: the interpreters the Python implementations run on
    python_executables: dict[str, str] = field(default_factory=dict)  # their environments' pythons, by name asked
    host_figure: str = "off"  # whether the run measures the host's wakeup cost first: auto, on or off
    figures: bool = True  # PNG figures beside the results (--no-figures: none)

    def measures_host_figure(self) -> bool:
        """--host-figure on, or auto with the C floor on both axes (measure/host_wakeup.py)."""
        if self.host_figure == "auto":
            return (any(s.name == "raw-tcp-c" for s in self.servers) and any(c.name == "raw-tcp-c" for c in self.clients)
                    and self.resume is None)
        return self.host_figure == "on"

    @property
    def repeat(self) -> int:
        """The rounds every cell gets (more while a round of every cell fits in the budget)."""
        return self.rounds.min_rounds

    @property
    def tls(self) -> bool:
        return any(point["tls"] for point in self.points)

    def settings_at(self, point: dict[str, Any]) -> CellSettings:
        """The settings of one point: the run's, with the point's loop, compression, TLS, payload and pairs; at a
        point of --workers N, the CPUs planned for N (the server N of them, the clients the others)."""
        dimensions = {name: value for name, value in point.items() if name != "tls"}
        if "python" in point:  # --python with several: the point's interpreter's environment, and its JIT warm-up
            dimensions["python_executable"] = self.python_executables.get(point["python"])
            dimensions["python_jit_warmup_s"] = next(interpreter.jit_warmup_s for interpreter in self.interpreters
                                                     if interpreter.asked == point["python"])
        if point["tls"]:
            ca, cert, key = self.tls_files or ("(made when the run starts)", None, None)
            settings = replace(self.settings, **dimensions, tls_ca=ca, tls_cert=cert, tls_key=key)
        else:
            settings = replace(self.settings, **dimensions, tls_ca=None, tls_cert=None, tls_key=None)
        if settings.load_per_worker:  # --load-per-worker: the point's --pairs and --client-processes, N times
            settings = replace(settings, pairs=settings.pairs * settings.workers,
                               client_processes=settings.client_processes * settings.workers)
        return with_planned_cpus(settings) if "workers" in point else settings

    def recorded(self, settings: CellSettings) -> dict[str, Any]:
        """The JSON mapping of results' "configuration": every CellSettings field (the point's), then
        repeat (the rounds every cell gets), rounds (RoundPolicy.recorded()), pinned, server_cpus, client_cpus
        (sorted lists or null), servers, clients (names), python_packages, node_packages, tls (bool), manifests
        (paths as given) and dimensions (the settings given as lists, each with its values)."""
        dimensions = {name: list(dict.fromkeys(point[name] for point in self.points))
                      for name in (self.points[0] if self.points else {})}
        return {**asdict(settings), "repeat": self.repeat, "rounds": self.rounds.recorded(),
                "malloc_scope": "every process",  # --malloc reaches every process the run starts (analysis/plain_twins)
                "dimensions": {name: values for name, values in dimensions.items() if len(values) > 1},
                "pinned": settings.server_cpus is not None,
                "server_cpus": sorted(settings.server_cpus) if settings.server_cpus else None,
                "client_cpus": sorted(settings.client_cpus) if settings.client_cpus else None,
                "servers": [s.name for s in self.servers], "clients": [c.name for c in self.clients],
                "python_packages": self.python_packages, "node_packages": self.node_packages,
                "tls": settings.tls_ca is not None, "manifests": [str(path) for path in self.manifests]}


@dataclass(frozen=True)
class ResolvedOptions:
    """The options of `run` or `diagnose`, checked and resolved once (resolve_options): --quick and the defaults
    applied, each setting that takes a list as its values (a dimension when it has several). Nothing reads the
    argparse Namespace's measuring options after this; build_configuration() makes a run's configuration of it."""

    duration_s: float
    warmup_s: float
    jit_warmup_s: float
    warmup_helpers: str  # --warmup-helpers (measure/warmup_helpers.py)
    rounds: RoundPolicy  # run: exactly --repeat rounds, or as many as the budget takes; diagnose: its --repeat, seed 0
    loops: tuple[str, ...]
    compressions: tuple[str, ...]
    mallocs: tuple[str, ...]
    young_generations: tuple[str, ...]  # --young-generation: V8's in the Node.js processes (settings/cell.py)
    tls_modes: tuple[bool, ...]
    payload_sizes: tuple[int, ...]
    payload_kinds: tuple[str, ...]
    pairs: tuple[int, ...]
    receivers: tuple[int, ...]
    idle_connections: tuple[int, ...]
    rates: tuple[float | None, ...]  # --rate's offered rates per pair; (None,): a closed loop
    workers: tuple[int, ...]  # --workers: worker processes per server
    placements: tuple[str, ...]  # --placement: where the two sides run (settings/cell.py)
    room_placements: tuple[str, ...]  # --room-placement: which worker takes each connection (settings/cell.py)
    workload: str
    client_processes: int
    load_per_worker: bool  # --load-per-worker: --pairs and --client-processes count per worker (settings_at)
    saturation_p99_ms: float
    pin: bool
    ready_timeout_s: float
    stall_timeout_s: float
    client_grace_s: float
    relay_silence_s: float
    manifests: tuple[Path, ...]  # --manifest as given, else the project's manifest.toml
    python_packages: str | None
    node_packages: str | None
    results_dir: Path
    output_format: str  # what goes to stdout: terminal, md, csv, json or html (files.FORMATS; diagnose: md, json)
    resume: Path | None  # run --resume: the interrupted run to continue (diagnose: None)
    host_figure: str = "off"  # run --host-figure: auto, on or off (measure/host_wakeup.py)
    figures: bool = True  # run --no-figures: False
    interpreters: tuple[Interpreter, ...] = ()  # --python, found and probed; (): the running interpreter


def resolve_options(options: argparse.Namespace) -> ResolvedOptions:
    """The options of `run` (options.command "run", or "measure": a run of one program) or `diagnose`, checked: --duration, --warmup and --repeat
    explicit, else --quick's, else the command's defaults; every list parsed; all problems in one UsageError. A
    --repeat left None means rounds within the budget (run only: diagnose has no round options)."""
    fallback = QUICK if options.quick else options.measuring_defaults
    duration_s = fallback["duration"] if options.duration is None else options.duration
    warmup_s = fallback["warmup"] if options.warmup is None else options.warmup
    repeat = fallback["repeat"] if options.repeat is None else options.repeat
    problems = []
    if not duration_s > 0:
        problems.append(f"--duration must be > 0 seconds, got {duration_s:g}")
    if not warmup_s >= 0:
        problems.append(f"--warmup must be >= 0 seconds, got {warmup_s:g}")
    if not options.jit_warmup >= 0:
        problems.append(f"--jit-warmup must be >= 0 seconds, got {options.jit_warmup:g}")
    if repeat is not None and repeat < 1:
        problems.append(f"--repeat must be at least 1, got {repeat}")
    payload_sizes = _integer_list("--payload-size", options.payload_size, minimum=1, problems=problems)
    pairs = _integer_list("--pairs", options.pairs, minimum=1, problems=problems)
    workers = _integer_list("--workers", options.workers, minimum=1, problems=problems)
    payload_kinds = _choice_list("--payload-kind", options.payload_kind, PAYLOAD_KINDS, problems)
    loops = _choice_list("--loop", options.loop, LOOPS, problems)
    compressions = _choice_list("--compression", options.compression, COMPRESSION_MODES, problems)
    mallocs = _choice_list("--malloc", options.malloc, MALLOC_MODES, problems)
    young_generations = _choice_list("--young-generation", getattr(options, "young_generation", YOUNG_GENERATION_FIXED),
                                     YOUNG_GENERATIONS, problems)
    placements = _choice_list("--placement", options.placement, PLACEMENTS, problems)
    room_placements = _choice_list("--room-placement", options.room_placement, ROOM_PLACEMENTS, problems)
    tls_modes = [mode == "on" for mode in _choice_list("--tls", options.tls, ("off", "on"), problems)]
    if options.client_processes < 1:
        problems.append(f"--client-processes must be at least 1, got {options.client_processes}")
    if options.workload == "handshake" and (pairs != [1] or options.client_processes != 1):
        problems.append("--workload handshake opens one connection at a time; it takes no --pairs or "
                        "--client-processes")
    receivers, idle_connections, rates = _workload_lists(options, pairs, problems)
    if "room" in room_placements:
        problems += _room_placement_problems(options, pairs, workers)
    if "same-cpu" in placements and max(workers, default=1) > 1 and "kernel" in room_placements:
        problems.append("--placement same-cpu with --workers above 1 puts each worker on a CPU beside the client "
                        "processes of its rooms: it needs --room-placement room, on this machine (the kernel's "
                        "placement spreads a room over workers)")
    if getattr(options, "load_per_worker", False) and (options.workload != "pingpong" or any(idle_connections)):
        problems.append("--load-per-worker multiplies the pairs and client processes of --workload pingpong by N; "
                        "not with another workload or --idle-connections")
    if not options.ready_timeout > 0 or not options.stall_timeout > 0 or not options.client_grace > 0:
        problems.append("--ready-timeout, --stall-timeout and --client-grace must be > 0 seconds")
    if not options.relay_silence > 0:
        problems.append(f"--relay-silence must be > 0 seconds, got {options.relay_silence:g}")
    problems += measurement_switch_problems(os.environ)
    in_rounds = options.command in ("run", "measure")
    rounds = (_round_policy(options, repeat, problems) if in_rounds else  # diagnose: its repeats, in its own order
              RoundPolicy(min_rounds=repeat, max_rounds=repeat, precision=None, budget_s=None, seed=0))
    if problems:
        raise UsageError("; ".join(problems))
    if any(idle_connections) and not rounds.fresh_server:
        # the server's memory growth must be this attempt's connections alone, not what earlier clients left
        rounds = replace(rounds, fresh_server=True, fresh_server_reason="--idle-connections: memory per connection")
    if max(workers) > 1 and not rounds.fresh_server:
        # each attempt's workers and broker count that attempt's messages alone (and a server process is started
        # with its point's --workers: the rounds group server processes by loop, compression, TLS and malloc only)
        rounds = replace(rounds, fresh_server=True,
                         fresh_server_reason="--workers: a server, its workers and its broker per attempt")
    if "room" in room_placements and not rounds.fresh_server:
        # each client process's URL names a worker's own port, read back once the server's workers serve
        rounds = replace(rounds, fresh_server=True,
                         fresh_server_reason="--room-placement room: a server per attempt, its workers' ports")
    interpreters_asked = getattr(options, "pythons", None)
    return ResolvedOptions(
        interpreters=interpreters.parse(interpreters_asked) if interpreters_asked is not None else (),
        duration_s=duration_s, warmup_s=warmup_s, jit_warmup_s=options.jit_warmup,
        warmup_helpers=getattr(options, "warmup_helpers", WARMUP_HELPERS_SPARE), rounds=rounds, loops=tuple(loops),
        compressions=tuple(compressions), mallocs=tuple(mallocs), young_generations=tuple(young_generations),
        tls_modes=tuple(tls_modes),
        payload_sizes=tuple(payload_sizes), payload_kinds=tuple(payload_kinds), pairs=tuple(pairs),
        receivers=tuple(receivers), idle_connections=tuple(idle_connections), rates=tuple(rates),
        workers=tuple(workers), placements=tuple(placements), room_placements=tuple(room_placements),
        workload=options.workload, client_processes=options.client_processes,
        load_per_worker=getattr(options, "load_per_worker", False),
        saturation_p99_ms=options.saturation_p99, pin=not options.no_pin, ready_timeout_s=options.ready_timeout,
        stall_timeout_s=options.stall_timeout, client_grace_s=options.client_grace,
        relay_silence_s=options.relay_silence, manifests=tuple(options.manifest or [DEFAULT_MANIFEST]), python_packages=options.python_packages,
        node_packages=options.node_packages, results_dir=options.results_dir, output_format=options.format,
        resume=options.resume if in_rounds else None, host_figure=getattr(options, "host_figure", "off"),
        figures=getattr(options, "figures", True))


def _room_placement_problems(options: argparse.Namespace, pairs: list[int], workers: list[int]) -> list[str]:
    """What --room-placement room cannot do with these options: each worker takes the rooms of whole client
    processes, so each of the N workers needs one (min(--pairs, --client-processes) >= N)."""
    if options.workload != "pingpong":
        return ["--room-placement room is for --workload pingpong"]
    if getattr(options, "cluster", None):
        return ["--room-placement room runs on this machine only, not with --cluster"]
    processes = min(min(pairs), options.client_processes)
    if processes < max(workers) and not getattr(options, "load_per_worker", False):  # per worker: N times them
        return [f"--room-placement room gives each worker the rooms of whole client processes: --workers "
                f"{max(workers)} needs --client-processes {max(workers)} or more, and as many --pairs (got "
                f"--client-processes {options.client_processes}, --pairs {min(pairs)})"]
    return []


def _workload_lists(options: argparse.Namespace, pairs: list[int],
                    problems: list[str]) -> tuple[list[int], list[int], list[float | None]]:
    """--receivers, --idle-connections, --rate as lists (a dimension each), and the combinations that make sense."""
    receivers = _integer_list("--receivers", options.receivers, minimum=1, problems=problems)
    idle_connections = _integer_list("--idle-connections", options.idle_connections, minimum=0, problems=problems)
    rates: list[float | None] = [None] if options.rate is None else _number_list("--rate", options.rate, problems)
    broadcast = options.workload == "broadcast"
    if receivers != [1] and not broadcast:
        problems.append("--receivers is for --workload broadcast")
    if broadcast and (pairs != [1] or rates != [None] or idle_connections != [0]):
        problems.append("--workload broadcast is one sender and its receivers: no --pairs, --rate or "
                        "--idle-connections")
    if options.workload == "handshake" and (rates != [None] or idle_connections != [0]):
        problems.append("--workload handshake takes no --rate or --idle-connections")
    if not options.saturation_p99 > 0:
        problems.append("--saturation-p99 must be > 0 milliseconds")
    return receivers, idle_connections, rates


def _number_list(option: str, text: str, problems: list[str]) -> list[float]:
    """Positive numbers separated by commas (whole numbers stay int, for file names and labels)."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        problems.append(f"{option} takes numbers separated by commas, got {text!r}")
        return [1]
    if not values or min(values) <= 0:
        problems.append(f"{option} values must be > 0, got {text!r}")
        return [1]
    return list(dict.fromkeys(int(value) if value.is_integer() else value for value in values))


def _round_policy(options: argparse.Namespace, repeat: int | None, problems: list[str]) -> RoundPolicy:
    """--precision, --budget, --min-rounds, --max-rounds, --seed, --fresh-server, --no-spawn-ahead (run only) as the
    run's RoundPolicy: exactly --repeat rounds when given, else the minimum and more within the budget."""
    try:
        precision = parse_precision(options.precision)
    except ValueError:
        problems.append(f"--precision takes a percentage between 0 and 100, e.g. 3%, got {options.precision!r}")
        precision = DEFAULT_PRECISION
    try:
        budget_s = parse_duration(options.budget)
    except ValueError:
        problems.append(f"--budget takes a duration such as 90s, 4.5m or 1h, got {options.budget!r}")
        budget_s = DEFAULT_BUDGET_S
    if options.min_rounds < 1 or options.max_rounds < options.min_rounds:
        problems.append(f"--min-rounds must be at least 1 and --max-rounds at least --min-rounds, got "
                        f"{options.min_rounds} and {options.max_rounds}")
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
    if repeat is not None:  # exactly that many rounds
        return RoundPolicy(min_rounds=repeat, max_rounds=repeat, precision=None, budget_s=None, seed=seed,
                           fresh_server=options.fresh_server, spawn_ahead=options.spawn_ahead)
    return RoundPolicy(min_rounds=options.min_rounds, max_rounds=options.max_rounds, precision=precision,
                       budget_s=budget_s, seed=seed, fresh_server=options.fresh_server,
                       spawn_ahead=options.spawn_ahead)


def _choice_list(option: str, text: str, choices: tuple[str, ...], problems: list[str]) -> list[str]:
    values = [value.strip() for value in text.split(",")]
    if not values or any(value not in choices for value in values):
        problems.append(f"{option} {text!r}: choose from {', '.join(choices)} (a comma-separated list measures each)")
        return [choices[0]]
    return list(dict.fromkeys(values))


def measurement_switch_problems(environ: Mapping[str, str]) -> list[str]:
    """A measurement switch (MEASUREMENT_SWITCHES) is on with "1" and off with "0", empty or unset; any other value
    would leave it off without a word, so it is refused. A retired switch (RETIRED_SWITCHES) on is refused too, saying
    why: it would measure nothing."""
    return ([f"{name}={environ[name]!r}: a measurement switch is 1 (on) or 0 (off)"
             for name in MEASUREMENT_SWITCHES if environ.get(name, "") not in ("", "0", "1")]
            + [f"{name}=1 is retired (unset it): {why}" for name, why in RETIRED_SWITCHES.items()
               if environ.get(name) == "1"])


def integer_list(text: str, minimum: int) -> list[int]:
    """Whole numbers separated by commas, each at least `minimum`, a repeated one kept once; a ValueError saying what
    is wrong (after the option's name) otherwise. Every list option of the CLI reads its value with it."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"takes whole numbers separated by commas, got {text!r}") from None
    if not values or min(values) < minimum:
        raise ValueError(f"values must be at least {minimum}, got {text!r}")
    return list(dict.fromkeys(values))


def _integer_list(option: str, text: str, minimum: int, problems: list[str]) -> list[int]:
    try:
        return integer_list(text, minimum)
    except ValueError as problem:
        problems.append(f"{option} {problem}")
        return [minimum]


def sweep_points(resolved: ResolvedOptions) -> list[dict[str, Any]]:
    """Every combination of the listed settings: the run's points, each a matrix measured in every round."""
    points = [{"loop": loop, "compression": compression, "tls": tls, "malloc": malloc, "payload_size": size,
               "payload_kind": kind, "pairs": pairs, "receivers": receivers, "idle_connections": idle, "rate": rate}
              for loop in resolved.loops for compression in resolved.compressions for tls in resolved.tls_modes
              for malloc in resolved.mallocs
              for size in resolved.payload_sizes for kind in resolved.payload_kinds for pairs in resolved.pairs
              for receivers in resolved.receivers for idle in resolved.idle_connections
              for rate in resolved.rates]
    if resolved.workers != (1,):  # a dimension only when asked for: other runs' points stay as they were
        points = [dict(point, workers=workers) for workers in resolved.workers for point in points]
    if len(resolved.young_generations) > 1:  # the same: one is a setting, several a dimension
        points = [dict(point, young_generation=young) for young in resolved.young_generations for point in points]
    if len(resolved.placements) > 1:  # the same: one placement is a setting, not a dimension
        points = [dict(point, placement=placement) for placement in resolved.placements for point in points]
    if len(resolved.room_placements) > 1:
        points = [dict(point, room_placement=place) for place in resolved.room_placements for point in points]
    if len(resolved.interpreters) > 1:  # one interpreter is a setting (CellSettings.python), several a dimension
        points = [dict(point, python=interpreter.asked) for interpreter in resolved.interpreters for point in points]
    return points


def build_configuration(resolved: ResolvedOptions, command_line: list[str], implementations: list[Implementation],
                        servers: list[Implementation], clients: list[Implementation]) -> RunConfiguration:
    """The run's configuration from its resolved options: cell settings, the CPUs to pin to, the sweep's points.

    Two steps that cost or make files come after, on demand: with_package_environments() builds (or reuses) what
    --python-packages / --node-packages ask for, with_tls_files() makes the run's certificates.
    """
    server_cpus, client_cpus = plan_cpus(resolved.pin)  # a point of --workers N plans its own (settings_at)
    settings = CellSettings(duration_s=resolved.duration_s, warmup_s=resolved.warmup_s, loop=resolved.loops[0],
                            jit_warmup_s=resolved.jit_warmup_s, warmup_helpers=resolved.warmup_helpers,
                            compression=resolved.compressions[0], malloc=resolved.mallocs[0],
                            young_generation=resolved.young_generations[0],
                            payload_size=DEFAULT_PAYLOAD_SIZE,
                            payload_kind=DEFAULT_PAYLOAD_KIND, ready_timeout_s=resolved.ready_timeout_s,
                            stall_timeout_s=resolved.stall_timeout_s, pin=resolved.pin,
                            relay_silence_s=resolved.relay_silence_s,
                            placement=resolved.placements[0], room_placement=resolved.room_placements[0],
                            client_grace_s=resolved.client_grace_s, workload=resolved.workload,
                            saturation_p99_ms=resolved.saturation_p99_ms,
                            sample_server_memory=any(resolved.idle_connections),
                            client_processes=resolved.client_processes,
                            load_per_worker=resolved.load_per_worker,
                            server_cpus=tuple(sorted(server_cpus)) if server_cpus else None,
                            client_cpus=tuple(sorted(client_cpus)) if client_cpus else None,
                            python=resolved.interpreters[0].asked if len(resolved.interpreters) == 1 else None,
                            python_jit_warmup_s=(resolved.interpreters[0].jit_warmup_s
                                                 if len(resolved.interpreters) == 1 else 0.0))
    return RunConfiguration(settings=settings, points=tuple(sweep_points(resolved)), rounds=resolved.rounds,
                            servers=tuple(servers), clients=tuple(clients), implementations=tuple(implementations),
                            manifests=resolved.manifests, python_packages=resolved.python_packages,
                            node_packages=resolved.node_packages, package_environments={},
                            results_dir=resolved.results_dir, output_format=resolved.output_format,
                            resume=resolved.resume, command_line=tuple(command_line),
                            host_figure=resolved.host_figure, figures=resolved.figures,
                            interpreters=resolved.interpreters)


def with_package_environments(configuration: RunConfiguration) -> RunConfiguration:
    """The configuration running in the environments --python-packages / --node-packages / --python ask for (built
    or reused): one interpreter sets the settings' python_executable, several give each point its own."""
    fields, record = package_environments(configuration.python_packages, configuration.node_packages,
                                          configuration.interpreters)
    executables = {asked: environment["executable_or_modules"]
                   for asked, environment in record.get("python_by_interpreter", {}).items()}
    if len(executables) == 1:
        fields["python_executable"] = next(iter(executables.values()))
    return replace(configuration, settings=replace(configuration.settings, **fields), package_environments=record,
                   python_executables=executables)


def with_tls_files(configuration: RunConfiguration, folder: Path) -> RunConfiguration:
    """The configuration serving wss:// with a throwaway CA and certificate made in folder."""
    from pingpong.kit.tls import make_tls_files

    files = make_tls_files(folder)
    return replace(configuration, tls_files=(files.ca, files.cert, files.key))


def package_environments(python_packages: str | None, node_packages: str | None,
                         interpreters_asked: tuple[Interpreter, ...] = ()) -> tuple[dict[str, str | None],
                                                                                  dict[str, Any]]:
    """Build (or reuse) the environments --python-packages / --node-packages / --python ask for.

    Returns the CellSettings fields that point at them and a record of what they hold, for the results ("python":
    the running interpreter's with --python-packages; "python_by_interpreter": one per --python interpreter, with
    --python-packages applied to each).
    """
    fields: dict[str, str | None] = {"python_executable": None, "node_modules": None}
    record: dict[str, Any] = {}
    try:
        if interpreters_asked:
            specs = package_envs.parse_python_specs(python_packages) if python_packages is not None else []
            record["python_by_interpreter"] = {
                interpreter.asked: asdict(package_envs.python_environment(specs, PROJECT_ROOT, interpreter))
                for interpreter in interpreters_asked}
        elif python_packages is not None:
            environment = package_envs.python_environment(package_envs.parse_python_specs(python_packages),
                                                         PROJECT_ROOT)
            fields["python_executable"] = environment.executable_or_modules
            record["python"] = asdict(environment)
        if node_packages is not None:
            environment = package_envs.node_environment(package_envs.parse_node_specs(node_packages),
                                                       PROJECT_ROOT)
            fields["node_modules"] = environment.executable_or_modules
            record["node"] = asdict(environment)
    except package_envs.EnvironmentBuildError as exc:
        raise UsageError(f"could not build the package environment: {exc}") from None
    return fields, record
