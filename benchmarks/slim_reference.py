"""A run's results file made small enough to commit under results/reference/'s budget: every attempt's encoded latency
histograms left out (the client report's and the attempt's), everything else kept, the file saying what it lacks.

Each cell's stored summary keeps its percentiles from all its attempts merged. `report` shows the run as before
but for its latencies, which it draws from the histograms: no p99 in the matrix, no latency CDF. A default run's
JSON goes from about 290 KB to 130 KB compressed. Writes OUT (.json.xz: compressed with xz -9e).
Usage: python -m benchmarks.slim_reference RUN.json OUT.json.xz
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path

from pingpong.harness.results.stored import read_json

HISTOGRAM_KEYS = ("latency_histogram", "latency_first_histogram", "latency_last_histogram", "cycle_histogram",
                  "per_pair_hdr_histograms", "hdr_histogram")


def slim(run: dict) -> dict:
    """The run without its attempts' encoded histograms, with a note saying so (pure; the input is not changed)."""
    run = json.loads(json.dumps(run))
    dropped = 0

    def strip(record: dict) -> None:
        nonlocal dropped
        for key in HISTOGRAM_KEYS:
            if record.pop(key, None) is not None:
                dropped += 1

    for cell in run.get("cells", []):
        for attempt in cell.get("attempts", []):
            strip(attempt)
            report = attempt.get("client_report")
            if isinstance(report, dict):
                strip(report)
                if isinstance(report.get("latency"), dict):
                    strip(report["latency"])
                for process in report.get("per_process") or []:
                    strip(process)
    run["slimmed"] = {"left_out": list(HISTOGRAM_KEYS), "histograms": dropped,
                      "why": "results/reference/ budget (benchmarks/slim_reference.py); each cell's stored summary "
                             "keeps its merged percentiles"}
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    if not args.out.name.endswith(".json.xz"):
        print(f"slim_reference: {args.out} should end in .json.xz", file=sys.stderr)
        return 2
    try:
        run = read_json(args.run)
    except (OSError, ValueError) as exc:
        print(f"slim_reference: {args.run}: {exc}", file=sys.stderr)
        return 2
    slimmed = slim(run)
    args.out.write_bytes(lzma.compress(json.dumps(slimmed, indent=1).encode(), preset=9 | lzma.PRESET_EXTREME))
    print(f"slim_reference: {args.out}: {slimmed['slimmed']['histograms']} histograms left out, "
          f"{args.out.stat().st_size:,} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
