"""One run's settings: the measuring options (shared by `run` and `diagnose`), resolved once into a frozen record."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pingpong.contract import (COMPRESSION_MODES, DEFAULT_COMPRESSION, DEFAULT_DURATION_S, DEFAULT_LOOP,
                               DEFAULT_PAIRS, DEFAULT_PAYLOAD_KIND, DEFAULT_PAYLOAD_SIZE, DEFAULT_STALL_TIMEOUT_S,
                               DEFAULT_WARMUP_S, DEFAULT_WORKLOAD, LOOPS, PAYLOAD_KINDS, WORKLOADS)
from pingpong.harness import package_envs
from pingpong.harness.catalog import PROJECT_ROOT
from pingpong.harness.manifest import Implementation
from pingpong.harness.runner import CellSettings, plan_cpus
from pingpong.harness.usage import UsageError

QUICK = {"duration": 1.0, "warmup": 0.5, "repeat": 1}
DEFAULT_REPEAT = 3
DEFAULT_READY_TIMEOUT_S = 15.0
DEFAULT_CLIENT_GRACE_S = 30.0


def add_measuring_options(parser: argparse.ArgumentParser, duration: float = DEFAULT_DURATION_S) -> None:
    """How to measure: the options `run` and `diagnose` share (diagnose measures shorter by default).

    --duration, --warmup and --repeat stay None when not given, so that check_options() can tell an explicit value
    (which beats --quick) from a default.
    """
    measuring = parser.add_argument_group("how to measure")
    measuring.add_argument("--duration", type=float, help=f"measured seconds per repeat (default {duration:g})")
    measuring.add_argument("--warmup", type=float, help=f"unmeasured seconds first (default {DEFAULT_WARMUP_S:g})")
    measuring.add_argument("--repeat", type=int, help=f"repeats per cell, interleaved (default {DEFAULT_REPEAT})")
    measuring.add_argument("--quick", action="store_true",
                           help=f"smoke run: --duration {QUICK['duration']:g} --warmup {QUICK['warmup']:g} "
                                f"--repeat {QUICK['repeat']} (an explicit --duration, --warmup or --repeat wins)")
    parser.set_defaults(measuring_defaults={"duration": duration, "warmup": DEFAULT_WARMUP_S,
                                            "repeat": DEFAULT_REPEAT})
    measuring.add_argument("--loop", choices=LOOPS, default=DEFAULT_LOOP,
                           help="event loop of the Python implementations (auto: what each picks by itself)")
    measuring.add_argument("--compression", choices=COMPRESSION_MODES, default=DEFAULT_COMPRESSION,
                           help="permessage-deflate: each library's out-of-the-box behaviour, off, or on")
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
    measuring.add_argument("--tls", action="store_true",
                           help="wss:// everywhere, with a throwaway CA and server certificate made for this run")
    measuring.add_argument("--workload", choices=WORKLOADS, default=DEFAULT_WORKLOAD,
                           help="pingpong: roundtrips/s on open connections; handshake: connections opened, one "
                                "roundtrip, closed, per second")
    measuring.add_argument("--no-pin", action="store_true",
                           help="do not pin server and client to separate CPUs")
    measuring.add_argument("--ready-timeout", type=float, default=DEFAULT_READY_TIMEOUT_S,
                           help="seconds a server may take to accept its first WebSocket (default %(default)g)")
    measuring.add_argument("--stall-timeout", type=float, default=DEFAULT_STALL_TIMEOUT_S,
                           help="seconds without a completed roundtrip before a client gives up (default %(default)g)")
    measuring.add_argument("--client-grace", type=float, default=DEFAULT_CLIENT_GRACE_S,
                           help="seconds a client may take beyond warmup + duration before it is stopped as hung")


def add_package_options(parser: argparse.ArgumentParser) -> None:
    versions = parser.add_argument_group("other package versions (old releases on demand)")
    versions.add_argument("--python-packages", metavar="SPECS",
                          help='e.g. "aiohttp==3.9.1 uvicorn==0.24.0.post1": every Python implementation runs in a '
                               'cached virtual environment with these instead of the pinned versions')
    versions.add_argument("--node-packages", metavar="SPECS",
                          help='e.g. "ws@8.14.2": every JavaScript implementation loads these versions from a cached '
                               'node_modules instead of the project\'s')


@dataclass(frozen=True)
class RunConfiguration:
    """Every setting of a run, resolved once from the command line: what `run` and `diagnose` measure with.

    Results files record it as "configuration" (see recorded()).
    """

    settings: CellSettings  # what every attempt shares; each sweep point sets payload_size, payload_kind, pairs
    points: tuple[dict[str, Any], ...]  # the sweep's points, in order (one point: no sweep)
    repeat: int
    servers: tuple[Implementation, ...]  # the rows and columns measured
    clients: tuple[Implementation, ...]
    implementations: tuple[Implementation, ...]  # every one the manifests list (recorded with its availability)
    manifests: tuple[Path, ...]
    python_packages: str | None  # --python-packages / --node-packages as given ...
    node_packages: str | None
    package_environments: dict[str, Any]  # ... and what the environments built for them hold
    results_dir: Path
    output_format: str  # what goes to stdout: terminal, md, csv, json or html (report.FORMATS)
    resume: Path | None  # the interrupted run to continue
    command_line: tuple[str, ...]  # as recorded in the results: interpreter, run_bench.py, the arguments

    @property
    def tls(self) -> bool:
        return self.settings.tls_ca is not None

    def recorded(self, settings: CellSettings) -> dict[str, Any]:
        """The JSON mapping of results' "configuration": every CellSettings field (the point's), then
        repeat, pinned, server_cpus, client_cpus (sorted lists or null), servers, clients (names),
        python_packages, node_packages, tls (bool) and manifests (paths as given)."""
        return {**asdict(settings), "repeat": self.repeat, "pinned": settings.server_cpus is not None,
                "server_cpus": sorted(settings.server_cpus) if settings.server_cpus else None,
                "client_cpus": sorted(settings.client_cpus) if settings.client_cpus else None,
                "servers": [s.name for s in self.servers], "clients": [c.name for c in self.clients],
                "python_packages": self.python_packages, "node_packages": self.node_packages,
                "tls": self.tls, "manifests": [str(path) for path in self.manifests]}


def check_options(options: argparse.Namespace) -> argparse.Namespace:
    """Fill in --duration, --warmup and --repeat (explicit, else --quick's, else the defaults) and check every
    measuring option; all problems in one UsageError."""
    fallback = QUICK if options.quick else options.measuring_defaults
    for name in ("duration", "warmup", "repeat"):
        if getattr(options, name) is None:
            setattr(options, name, fallback[name])
    problems = []
    if not options.duration > 0:
        problems.append(f"--duration must be > 0 seconds, got {options.duration:g}")
    if not options.warmup >= 0:
        problems.append(f"--warmup must be >= 0 seconds, got {options.warmup:g}")
    if options.repeat < 1:
        problems.append(f"--repeat must be at least 1, got {options.repeat}")
    options.payload_sizes = _integer_list("--payload-size", options.payload_size, minimum=1, problems=problems)
    options.pairs_list = _integer_list("--pairs", options.pairs, minimum=1, problems=problems)
    options.payload_kinds = [kind.strip() for kind in options.payload_kind.split(",") if kind.strip()]
    unknown_kinds = [kind for kind in options.payload_kinds if kind not in PAYLOAD_KINDS]
    if unknown_kinds or not options.payload_kinds:
        problems.append(f"--payload-kind {options.payload_kind!r}: choose from {', '.join(PAYLOAD_KINDS)}")
    if options.client_processes < 1:
        problems.append(f"--client-processes must be at least 1, got {options.client_processes}")
    if options.workload == "handshake" and (options.pairs_list != [1] or options.client_processes != 1):
        problems.append("--workload handshake opens one connection at a time; it takes no --pairs or "
                        "--client-processes")
    if not options.ready_timeout > 0 or not options.stall_timeout > 0 or not options.client_grace > 0:
        problems.append("--ready-timeout, --stall-timeout and --client-grace must be > 0 seconds")
    if problems:
        raise UsageError("; ".join(problems))
    return options


def _integer_list(option: str, text: str, minimum: int, problems: list[str]) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        problems.append(f"{option} takes whole numbers separated by commas, got {text!r}")
        return [minimum]
    if not values or min(values) < minimum:
        problems.append(f"{option} values must be at least {minimum}, got {text!r}")
        return [minimum]
    return list(dict.fromkeys(values))


def sweep_points(options: argparse.Namespace) -> list[dict[str, Any]]:
    """Every combination of the listed payload sizes, kinds and pair counts: one matrix each."""
    return [{"payload_size": size, "payload_kind": kind, "pairs": pairs}
            for size in options.payload_sizes for kind in options.payload_kinds for pairs in options.pairs_list]


def build_configuration(options: argparse.Namespace, command_line: list[str], implementations: list[Implementation],
                        servers: list[Implementation], clients: list[Implementation]) -> RunConfiguration:
    """Resolve the checked options once: cell settings, the CPUs to pin to, the sweep's points.

    Two steps that cost or make files come after, on demand: with_package_environments() builds (or reuses) what
    --python-packages / --node-packages ask for, with_tls_files() makes the run's certificates.
    """
    server_cpus, client_cpus = plan_cpus(not options.no_pin)
    settings = CellSettings(duration_s=options.duration, warmup_s=options.warmup, loop=options.loop,
                            compression=options.compression, payload_size=DEFAULT_PAYLOAD_SIZE,
                            payload_kind=DEFAULT_PAYLOAD_KIND, ready_timeout_s=options.ready_timeout,
                            stall_timeout_s=options.stall_timeout, pin=not options.no_pin,
                            client_grace_s=options.client_grace, workload=options.workload,
                            client_processes=options.client_processes,
                            server_cpus=tuple(sorted(server_cpus)) if server_cpus else None,
                            client_cpus=tuple(sorted(client_cpus)) if client_cpus else None)
    return RunConfiguration(settings=settings, points=tuple(sweep_points(options)), repeat=options.repeat,
                            servers=tuple(servers), clients=tuple(clients), implementations=tuple(implementations),
                            manifests=tuple(options.manifest), python_packages=options.python_packages,
                            node_packages=options.node_packages, package_environments={},
                            results_dir=options.results_dir, output_format=options.format,
                            resume=getattr(options, "resume", None), command_line=tuple(command_line))


def with_package_environments(configuration: RunConfiguration) -> RunConfiguration:
    """The configuration running in the environments --python-packages / --node-packages ask for (built or reused)."""
    fields, record = package_environments(configuration.python_packages, configuration.node_packages)
    return replace(configuration, settings=replace(configuration.settings, **fields), package_environments=record)


def with_tls_files(configuration: RunConfiguration, folder: Path) -> RunConfiguration:
    """The configuration serving wss:// with a throwaway CA and certificate made in folder."""
    from pingpong.kit.tls import make_tls_files

    files = make_tls_files(folder)
    return replace(configuration, settings=replace(configuration.settings, tls_ca=files.ca, tls_cert=files.cert,
                                                   tls_key=files.key))


def package_environments(python_packages: str | None,
                         node_packages: str | None) -> tuple[dict[str, str | None], dict[str, Any]]:
    """Build (or reuse) the environments --python-packages / --node-packages ask for.

    Returns the CellSettings fields that point at them and a record of what they hold, for the results.
    """
    fields: dict[str, str | None] = {"python_executable": None, "node_modules": None}
    record: dict[str, Any] = {}
    try:
        if python_packages is not None:
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
