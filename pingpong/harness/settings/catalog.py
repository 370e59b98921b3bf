"""The implementations a run can use: manifests loaded, chosen by name, why a pair is skipped, the listing."""

from __future__ import annotations

import csv
import importlib.metadata
import io
import json
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any

from pingpong.harness.settings import interpreters
from pingpong.harness.settings.cell import CellSettings, pairs_per_process
from pingpong.harness.settings.environment import runtime_version
from pingpong.harness.settings.manifest import (ALL_SET, DEFAULT_SET, Implementation, ManifestError, check_availability,
                                                importable, load_manifest)
from pingpong.harness.settings.usage import UsageError
from pingpong.harness.system import broker

PROJECT_ROOT = Path(__file__).resolve().parents[3]  # pingpong/harness/settings/catalog.py
DEFAULT_MANIFEST = PROJECT_ROOT / "manifest.toml"


def load_manifests(paths: list[Path]) -> list[Implementation]:
    implementations: list[Implementation] = []
    for path in paths:
        for implementation in load_manifest(path):
            if any(i.role == implementation.role and i.name == implementation.name for i in implementations):
                raise ManifestError(f"manifest {path}: {implementation.role} '{implementation.name}' is already "
                                    f"defined in an earlier manifest")
            implementations.append(implementation)
    names = {implementation.name for implementation in implementations}
    for implementation in implementations:
        clash = sorted(names & set(implementation.sets)) or ([ALL_SET] if ALL_SET in names else [])
        if clash:
            raise ManifestError(f"{implementation.role} '{implementation.name}': set '{clash[0]}' is also the name "
                                f"of an implementation; --servers and --clients could not tell them apart")
    return implementations


def set_names(implementations: list[Implementation]) -> list[str]:
    """Every named set of the manifests, the default first, then 'all'."""
    named = dict.fromkeys([DEFAULT_SET] + [name for i in implementations for name in i.sets])
    return list(named) + [ALL_SET]


def name_list(option: str, names: str) -> list[str]:
    """'a,b' as ['a', 'b']; an empty name ('a,,b', a trailing comma, nothing at all) is refused."""
    parts = [name.strip() for name in names.split(",")]
    if not all(parts):
        raise UsageError(f"{option} {names!r} has an empty name; give names separated by single commas")
    return parts


def select(implementations: list[Implementation], role: str, names: str | None,
           excluded: str | None = None) -> list[Implementation]:
    """The implementations of a role named in names, less those named in excluded (either role).

    A name is an implementation's or a set's (the manifest's `sets`; 'all' is every one of the role); None is the
    default set. A set stands for its members of this role, in manifest order.
    """
    known = [implementation for implementation in implementations if implementation.role == role]
    by_name = {implementation.name: implementation for implementation in known}
    sets = set_names(implementations)
    requested = [DEFAULT_SET] if names is None else name_list(f"--{role}s", names)
    unknown = [name for name in requested if name not in by_name and name not in sets]
    if unknown:
        raise UsageError(f"unknown {role} {', '.join(repr(n) for n in unknown)}; "
                         f"valid {role}s: {', '.join(by_name)}; or a set: {', '.join(sets)}")
    wanted = []
    for name in requested:
        if name in by_name:
            wanted.append(name)
        else:
            wanted += [i.name for i in known if name == ALL_SET or name in i.sets]
    if excluded is not None:
        every_name = {implementation.name for implementation in implementations}
        dropped = name_list("--exclude", excluded)
        unknown = [name for name in dropped if name not in every_name]
        if unknown:
            raise UsageError(f"--exclude: unknown name {', '.join(repr(n) for n in unknown)}; "
                             f"valid names: {', '.join(dict.fromkeys(i.name for i in implementations))}")
        wanted = [name for name in wanted if name not in dropped]
    if not wanted:
        raise UsageError(f"no {role} left to run after --exclude {excluded}" if excluded is not None else
                         f"--{role}s {names}: no {role} belongs to it")
    return [by_name[name] for name in dict.fromkeys(wanted)]


def find(implementations: list[Implementation], role: str, name: str) -> Implementation:
    for implementation in implementations:
        if implementation.role == role and implementation.name == name:
            return implementation
    valid = ", ".join(i.name for i in implementations if i.role == role)
    raise UsageError(f"unknown {role} {name!r}; valid {role}s: {valid}")


