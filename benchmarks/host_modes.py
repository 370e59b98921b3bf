"""How steady this host is on one CPU, on its own: the host sentinel's ping-pong timed in short slices, back to back.

    python -m benchmarks.host_modes [--duration 60] [--cpu N] [--slice-roundtrips 1000] [--rounds 7]
                                    [--precision 3%]

The sentinel (native/host_sentinel.c, built by native/build.sh) is two C processes passing one byte over a Unix
socketpair, both pinned to one CPU (default: the last of ours, where the matrix measures on one CPU), nothing else
of ours on it; this process asks it for slices of --slice-roundtrips roundtrips, one after another, for --duration
seconds, from another CPU. Its ns per roundtrip moves only with the host, so the series shows what the run's cells
share whatever their libraries: how often the host runs the same work slower (its slow mode), for how long at a
time, how alike slices some time apart are, how much a window of the matrix's length varies from that alone, and
how often a cell of --rounds such windows would be within ±--precision by the suite's criterion
(pingpong/harness/analysis/host_modes.py). It also simulates attempts probed by one slice before the warmup and
one after the window, kept only when neither ran slow, the rule a sentinel in the run would apply.

Prints JSON on stdout (the raw slices and the summary), a few lines on stderr. A missing sentinel binary is a
one-line error and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.rounds_setup import ROOT
from pingpong.harness.analysis.host_modes import describe, interpretation
from pingpong.harness.settings.configuration import DEFAULT_MATRIX_DURATION_S, DEFAULT_MATRIX_WARMUP_S
from pingpong.harness.settings.environment import suite_commit
from pingpong.harness.settings.round_policy import parse_duration, parse_precision
from pingpong.harness.system.host_sentinel import SENTINEL, Sentinel
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

WARMING_ROUNDTRIPS = 20_000  # one slice first, not kept: the CPU and the two processes' caches warm


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=parse_duration, default=60.0, help="seconds of slices (default 60)")
    parser.add_argument("--cpu", type=int, default=sorted(os.sched_getaffinity(0))[-1],
                        help="the CPU the sentinel runs on (default: the last of ours)")
    parser.add_argument("--slice-roundtrips", type=int, default=1000, help="roundtrips a slice (default 1000)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds a simulated cell gets (default 7)")
    parser.add_argument("--precision", type=parse_precision, default=0.03, help="the target (default 3%%)")
    args = parser.parse_args()
    if not SENTINEL.exists():
        print(f"host_modes: {SENTINEL.relative_to(ROOT)} is missing (build it: sh native/build.sh)", file=sys.stderr)
        return 2
    if args.cpu not in os.sched_getaffinity(0):
        print(f"host_modes: --cpu {args.cpu} is not one of ours ({sorted(os.sched_getaffinity(0))})", file=sys.stderr)
        return 2
    if args.slice_roundtrips < 1 or args.rounds < 2:
        print("host_modes: --slice-roundtrips must be at least 1 and --rounds at least 2", file=sys.stderr)
        return 2
    others = os.sched_getaffinity(0) - {args.cpu}
    if others:  # this process asks from another CPU, so that the measured one holds the sentinel alone
        os.sched_setaffinity(0, others)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    slices: list[int] = []
    with stop_signals_raise_interrupt():
        sentinel = Sentinel(args.cpu)
        try:
            sentinel.slice_total_ns(WARMING_ROUNDTRIPS)
            ends = time.monotonic() + args.duration
            while time.monotonic() < ends:
                slices.append(sentinel.slice_total_ns(args.slice_roundtrips))
        finally:
            sentinel.close()
    ns_per_roundtrip = [value / args.slice_roundtrips for value in slices]
    if len(ns_per_roundtrip) < 10:
        print(f"host_modes: only {len(ns_per_roundtrip)} slices in {args.duration} s; give a longer --duration",
              file=sys.stderr)
        return 2
    summary = describe(ns_per_roundtrip, args.slice_roundtrips, DEFAULT_MATRIX_DURATION_S, DEFAULT_MATRIX_WARMUP_S,
                       args.rounds, args.precision)
    for line in interpretation(summary):
        print(line, file=sys.stderr)
    commit, modified = suite_commit(ROOT)
    print(json.dumps({"started_at": started_at, "suite_commit": commit, "suite_modified": modified,
                      "kernel": Path("/proc/sys/kernel/osrelease").read_text().strip(), "cpu": args.cpu,
                      "duration_s": args.duration, "slice_roundtrips": args.slice_roundtrips,
                      "summary": summary, "slices_ns": slices}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
