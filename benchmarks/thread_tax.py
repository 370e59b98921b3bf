"""What a C++ server pays for being a process with threads: the same one-thread server as is, and made to start
and join one thread first, alone on one CPU, paired by round.

    python -m benchmarks.thread_tax [--client go-gorilla] [--pairs 4] [--duration 3] [--rounds 9]

The server is cpp-websocketpp with one thread; PINGPONG_CPP_LEAVE_SINGLE_THREADED=1 makes it start and join one
thread before it serves (native/cpp/server.cpp), so from then on glibc's malloc takes its arena locks and
libstdc++'s shared_ptr counts use atomic instructions, as they do in any process that has had a second thread
(both skip them while __libc_single_threaded holds). A copy (the server and a client with --pairs P) runs on our
last CPU with fresh processes, once each way per round, the order alternating by round, as
`benchmarks/corunning.py` runs a copy alone. It prints JSON: per round each variant's server CPU µs per roundtrip
and roundtrips/s, and the µs per roundtrip the threads cost (with threads minus as is) and the rate per server CPU
with threads over as is, paired by round: medians with their order-statistic interval (the coverage it really has).

Why: by room, with one CPU per worker (docs/workloads.md, "Every core"), cpp-websocketpp kept 0.88-0.92x of its
rate per server CPU at N = 2, where the multi-process servers kept 0.94-0.99x; two one-thread copies side by side
kept 0.98x (benchmarks/corunning.py). A server of N threads is never single-threaded; one of N processes is.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.corunning import ROOT, add_copy_options, copy_options_refused, implementation, run_copies
from pingpong.contract import CPP_LEAVE_SINGLE_THREADED_ENV
from pingpong.harness.analysis.stats import interval_label, median_interval
from pingpong.harness.settings.environment import suite_commit
from pingpong.harness.settings.native_build import build_on_first_use

SERVER = "cpp-websocketpp"
SWITCH = CPP_LEAVE_SINGLE_THREADED_ENV
VARIANTS = {"as_is": {}, "with_threads": {SWITCH: "1"}}


def summary(values: list[float]) -> dict:
    """Median, range and the order-statistic interval of the median, labelled with its real coverage."""
    ordered = sorted(values)
    interval = median_interval(ordered)
    return {"median": round(statistics.median(ordered), 3), "min": ordered[0], "max": ordered[-1],
            "rounds": len(ordered),
            "interval": ({"low": interval.low, "high": interval.high, "coverage": interval.coverage,
                          "label": interval_label(interval.kind, interval.coverage, interval.n, ranks=interval.ranks)}
                         if interval else None)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", default="go-gorilla", help="a client of the manifest (default go-gorilla)")
    add_copy_options(parser, 9, "each running both variants")
    args = parser.parse_args()
    if copy_options_refused(args, "thread_tax"):
        return 2
    server, client = implementation("server", SERVER), implementation("client", args.client)
    build_on_first_use([server, client], ROOT)
    cpu = sorted(os.sched_getaffinity(0))[-1]
    rounds = []
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="pingpong-thread-tax-") as work:
        for number in range(1, args.rounds + 1):
            order = list(VARIANTS) if number % 2 else list(reversed(VARIANTS))
            measured = {}
            for variant in order:
                measured[variant] = run_copies([cpu], server, client, args.pairs, args.duration, Path(work),
                                               VARIANTS[variant])[0]
                said = SWITCH in (Path(work) / f"server-{cpu}.stderr").read_text(errors="replace")
                if said != (variant == "with_threads"):  # a server built before the switch ignores it
                    print(f"thread_tax: the server {'did not say' if not said else 'said'} it left its single "
                          f"thread in the {variant} variant (rebuild it: sh native/cpp/build.sh)", file=sys.stderr)
                    return 1
            single, threaded = (measured[variant]["server_cpu_us_per_roundtrip"] for variant in VARIANTS)
            rounds.append({"round": number, "order": order, **measured,
                           "threads_cost_us_per_roundtrip": round(threaded - single, 2),
                           "rate_per_cpu_with_threads_over_as_is": round(single / threaded, 3)})
            print(f"round {number}: {measured}", file=sys.stderr, flush=True)
    commit, modified = suite_commit(ROOT)
    print(json.dumps({"started_at": started_at, "suite_commit": commit, "suite_modified": modified,
                      "server": SERVER, "switch": SWITCH, "client": args.client, "pairs": args.pairs,
                      "duration_s": args.duration, "cpu": cpu,
                      "kernel": Path("/proc/sys/kernel/osrelease").read_text().strip(), "rounds": rounds,
                      "threads_cost_us_per_roundtrip": summary([r["threads_cost_us_per_roundtrip"] for r in rounds]),
                      "rate_per_cpu_with_threads_over_as_is": summary(
                          [r["rate_per_cpu_with_threads_over_as_is"] for r in rounds])}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