def skip_reason(server: Implementation, client: Implementation, settings: CellSettings) -> str | None:
    """Why a pair cannot be measured here and now, or None."""
    for implementation in (server, client):
        availability = check_availability(implementation, PROJECT_ROOT, settings.python_executable,
                                          python_name(settings))
        if not availability.available:
            return f"{implementation.role} {implementation.name} unavailable: {availability.reason}"
        if (settings.loop == "uvloop" and implementation.runtime == "python" and settings.python_executable
                and not importable(settings.python_executable, "uvloop")):
            return f"{implementation.role} {implementation.name}: uvloop does not install on {python_name(settings)}"
    if server.protocol != client.protocol:
        return f"server speaks {server.protocol}, client speaks {client.protocol}"
    for implementation in (server, client):
        if settings.compression not in implementation.compression:
            return f"{implementation.role} {implementation.name} does not support --compression {settings.compression}"
    if max(pairs_per_process(settings.pairs, settings.client_processes)) > 1 and "pairs" not in client.features:
        return f"client {client.name} drives one pair only (no --pairs)"
    if settings.workload == "handshake" and "handshake" not in client.features:
        return f"client {client.name} does not run --workload handshake"
    for feature in workload_features(settings):
        for implementation in (server, client):
            if feature not in implementation.features:
                return f"{implementation.role} {implementation.name} does not declare {feature} (its manifest entry)"
    if settings.tls_ca:
        for implementation in (server, client):
            if "tls" not in implementation.features:
                return f"{implementation.role} {implementation.name} does not support --tls"
    if settings.room_placement == "room" and not takes_rooms_by_port(server):
        return (f"server {server.name} runs one process: --room-placement room needs workers or thread-ports (its "
                f"manifest entry)")
    if settings.workers > 1:
        if cpu_use(server) is None:
            return (f"server {server.name} uses one CPU only: it declares neither workers nor threads "
                    f"(its manifest entry)")
        missing = broker.unavailable_reason() if "workers" in server.features else None
        if missing:
            return f"--workers {settings.workers} needs a Redis broker: {missing}"
    return None


def python_name(settings: CellSettings) -> str:
    """The interpreter a cell's Python implementations run on, as a reason names it."""
    return f"--python {settings.python}" if settings.python else "the --python-packages environment"


def takes_rooms_by_port(server: Implementation) -> bool:
    """Whether each of the server's workers (processes, or threads with thread-ports) can listen on a port of its own
    (--worker-ports), which placement by room needs."""
    return "workers" in server.features or "thread-ports" in server.features


def cpu_use(server: Implementation) -> str | None:
    """How a server uses --workers N CPUs, from its manifest features (contract.CPU_FEATURES): "processes" (N of them,
    rooms joined through the broker), "threads" (N in one process, rooms in memory), or None: one CPU only."""
    return ("processes" if "workers" in server.features else "threads" if "threads" in server.features
            else None)


def cpus_text(server: Implementation) -> str:
    """How a server uses --workers N CPUs, for --list; with thread-ports, that it can be placed by room too."""
    text = CPU_USE_TEXT[cpu_use(server)]
    return text + ("; by room, a loop and a port per thread" if "thread-ports" in server.features else "")


CPU_USE_TEXT = {"processes": "--workers N: N processes on one port, rooms joined through a Redis broker",
                "threads": "--workers N: N threads in one process, rooms in its memory",
                None: "one CPU only: refuses --workers above 1"}


def workload_features(settings: CellSettings) -> list[str]:
    """The manifest features (contract.WORKLOAD_FEATURES) a cell with these settings needs on both sides."""
    return [feature for feature, needed in (("broadcast", settings.workload == "broadcast"),
                                            ("idle-connections", settings.idle_connections > 0),
                                            ("open-loop", settings.rate is not None)) if needed]


def nothing_runnable(servers: list[Implementation], clients: list[Implementation],
                     settings: list[CellSettings]) -> str | None:
    """Why no pair of this selection can be measured with any of these settings (one line), or None."""
    reasons = [skip_reason(s, c, point) for point in settings for s in servers for c in clients]
    if any(reason is None for reason in reasons):
        return None
    return f"nothing to measure: every selected pair is skipped (first: {reasons[0]})"


def availability_record(implementations: list[Implementation]) -> dict[str, dict[str, Any]]:
    """Role -> name -> manifest entry and availability: what results files record as "implementations"."""
    listing: dict[str, dict[str, Any]] = {"server": {}, "client": {}}
    for implementation in implementations:
        availability = check_availability(implementation, PROJECT_ROOT)
        listing[implementation.role][implementation.name] = {**asdict(implementation), **asdict(availability)}
    return listing


