"""What one minor page fault costs on this host, in µs: the unit that turns a side's page faults per roundtrip into
a share of the roundtrip (analysis/summary.py, whether a side's allocator is settled).

A minor fault on a fresh anonymous page traps into the kernel, which zeroes a page and maps it. On a VM the trap
costs more than on bare metal, and the figure moves with the host as a roundtrip does, so the suite measures it with
every run rather than assume one: the orchestrator writes one byte into each page of a fresh private mapping (huge
pages refused, so every page faults) and writes them again once they are mapped; the difference over the pages is the
fault, the median of TRIALS trials over about 0.2 s. On the EPYC VM of 2026-11-28 it read 2.0-2.9 µs a fault
(12 readings of 9 trials in 10 s), a small C loop 1.8-2.5 µs in the same minutes (docs/methodology.md, what a page
fault costs): about as much, a little more in a process of the size the suite's sides are.
"""

from __future__ import annotations

import mmap
import resource
import statistics
import time
from typing import Any

PAGES = 512  # 2 MiB a trial, about 1.5 ms
# Trials spread over about 0.2 s, so that they meet both of the host's speeds (its stretches last milliseconds to
# seconds) as the run's windows do: ten readings of 9 trials back to back ranged 2.2-3.1 µs here, of 31 trials 10 ms
# apart 2.7-3.2 µs (2026-11-29 00:30 UTC, not kept).
TRIALS = 21
GAP_S = 0.008


def fault_trial_us(pages: int = PAGES) -> tuple[float, int]:
    """One trial: µs per page of the faulting pass less the mapped pass, and the minor faults the process took."""
    page = mmap.PAGESIZE
    size = pages * page
    with mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as region:
        if hasattr(mmap, "MADV_NOHUGEPAGE"):
            region.madvise(mmap.MADV_NOHUGEPAGE)
        faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        began = time.perf_counter_ns()
        for offset in range(0, size, page):
            region[offset] = 1
        faulted = time.perf_counter_ns()
        for offset in range(0, size, page):
            region[offset] = 2
        mapped = time.perf_counter_ns()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
    return ((faulted - began) - (mapped - faulted)) / pages / 1000, faults


def fault_cost(trials: int = TRIALS, pages: int = PAGES, gap_s: float = GAP_S) -> dict[str, Any]:
    """The environment's "page_fault" record: the median trial's µs per fault, every trial, and the faults counted
    (a trial whose pages did not all fault, such as with huge pages, is left out); "error" where it cannot be read."""
    try:
        results = []
        for trial in range(trials):
            if trial:
                time.sleep(gap_s)
            results.append(fault_trial_us(pages))
    except (OSError, ValueError) as exc:
        return {"us_per_fault": None, "error": f"could not map pages: {exc}"}
    counted = [us for us, faults in results if faults >= pages]
    return {"us_per_fault": round(statistics.median(counted), 3) if counted else None,
            "trials_us": [round(us, 3) for us, _ in results], "faults": [faults for _, faults in results],
            "pages": pages,
            "error": None if counted else "no trial faulted on every page (huge pages?)"}

