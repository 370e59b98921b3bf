"""Pure functions of a cluster run (--cluster): the address rules, mismatches between hosts, clock offsets, and the
server side's window interpolated from its host's samples."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from pingpong.harness.system.broker import publish_figures

SECURE_SCHEME = "tls"


def address_problem(address: str, insecure: bool) -> str | None:
    """Why a --cluster address is refused, or None. Only tls:// and tcp:// schedulers are accepted, and a plain
    tcp:// one only on a loopback address unless the user says --insecure (a Dask scheduler runs whatever code a
    connected client sends: an open one on a network is remote code execution for anyone who reaches it)."""
    parts = urlsplit(address)
    if parts.scheme not in (SECURE_SCHEME, "tcp") or not parts.hostname or parts.port is None:
        return f"--cluster {address!r}: expected tls://HOST:PORT (a Dask scheduler with TLS)"
    if parts.scheme == "tcp" and not insecure and not is_loopback(parts.hostname):
        return (f"--cluster {address}: a plain tcp:// scheduler on a network address lets anyone who reaches it run "
                f"code on every worker; use tls:// with the cluster's certificates (docs/cluster.md), or say "
                f"--insecure")
    return None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


FINGERPRINT_FIELDS = ("commit", "local_changes", "python", "node")


def fingerprint_mismatches(reference: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """What differs between the orchestrator's checkout and setup and a worker's, one phrase each."""
    found = []
    for name in FINGERPRINT_FIELDS:
        if reference.get(name) != other.get(name):
            found.append(f"{name} {other.get(name)} (here {reference.get(name)})")
    for group in ("python_packages", "npm_packages"):
        mine, theirs = reference.get(group) or {}, other.get(group) or {}
        for package in sorted(set(mine) | set(theirs)):
            if mine.get(package) != theirs.get(package):
                found.append(f"{package} {theirs.get(package)} (here {mine.get(package)})")
    return found


def clock_offset(sent_ns: int, remote_ns: int, received_ns: int) -> tuple[int, int]:
    """The remote clock minus ours, from one exchange, and its uncertainty (half the round trip): NTP's estimate."""
    return remote_ns - (sent_ns + received_ns) // 2, (received_ns - sent_ns) // 2


def best_offset(exchanges: list[tuple[int, int, int]]) -> dict[str, int]:
    """The offset from the exchange with the shortest round trip (the least room for asymmetry)."""
    offset, uncertainty = min((clock_offset(*exchange) for exchange in exchanges), key=lambda pair: pair[1])
    return {"offset_ns": offset, "uncertainty_ns": uncertainty, "exchanges": len(exchanges)}


def translate(wall_ns: int, from_offset_ns: int, to_offset_ns: int) -> int:
    """A time on one host's clock, on another's (each offset is that host's clock minus the orchestrator's)."""
    return wall_ns - from_offset_ns + to_offset_ns


def interpolate(samples: list[tuple[int, float, dict[str, int]]], at_ns: int) -> tuple[float, dict[str, float]]:
    """The cumulative CPU and each counter at at_ns, linear between the two samples around it (the nearest sample
    when at_ns lies outside them)."""
    if at_ns <= samples[0][0]:
        return samples[0][1], dict(samples[0][2])
    for (t0, cpu0, counters0), (t1, cpu1, counters1) in zip(samples, samples[1:]):
        if t0 <= at_ns <= t1:
            share = (at_ns - t0) / (t1 - t0) if t1 > t0 else 0.0
            counters = {name: counters0[name] + share * (counters1.get(name, counters0[name]) - counters0[name])
                        for name in counters0}
            return cpu0 + share * (cpu1 - cpu0), counters
    return samples[-1][1], dict(samples[-1][2])


def server_window(samples: list[tuple[int, float, dict[str, int]]], start_ns: int,
                  end_ns: int) -> dict[str, Any]:
    """The server's CPU seconds and its host's counter deltas over [start_ns, end_ns] (its own clock), and whether
    its samples covered the whole window (else the figures are clipped to what was sampled)."""
    if len(samples) < 2 or end_ns <= start_ns:
        return {"cpu_s": None, "tcp_counters": None, "covered": False}
    cpu_start, counters_start = interpolate(samples, start_ns)
    cpu_end, counters_end = interpolate(samples, end_ns)
    return {"cpu_s": cpu_end - cpu_start,
            "tcp_counters": {name: round(counters_end[name] - counters_start[name])
                             for name in counters_end if name in counters_start},
            "covered": samples[0][0] <= start_ns and end_ns <= samples[-1][0]}


def summed_counters(*sides: dict[str, int] | None) -> dict[str, int] | None:
    """Counter deltas of several hosts added up: what one host's counters would say with both sides on it."""
    present = [side for side in sides if side]
    if not present:
        return None
    return {name: sum(side.get(name, 0) for side in present) for name in present[0]}


def broker_window(samples: list[tuple[int, float, dict[str, int]]], start_ns: int,
                  end_ns: int) -> dict[str, Any] | None:
    """--workers N > 1: the broker's PUBLISH calls and CPU over [start_ns, end_ns] (its host's clock), interpolated
    from its samples (wall ns, cumulative CPU s, {"publishes": calls}) as system/broker.window_figures gives them
    for a local window; None without two samples around the window."""
    window = server_window(samples, start_ns, end_ns)
    if window["cpu_s"] is None or not window["covered"]:
        return None
    with_readings_us = window["tcp_counters"].get("cpu_us_with_readings")
    return publish_figures(window["tcp_counters"].get("publishes", 0), window["cpu_s"],
                           with_readings_us / 1e6 if with_readings_us is not None else None)
