"""The host's figure (analysis/host_wakeup.py): the C raw-TCP floor in both placements, back to back in each round,
before a run's rounds. A run measures it when the floor is in its matrix (the default run), or with --host-figure."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from pingpong.harness.analysis.host_wakeup import HostWakeup, wakeup_cost
from pingpong.harness.measure.local import run_attempt
from pingpong.harness.settings.cell import CellSettings, our_cpus
from pingpong.harness.settings.manifest import Implementation, check_availability

FLOOR = "raw-tcp-c"  # the C relay and client: the least work per message, so the wakeups stand out
ROUNDS = 5
WINDOW_S = 0.2
WARMUP_S = 0.1


def floor_pair(implementations: list[Implementation],
               project_root: Path) -> tuple[Implementation, Implementation] | None:
    """The C floor's server and client, when both are available here."""
    found = {(i.role, i.name): i for i in implementations if check_availability(i, project_root).available}
    server, client = found.get(("server", FLOOR)), found.get(("client", FLOOR))
    return (server, client) if server and client else None


def measure_host_wakeup(implementations: list[Implementation], settings: CellSettings, project_root: Path,
                        rounds: int = ROUNDS) -> HostWakeup | None:
    """The floor in both placements, alternating (same-cpu first in odd rounds, split first in even ones); None on a
    host with one CPU of ours, without the floor, or when an attempt fails (said on stderr)."""
    pair = floor_pair(implementations, project_root)
    if pair is None or len(our_cpus()) < 2:
        return None
    base = replace(settings, duration_s=WINDOW_S, warmup_s=WARMUP_S, pin=True, pairs=1, client_processes=1,
                   workers=1, workload="pingpong", rate=None, idle_connections=0, tls_ca=None, tls_cert=None,
                   tls_key=None, compression="default", payload_size=4, payload_kind="text-ascii",
                   server_cpus=None, client_cpus=None, profile_dir=None, trace_syscalls=False)
    placements = {"same-cpu": replace(base, placement="same-cpu"), "split": replace(base, placement="split")}
    rates: dict[str, list[float]] = {"same-cpu": [], "split": []}
    cpu_us: dict[str, list[float]] = {"same-cpu": [], "split": []}  # both sides' CPU µs per roundtrip
    for number in range(1, rounds + 1):
        order = ("same-cpu", "split") if number % 2 else ("split", "same-cpu")
        for placement in order:
            attempt = run_attempt(*pair, placements[placement], number, project_root)
            if not attempt.ok:
                print(f"host figure: {FLOOR} {placement} failed ({attempt.status}: {attempt.reason}); not measured",
                      file=sys.stderr)
                return None
            rates[placement].append(attempt.raw_rate)  # the host's own µs, not at the reference pace
            if attempt.server_cpu_s is not None and attempt.client_cpu_s is not None and attempt.roundtrips:
                cpu_us[placement].append((attempt.server_cpu_s + attempt.client_cpu_s) * 1e6 / attempt.roundtrips)
    complete = len(cpu_us["same-cpu"]) == len(cpu_us["split"]) == rounds
    return wakeup_cost(f"{FLOOR} × {FLOOR}", rates["same-cpu"], rates["split"],
                       cpu_us["same-cpu"] if complete else None, cpu_us["split"] if complete else None)
