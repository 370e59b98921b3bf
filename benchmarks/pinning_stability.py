"""How stable is one cell, pinned vs not pinned? Alternates pinned and unpinned attempts of one cell in one run.

Prints one JSON object on stdout (per mode: every repeat's rate, median, min, max, CV); a summary on stderr.
Usage: python -m benchmarks.pinning_stability [--server node-ws] [--client node-ws] [--repeat 5] [--duration 5]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

from pingpong.harness.analysis.stats import paired_ratio, summarize
from pingpong.harness.measure.local import run_attempt
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import load_manifest

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="node-ws")
    parser.add_argument("--client", default="node-ws")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    args = parser.parse_args()
    implementations = {(i.role, i.name): i for i in load_manifest(ROOT / "manifest.toml")}
    server, client = implementations[("server", args.server)], implementations[("client", args.client)]
    pinned = CellSettings(duration_s=args.duration, warmup_s=args.warmup, loop="auto", compression="default",
                          payload_size=4, payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=10, pin=True)
    modes = {"pinned": pinned, "not pinned": replace(pinned, pin=False)}
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    for repeat in range(1, args.repeat + 1):
        for mode, settings in (modes.items() if repeat % 2 else reversed(modes.items())):
            attempt = run_attempt(server, client, settings, repeat, ROOT)
            if not attempt.ok:
                raise SystemExit(f"pinning_stability: {mode} repeat {repeat} failed: {attempt.reason}")
            rates[mode].append(attempt.roundtrips_per_s)
            print(f"{mode:<10} repeat {repeat}: {attempt.roundtrips_per_s:,.0f} roundtrips/s", file=sys.stderr)
    report = {"server": args.server, "client": args.client, "duration_s": args.duration, "modes": {}}
    for mode, values in rates.items():
        summary = summarize(values)
        report["modes"][mode] = {"rates": values, **asdict(summary)}
        print(f"{mode:<10}: median {summary.median:,.0f}, range {summary.minimum:,.0f}-{summary.maximum:,.0f}, "
              f"CV {100 * summary.cv:.1f}% over {summary.n} repeats", file=sys.stderr)
    # the two modes alternate within each repeat: their ratio is taken round by round
    ratio = paired_ratio(dict(enumerate(rates["pinned"], 1)), dict(enumerate(rates["not pinned"], 1)))
    report["pinned_over_not_pinned"] = asdict(ratio)
    interval = f" [{ratio.low:.2f}-{ratio.high:.2f}, {ratio.label()}]" if ratio.low is not None else ""
    print(f"pinned / not pinned, median of per-round ratios: {ratio.value:.2f}{interval}", file=sys.stderr)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
