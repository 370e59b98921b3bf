"""What makes a paced cell on two CPUs faster: the pauses, or the pacer's thread beside the cell?

`benchmarks.window_pace --placement split` found a split cell's paced sub-windows faster than their unpaced
neighbours (the C floor 1.026-1.040 on 2026-11-29). Here the same ABBA sub-windows of one server and one client
process (window_pace.measure_cell) are run with the real pacer and with control pacers that pause nothing, each arm
against its own unpaced neighbours:
- pauses: the pacer (measure/pacer.Pacer), as a run paces the cell;
- wake: the pacer's thread waking every RUN_S for nothing (no signal, no sentinel);
- thread-at-start: a thread that starts as the sub-window opens and ends at once;
- idle-thread: a thread for the whole sub-window that waits, without waking, until it is stopped;
- nothing: no thread at all (the check's own floor: two kinds of sub-window alike).
With --placement split the orchestrator (and so these threads) is not pinned: it shares the cell's two CPUs. Each
arm is one process pair measured for --seconds; the arms run in a shuffled order, --repeat times. Per arm, the median
of the paced sub-windows' raw rate over their unpaced neighbours' (window_pace.figures), over all its repeats.
Prints one JSON object on stdout; a table on stderr.
Usage: python -m benchmarks.split_pacing_controls [--seconds 16] [--window 0.1] [--repeat 2] [--seed 1]
                                                  [--cells raw-tcp-c:raw-tcp-c] [--arms pauses,wake,...]
                                                  [--placement split|same-cpu]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from datetime import datetime, timezone

from benchmarks.window_pace import BIAS_TARGET, built_cells, figures, measure_cell
from pingpong.harness.analysis.host_pace import STOP_ORCHESTRATOR, STOP_PREEMPT
from pingpong.harness.measure.local import LocalMeasurer
from pingpong.harness.measure.pacer import RUN_S, SLICE_ROUNDTRIPS, Pacer
from pingpong.harness.system import host_sentinel


class ControlPacer(Pacer):
    """A pacer that pauses nothing: `arm` says what its thread does in the window (the module's list)."""

    arm = "nothing"

    def __init__(self, cpus: list[int], groups: list[int], run_s: float = RUN_S,
                 slice_roundtrips: int = SLICE_ROUNDTRIPS, preempt: bool = True) -> None:
        super().__init__(cpus, groups, run_s, slice_roundtrips, preempt, slice_log=None)
        self.stop_mode = STOP_ORCHESTRATOR if len(self.cpus) > 1 else STOP_PREEMPT  # what measure_cell expects
        self.wakeups = 0

    def prepare(self) -> None:
        """No sentinel."""

    def start(self, until: float, event_at: float | None = None, connections=None) -> None:
        if self.arm != "nothing":
            self._thread = threading.Thread(target=self._control, args=(until,), daemon=True, name="pacer-control")
            self._thread.start()

    def _control(self, until: float) -> None:
        if self.arm == "wake":
            while not self._stop.wait(self.run_s) and time.monotonic() < until:
                self.wakeups += 1
        elif self.arm == "idle-thread":
            self._stop.wait()
        # thread-at-start: ends at once


def control(arm: str) -> type[Pacer]:
    """The pacer class of an arm: the real one for "pauses", else a ControlPacer doing what the arm says."""
    if arm == "pauses":
        return Pacer
    return type(f"ControlPacer_{arm}", (ControlPacer,), {"arm": arm})


ARMS = ("pauses", "wake", "thread-at-start", "idle-thread", "nothing")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="raw-tcp-c:raw-tcp-c", help="SERVER:CLIENT[:LOOP[:LABEL]],...")
    parser.add_argument("--arms", default=",".join(ARMS), help="comma-separated, of: " + ", ".join(ARMS))
    parser.add_argument("--seconds", type=float, default=16.0, help="per cell and arm (default %(default)g)")
    parser.add_argument("--window", type=float, default=0.1, help="sub-window, s (default %(default)g)")
    parser.add_argument("--repeat", type=int, default=2, help="times every arm runs (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--placement", choices=("same-cpu", "split"), default="split")
    args = parser.parse_args()
    arms = [arm for arm in args.arms.split(",") if arm]
    unknown = [arm for arm in arms if arm not in ARMS]
    if unknown or not arms:
        print(f"split_pacing_controls: --arms: unknown arm {unknown[0] if unknown else '(none given)'!r}; "
              f"known: {', '.join(ARMS)}", file=sys.stderr)
        return 2
    if args.repeat < 1:
        print("split_pacing_controls: --repeat must be at least 1", file=sys.stderr)
        return 2
    if "pauses" in arms and not host_sentinel.SENTINEL.exists():
        print(f"split_pacing_controls: {host_sentinel.SENTINEL.name} is not built (sh native/build.sh)",
              file=sys.stderr)
        return 2
    cells_found = built_cells(args.cells, "split_pacing_controls")
    if cells_found is None:
        return 2
    found, specs = cells_found
    slices = [(RUN_S, SLICE_ROUNDTRIPS, True)]
    generator = random.Random(args.seed)
    measurer = LocalMeasurer()
    began = datetime.now(timezone.utc).isoformat(timespec="seconds")
    windows: dict[tuple[str, str], list[dict]] = {}
    order: list[list[str]] = []
    try:
        for _ in range(args.repeat):
            turn = list(arms)
            generator.shuffle(turn)
            order.append(turn)
            for arm in turn:
                for server, client, loop, label in specs:
                    try:
                        measured = measure_cell(found[("server", server)], found[("client", client)], loop,
                                                args.seconds, args.window, slices, measurer, args.placement,
                                                pacer_class=control(arm))
                    except RuntimeError as exc:
                        print(f"split_pacing_controls: {label} {arm}: {exc}", file=sys.stderr)
                        continue
                    windows.setdefault((label, arm), []).extend(measured)
                    bias = figures(measured, slices)["bias"]
                    print(f"{label} {arm}: {bias['median_ratio']:.4f} over {bias['pairs']}", file=sys.stderr,
                          flush=True)
    finally:
        host_sentinel.close_all()
    results = []
    for (label, arm), measured in windows.items():
        found_figures = figures(measured, slices)
        bias = found_figures["bias"]
        results.append({"cell": label, "arm": arm, "bias": bias, "raw_median": found_figures["raw_median"],
                        "raw_cv": found_figures["raw_cv"], "raw_windows": measured})
        low, high = bias["interval"] or (float("nan"), float("nan"))
        print(f"{label:24} {arm:16} paced ÷ unpaced {bias['median_ratio']:.4f} [{low:.3f}–{high:.3f}, "
              f"{100 * (bias['coverage'] or 0):.0f}%] over {bias['pairs']} pairs; unpaced median "
              f"{found_figures['raw_median']:,.0f}/s", file=sys.stderr)
    json.dump({"benchmark": "split_pacing_controls", "started_at": began, "placement": args.placement,
               "seconds": args.seconds, "window_s": args.window, "repeat": args.repeat, "seed": args.seed,
               "order": order, "bias_target": BIAS_TARGET, "arms": results}, sys.stdout, indent=1)
    print()
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
