"""The implementations a run can use: manifests loaded, chosen by name, why a pair is skipped, the listing."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pingpong.harness.manifest import Implementation, ManifestError, check_availability, load_manifest
from pingpong.harness.runner import CellSettings, pairs_per_process
from pingpong.harness.usage import UsageError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MANIFEST = PROJECT_ROOT / "manifest.toml"


def load_manifests(paths: list[Path]) -> list[Implementation]:
    implementations: list[Implementation] = []
    for path in paths:
        for implementation in load_manifest(path):
            if any(i.role == implementation.role and i.name == implementation.name for i in implementations):
                raise ManifestError(f"manifest {path}: {implementation.role} '{implementation.name}' is already "
                                    f"defined in an earlier manifest")
            implementations.append(implementation)
    return implementations


def select(implementations: list[Implementation], role: str, names: str | None) -> list[Implementation]:
    known = [implementation for implementation in implementations if implementation.role == role]
    if names is None:
        return known
    by_name = {implementation.name: implementation for implementation in known}
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in by_name]
    if unknown or not wanted:
        raise UsageError(f"unknown {role} {', '.join(repr(n) for n in unknown) or '(none given)'}; "
                         f"valid {role}s: {', '.join(by_name)}")
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
        availability = check_availability(implementation, PROJECT_ROOT)
        if not availability.available:
            return f"{implementation.role} {implementation.name} unavailable: {availability.reason}"
    if server.protocol != client.protocol:
        return f"server speaks {server.protocol}, client speaks {client.protocol}"
    for implementation in (server, client):
        if settings.compression not in implementation.compression:
            return f"{implementation.role} {implementation.name} does not support --compression {settings.compression}"
    if max(pairs_per_process(settings.pairs, settings.client_processes)) > 1 and "pairs" not in client.features:
        return f"client {client.name} drives one pair only (no --pairs)"
    if settings.workload == "handshake" and "handshake" not in client.features:
        return f"client {client.name} does not run --workload handshake"
    if settings.tls_ca:
        for implementation in (server, client):
            if "tls" not in implementation.features:
                return f"{implementation.role} {implementation.name} does not support --tls"
    return None


def availability_record(implementations: list[Implementation]) -> dict[str, dict[str, Any]]:
    """Role -> name -> manifest entry and availability: what results files record as "implementations"."""
    listing: dict[str, dict[str, Any]] = {"server": {}, "client": {}}
    for implementation in implementations:
        availability = check_availability(implementation, PROJECT_ROOT)
        listing[implementation.role][implementation.name] = {**asdict(implementation), **asdict(availability)}
    return listing


def render_listing(implementations: list[Implementation], output_format: str) -> str:
    rows = []
    for implementation in implementations:
        availability = check_availability(implementation, PROJECT_ROOT)
        rows.append({"role": implementation.role, "name": implementation.name, "runtime": implementation.runtime,
                     "protocol": implementation.protocol, "available": availability.available,
                     "why_not": availability.reason, "loops": list(implementation.loops),
                     "compression": list(implementation.compression), "description": implementation.description})
    if output_format == "json":
        return json.dumps(rows, indent=1)
    lines = [f"{'role':<7} {'name':<12} {'runtime':<7} {'protocol':<10} available"]
    for row in rows:
        state = "yes" if row["available"] else f"no: {row['why_not']}"
        lines.append(f"{row['role']:<7} {row['name']:<12} {row['runtime']:<7} {row['protocol']:<10} {state}")
        if row["description"]:
            lines.append(f"{'':<39}{row['description']}")
    lines.append("Servers and clients pair only when they speak the same protocol: a websocket server with websocket "
                 "clients, a raw-tcp floor with raw-tcp clients; other pairs show as '—'.")
    return "\n".join(lines)
