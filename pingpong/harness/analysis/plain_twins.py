"""Plain programs beside the suite's drivers: for each server, a program as written (measured from outside, manifest
`twin`) over the driver client of the same library, paired by round, with the signals that tell why they differ
(page faults per roundtrip, CPU per roundtrip, the allocator each ran with). Pure functions of a run and its
summaries."""

from __future__ import annotations

from dataclasses import dataclass

from pingpong.harness.analysis.stats import Ratio, paired_ratio
from pingpong.harness.analysis.summary import Summaries
from pingpong.harness.results.records import RunResult

RUNTIME_NAMES = {"node": "Node.js", "bun": "Bun"}


@dataclass(frozen=True)
class PlainTwin:
    """One server's plain program against the driver client of the same library, in the same run."""

    server: str
    plain: str
    driver: str
    ratio: Ratio  # plain's rate over the driver's: the median of the per-round ratios, with its interval
    plain_faults_per_roundtrip: float | None
    driver_faults_per_roundtrip: float | None
    plain_cpu_us_per_roundtrip: float | None
    driver_cpu_us_per_roundtrip: float | None
    driver_allocator: str
    # the plain program's: as-is in runs from before 2026-11-26 (only the suite's own programs were settled, at their
    # start); since, every process the suite starts runs with the run's --malloc (configuration "malloc_scope")
    plain_allocator: str = "as-is"
    runtime: str = "python"  # the plain program's: glibc's allocator mode explains page faults only in Python

    @property
    def cause(self) -> str:
        """What the signals say, in a few words: page faults apart (the allocator's mode), CPU apart, or neither."""
        plain, driver = self.plain_faults_per_roundtrip, self.driver_faults_per_roundtrip
        if plain is not None and driver is not None and plain - driver >= 0.5:
            if self.runtime == "python":
                return (f"{plain:.1f} against {driver:.1f} page faults per roundtrip: the plain program's heap maps "
                        "and unmaps its buffers (allocator as-is)")
            return (f"{plain:.1f} against {driver:.1f} page faults per roundtrip (not glibc's mode: "
                    f"{RUNTIME_NAMES.get(self.runtime, self.runtime)} does not allocate per read)")
        plain_cpu, driver_cpu = self.plain_cpu_us_per_roundtrip, self.driver_cpu_us_per_roundtrip
        if plain_cpu is not None and driver_cpu is not None and abs(plain_cpu - driver_cpu) >= 0.1 * driver_cpu:
            return f"{plain_cpu:.0f} against {driver_cpu:.0f} µs of client CPU per roundtrip, page faults alike"
        return "page faults and client CPU per roundtrip alike"


EVERY_PROCESS = "every process"  # configuration "malloc_scope": --malloc reaches every process the run starts


def allocators_text(twin: PlainTwin) -> str:
    """How the plain programs and the drivers ran their allocator, for the reports' notes."""
    if twin.plain_allocator == twin.driver_allocator:
        return f"the plain programs and the drivers both ran with --malloc {twin.driver_allocator}"
    return (f"the plain programs ran with glibc's allocator {twin.plain_allocator}; the drivers with --malloc "
            f"{twin.driver_allocator}")


def plain_twins(run: RunResult, summaries: Summaries) -> list[PlainTwin]:
    """Every measured plain program with its driver twin measured on the same server in the same rounds."""
    clients = run.implementations.get("client", {})
    malloc = run.configuration.get("malloc") or "settled"
    plain_malloc = malloc if run.configuration.get("malloc_scope") == EVERY_PROCESS else "as-is"
    found = []
    for cell in run.cells:
        twin = (clients.get(cell.client) or {}).get("twin")
        plain, driver = summaries.get((cell.server, cell.client)), summaries.get((cell.server, twin))
        if not twin or plain is None or driver is None or not plain.measured or not driver.measured:
            continue
        plain_rates, driver_rates = cell.rates_by_round(), run.cell(cell.server, twin).rates_by_round()
        if not plain_rates.keys() & driver_rates.keys():
            continue
        found.append(PlainTwin(
            server=cell.server, plain=cell.client, driver=twin, ratio=paired_ratio(plain_rates, driver_rates),
            plain_faults_per_roundtrip=plain.client_cpu.minor_faults_per_roundtrip,
            driver_faults_per_roundtrip=driver.client_cpu.minor_faults_per_roundtrip,
            plain_cpu_us_per_roundtrip=plain.client_cpu.us_per_roundtrip,
            driver_cpu_us_per_roundtrip=driver.client_cpu.us_per_roundtrip, driver_allocator=malloc,
            plain_allocator=plain_malloc,
            runtime=(clients.get(cell.client) or {}).get("runtime", "python")))
    return found