@cache
def _module_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def package_version(kind: str, name: str, project_root: Path = PROJECT_ROOT) -> str | None:
    """The installed version of a manifest requirement's package: a Python module's distribution (read with
    importlib.metadata) or an npm package (its node_modules/<name>/package.json); None when not installed."""
    if kind == "python-module":
        for distribution in _module_distributions().get(name.split(".")[0], [name]):
            try:
                return importlib.metadata.version(distribution)
            except importlib.metadata.PackageNotFoundError:
                continue
        return None
    if kind == "node-package":
        try:
            return json.loads((project_root / "node_modules" / name / "package.json").read_text()).get("version")
        except (OSError, ValueError):
            return None
    return None


@cache
def _runtime_version(runtime: str) -> str | None:
    return runtime_version(runtime, PROJECT_ROOT)


def installed_versions(implementation: Implementation) -> dict[str, str | None]:
    """What an implementation runs on here: its runtime's version, then each package it requires (in order)."""
    versions = {implementation.runtime: _runtime_version(implementation.runtime)}
    for requirement in implementation.requires:
        kind, _, name = requirement.partition(":")
        if kind in ("python-module", "node-package"):
            versions[name] = package_version(kind, name)
        if kind == "file":
            versions |= built_versions(PROJECT_ROOT / name)
    return versions


def built_versions(path: Path) -> dict[str, str | None]:
    """What a built program was built with, as its build script recorded it beside it (FILE.versions, a JSON
    object: toolchain and pinned libraries); {} when it recorded nothing."""
    try:
        recorded = json.loads((path.parent / (path.name + ".versions")).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in recorded.items()} if isinstance(recorded, dict) else {}


LISTING_FIELDS = ("role", "name", "runtime", "protocol", "available", "why_not", "versions", "loops", "compression",
                  "sets", "description", "cpus")


def listing_rows(implementations: list[Implementation]) -> list[dict[str, Any]]:
    rows = []
    for implementation in implementations:
        availability = check_availability(implementation, PROJECT_ROOT)
        rows.append({"role": implementation.role, "name": implementation.name, "runtime": implementation.runtime,
                     "protocol": implementation.protocol, "available": availability.available,
                     "why_not": availability.reason, "versions": installed_versions(implementation),
                     "loops": list(implementation.loops), "compression": list(implementation.compression),
                     "sets": list(implementation.sets), "description": implementation.description,
                     # a server: how it uses --workers N CPUs (CPU_USE_TEXT); a client: None
                     "cpus": cpus_text(implementation) if implementation.role == "server" else None})
    return rows


def format_versions(versions: dict[str, str | None]) -> str:
    """{'python': '3.11.7', 'aiohttp': '3.14.5'} as 'python 3.11.7, aiohttp 3.14.5' ('?' where not found)."""
    return ", ".join(f"{name} {version or '?'}" for name, version in versions.items() if name != "native") or "—"


def render_listing(implementations: list[Implementation], output_format: str) -> str:
    """The implementations as a table (md, the default), JSON (a list of objects) or CSV (one row each)."""
    rows = listing_rows(implementations)
    if output_format == "json":
        return json.dumps(rows, indent=1)
    if output_format == "csv":
        output = io.StringIO()
        writer = csv.DictWriter(output, fieldnames=LISTING_FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "versions": format_versions(row["versions"]), "loops": " ".join(row["loops"]),
                             "compression": " ".join(row["compression"]), "sets": " ".join(row["sets"])})
        return output.getvalue().rstrip("\n")
    lines = [f"{'role':<7} {'name':<16} {'runtime':<7} {'protocol':<10} {'available':<10} versions"]
    for row in rows:
        state = "yes" if row["available"] else "no"
        lines.append(f"{row['role']:<7} {row['name']:<16} {row['runtime']:<7} {row['protocol']:<10} {state:<10} "
                     f"{format_versions(row['versions'])}")
        sets = [name for name in row["sets"] if name != DEFAULT_SET]
        in_sets = f"(not in the default matrix: set {', '.join(sets)})" if DEFAULT_SET not in row["sets"] else None
        for text in (row["description"], row["cpus"] and f"CPUs: {row['cpus']}", in_sets,
                     row["why_not"] and f"not available: {row['why_not']}"):
            if text:
                lines.append(f"{'':<8}{text}")
    lines.append("Servers and clients pair only when they speak the same protocol: a websocket server with websocket\n"
                 "clients, a raw-tcp floor with raw-tcp clients; other pairs show as '—'.")
    lines.append("Python interpreters found here (--python NAME[,NAME...]; the first is the running one):")
    lines += [f"{'':<8}{interpreter.asked:<8} {interpreter.label:<32} {interpreter.executable}"
              for interpreter in interpreters.found_here()]
    return "\n".join(lines)
