"""The host's pace in the window, checked: per runtime, one cell's windows with and without the sentinel's slices.

For each cell (a server and a client of one runtime on one CPU, the orchestrator on the other), one server process
and one client process run one long window, which this script cuts into sub-windows of --window s, alternately
paced (measure/pacer.Pacer pausing the cell for slices of the host sentinel) and not, in ABBA order. Each
sub-window's roundtrips are counted from the kernel's counters of the client's two sockets (data segments received,
halved: exact for a serial ping-pong, measure/judge.outside_figures), the same way for every client: drivers,
compiled clients and a program measured from outside. From the same processes:
- bias: each paced sub-window's raw rate per running second over the mean of the unpaced ones beside it (paired),
  the median of those ratios with its order-statistic interval: the pauses must not change what the cell does;
- precision: the CV of the unpaced sub-windows' rates (raw), and of the paced ones' rates at the reference pace;
- the unit-free figure: the cell's roundtrip in sentinel roundtrips, the median over the paced sub-windows;
- the fast pieces: the CV of the paced sub-windows' rates read over their running pieces beside fast slices only
  (analysis/host_pace.fast_intervals), at the fast mode's typical slice.
--slices RUN_MS:ROUNDTRIPS[,...] paces with each setting in turn (the evidence for pacer.RUN_S and
SLICE_ROUNDTRIPS): the paced CV and the share of the time paused for each.
Prints one JSON object on stdout; a table on stderr.
- elasticity: how far the cell's rate moves with the sentinel's pace across the paced windows (1: exactly as the
  sentinel's, which the reference pace assumes), and what a fitted one would leave.
--summarize FILE prints a stored run's figures again from its sub-windows.
--placement split puts a cell's sides on two CPUs (the cell stopped from the orchestrator around both slices).
Usage: python -m benchmarks.window_pace [--seconds 20] [--window 0.1] [--cells S:C[:LOOP],...] [--slices 16:80:preempt]
                                        [--placement same-cpu|split] [--summarize FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.rounds_setup import ROOT, implementations_by_role, matrix_settings
from pingpong.harness.analysis.host_pace import (REFERENCE_SENTINEL_NS, STOP_ORCHESTRATOR, STOP_PREEMPT,
                                                STOP_SENTINEL, FastMode, fast_intervals)
from pingpong.harness.analysis.stats import median_interval
from pingpong.harness.measure.attempt_plan import client_command, process_environment, room_path
from pingpong.harness.measure.local import LocalMeasurer
from pingpong.harness.measure.outside import await_connections, outside_command
from pingpong.harness.measure.pacer import RUN_S, SLICE_ROUNDTRIPS, Pacer
from pingpong.harness.measure.server import stop_server
from pingpong.harness.results.stored import read_json
from pingpong.harness.settings.cell import cpus_for, orchestrator_cpus
from pingpong.harness.settings.configuration import DEFAULT_MATRIX_DURATION_S
from pingpong.harness.settings.manifest import check_availability
from pingpong.harness.settings.native_build import build_on_first_use
from pingpong.harness.system import host_sentinel, kernel_signals, processes

# one cell per runtime: C, Python on asyncio and on uvloop, Node.js, Bun, Go, Rust, C++, and a program measured
# from outside
CELLS = ("raw-tcp-c:raw-tcp-c:auto:c,aiohttp:websockets:asyncio:python-asyncio,"
         "sanic:picows:uvloop:python-uvloop,node-ws:node-ws:auto:node,bun:bun:auto:bun,"
         "go-gorilla:go-gorilla:auto:go,rust-tungstenite:rust-tungstenite:auto:rust,"
         "cpp-websocketpp:cpp-websocketpp:auto:cpp,sanic:websockets-plain:auto:python-outside")
BIAS_TARGET = 0.02  # issue 50: every runtime's median ratio within ±2%


def parse_cells(text: str, known: set[tuple[str, str]]) -> list[tuple[str, str, str, str]]:
    """--cells: SERVER:CLIENT[:LOOP[:LABEL]],... -> (server, client, loop, label); LOOP defaults to auto, LABEL to
    SERVER×CLIENT. ValueError names what is wrong; pure."""
    cells = []
    for spec in (part for part in text.split(",") if part):
        fields = spec.split(":")
        if not 2 <= len(fields) <= 4:
            raise ValueError(f"{spec!r} is not SERVER:CLIENT[:LOOP[:LABEL]]")
        server, client, loop, label = (fields + ["auto", ""])[:4] if len(fields) == 2 else (fields + [""])[:4]
        unknown = [name for role, name in (("server", server), ("client", client)) if (role, name) not in known]
        if unknown:
            raise ValueError(f"unknown implementations: {', '.join(unknown)}")
        cells.append((server, client, loop, label or f"{server}×{client}"))
    if not cells:
        raise ValueError("no cell given")
    return cells


def built_cells(text: str, program: str) -> tuple[dict, list[tuple[str, str, str, str]]] | None:
    """--cells parsed against the manifest (parse_cells) and what they need built; None after a one-line error on
    stderr, in program's name."""
    found = implementations_by_role()
    try:
        specs = parse_cells(text, set(found))
    except ValueError as exc:
        print(f"{program}: --cells: {exc}", file=sys.stderr)
        return None
    build_on_first_use([found[(role, name)] for server, client, _, _ in specs
                        for role, name in (("server", server), ("client", client))], ROOT)
    return found, specs


def parse_slices(text: str) -> list[tuple[float, int, bool]]:
    """RUN_MS:ROUNDTRIPS[:preempt|:stop],... as (run_s, roundtrips, preempt); preempt by default, as the pacer."""
    settings = []
    for part in text.split(","):
        run_ms, roundtrips, *mode = part.split(":")
        if mode not in ([], ["preempt"], ["stop"]):
            raise ValueError(f"a slice setting's mode is preempt or stop, not {mode[0]!r}")
        settings.append((float(run_ms) / 1000, int(roundtrips), mode != ["stop"]))
    return settings


def setting_name(setting: tuple[float, int, bool]) -> str:
    return f"{setting[0] * 1000:g}:{setting[1]}:{'preempt' if setting[2] else 'stop'}"


def cv(values: list[float]) -> float | None:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else None


def roundtrips_now(pid: int, port: int) -> tuple[float, int]:
    """(monotonic time, data segments the client's sockets have received so far)."""
    counters = kernel_signals.connection_counters([pid], port)
    return time.monotonic(), sum(connection["data_segs_in"] for connection in counters.values())


def measure_cell(server, client, loop: str, seconds: float, window_s: float, slices: list[tuple[float, int]],
                 measurer: LocalMeasurer, placement: str = "same-cpu", pacer_class: type[Pacer] = Pacer) -> list[dict]:
    """The cell's sub-windows, each {"paced": bool, "slices": [run_s, roundtrips]|None, "roundtrips", "wall_s",
    "running_s", "pace": the pacer's record|None}. pacer_class: what runs in the paced sub-windows
    (benchmarks/split_pacing_controls.py passes pacers that pause nothing)."""
    settings = replace(matrix_settings(placement), duration_s=seconds + 30, warmup_s=0.5, loop=loop)
    server_cpus, client_cpus = cpus_for(settings)
    windows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="pingpong-window-pace-") as work:
        started = measurer.start(server, settings, Path(work))
        client_process = None
        try:
            if started.problem:
                raise RuntimeError(f"{server.name} did not start: {started.problem.reason}")
            url = started.base_url + room_path(1, 1)
            argv = (outside_command(client, settings, url, ROOT) if client.outside
                    else client_command(client, settings, url, 1, ROOT))
            with processes.this_process_on(orchestrator_cpus(settings)):
                client_process = processes.start("client", argv, ROOT, Path(work), cpus=client_cpus,
                                                 env=process_environment(settings))
                connected, problem = await_connections(client_process, started.port, 30)
                if problem:
                    raise RuntimeError(f"{client.name}: {problem} ({connected} connections)")
                time.sleep(settings.warmup_s + 0.5)  # its warmup (a driver's), then into its long window
                cpus = sorted((server_cpus or set()) | (client_cpus or set()))
                groups = [started.pid, client_process.pid]
                count = max(4, int(seconds / window_s) // 4 * 4)
                plan = [(index % 4) in (1, 2) for index in range(count)]  # ABBA: unpaced, paced, paced, unpaced
                for index, paced in enumerate(plan):
                    setting = slices[(index // 4) % len(slices)] if paced else None
                    pacer = pacer_class(cpus, groups, *setting) if paced else None
                    if pacer:
                        pacer.prepare()
                    began, segments_before = roundtrips_now(client_process.pid, started.port)
                    if pacer:  # the client's segments read in its pauses too, as in the matrix
                        pacer.start(began + window_s, connections=lambda: kernel_signals.HeldConnections(
                            [client_process.pid], started.port))
                    time.sleep(window_s)
                    record = pacer.stop() if pacer else None
                    expected = (None if record is None else STOP_ORCHESTRATOR if len(cpus) > 1
                                else STOP_PREEMPT if setting[2] else STOP_SENTINEL)
                    if record and record["stop"] != expected:
                        raise RuntimeError(f"slices asked {setting_name(setting)} were paused as {record['stop']} "
                                           f"({record.get('preempt_refused') or 'the cell is on several CPUs'})")
                    ended, segments_after = roundtrips_now(client_process.pid, started.port)
                    paused = record["paused_s"] if record else 0.0
                    windows.append({"paced": paced, "slices": list(setting) if setting else None,
                                    "roundtrips": (segments_after - segments_before) / 2, "wall_s": ended - began,
                                    "running_s": ended - began - paused,
                                    "pace": record
                                    if record else None})
        finally:
            with processes.interrupts_deferred():
                if client_process is not None:
                    processes.stop(client_process)
                stop_server(started)
    return windows


def figures(windows: list[dict], slices: list[tuple[float, int]]) -> dict:
    """The cell's bias, precision and unit-free figure from its sub-windows (pure)."""
    raw = [w["roundtrips"] / w["running_s"] for w in windows]
    ratios, ratios_by_setting = [], {}
    for index, window in enumerate(windows):
        if not window["paced"]:
            continue
        beside = [raw[j] for j in (index - 1, index + 1, index - 2, index + 2)
                  if 0 <= j < len(windows) and not windows[j]["paced"]][:2]
        if beside:
            ratios.append(raw[index] / statistics.fmean(beside))
            ratios_by_setting.setdefault(tuple(window["slices"]), []).append(ratios[-1])
    unpaced = [rate for rate, w in zip(raw, windows) if not w["paced"]]
    result = {"windows": len(windows), "raw_cv": cv(unpaced), "raw_median": statistics.median(unpaced)}
    interval = median_interval(ratios)
    result["bias"] = {"pairs": len(ratios), "median_ratio": statistics.median(ratios) if ratios else None,
                      "interval": [interval.low, interval.high] if interval else None,
                      "coverage": interval.coverage if interval else None}
    per_setting = {}
    for setting in slices:
        paced = [(rate, w) for rate, w in zip(raw, windows)
                 if w["paced"] and tuple(w["slices"]) == setting and w["pace"]["sentinel_ns_per_roundtrip"]]
        if not paced:
            continue
        at_reference = [rate * w["pace"]["sentinel_ns_per_roundtrip"] / REFERENCE_SENTINEL_NS for rate, w in paced]
        # the rate over the fast pieces (analysis/host_pace.fast_intervals), at the fast mode's typical slice
        fast_pieces = [rate * found["rate_ratio"] * w["pace"]["fast_mode"]["typical_ns"] / REFERENCE_SENTINEL_NS
                       for rate, w in paced if (found := fast_pieces_of(w["pace"]))]
        unit_free = [1e9 / rate / w["pace"]["sentinel_ns_per_roundtrip"] for rate, w in paced]
        per_setting[setting_name(setting)] = {
            "windows": len(paced), "paced_raw_cv": cv([rate for rate, _ in paced]), "paced_cv": cv(at_reference),
            "fast_pieces_windows": len(fast_pieces),
            "fast_pieces_cv": cv(fast_pieces) if len(fast_pieces) > 2 else None,
            "bias": statistics.median(ratios_by_setting[setting]) if ratios_by_setting.get(setting) else None,
            "sentinel_roundtrips_per_roundtrip": statistics.median(unit_free),
            "paused_share": statistics.fmean(w["pace"]["paused_s"] / w["wall_s"] for _, w in paced),
            "pause_ms": statistics.fmean(w["pace"]["paused_s"] / w["pace"]["pauses"] * 1000 for _, w in paced
                                         if w["pace"]["pauses"]),
            "elasticity": elasticity([rate for rate, _ in paced],
                                     [w["pace"]["sentinel_ns_per_roundtrip"] for _, w in paced])}
    result["slices"] = per_setting
    return result


def fast_pieces_of(pace: dict) -> dict | None:
    """A paced sub-window's fast pieces read again from its record (its slices kept since 2026-11-29 20:40 UTC), or
    as recorded."""
    fast = pace.get("fast_mode")
    if fast is None:
        return None
    if pace.get("slices_ns") is None:
        return pace.get("fast_intervals")
    return fast_intervals(pace.get("intervals"), pace["slices_ns"],
                          FastMode(level_ns=fast["level_ns"], typical_ns=fast["typical_ns"], slices=fast["slices"]))


def elasticity(rates: list[float], paces: list[float]) -> dict | None:
    """How far the cell's rate moves with the sentinel's pace across windows (pure): the least-squares slope of
    log(rate) on log(ns per sentinel roundtrip), negated (1: the cell slows exactly as the sentinel does, which the
    rate at the reference pace assumes), their correlation, and the SD of log(rate) left once the slope is taken out
    (about a CV), beside the one the reference pace leaves (slope 1). None with fewer than 3 windows or one pace."""
    if len(rates) < 3:
        return None
    y = [math.log(rate) for rate in rates]
    x = [math.log(pace) for pace in paces]
    mean_x, mean_y = statistics.fmean(x), statistics.fmean(y)
    sxx = sum((a - mean_x) ** 2 for a in x)
    syy = sum((b - mean_y) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    sxy = sum((a - mean_x) * (b - mean_y) for a, b in zip(x, y))
    slope = sxy / sxx
    return {"elasticity": -slope, "correlation": sxy / math.sqrt(sxx * syy),
            "left_at_fitted": statistics.stdev(b - slope * a for a, b in zip(x, y)),
            "left_at_reference_pace": statistics.stdev(b + a for a, b in zip(x, y))}


def show_cell(cell: dict) -> None:
    """One cell's line on stderr."""
    bias = cell["bias"]
    def elastic(setting: dict) -> str:
        fit = setting.get("elasticity")
        return (f", elasticity {fit['elasticity']:.2f} (CV left {100 * fit['left_at_fitted']:.1f}% fitted)"
                if fit else "")
    def pieces(setting: dict) -> str:
        return (f", fast pieces' CV {100 * setting['fast_pieces_cv']:.1f}% ({setting['fast_pieces_windows']} windows)"
                if setting.get("fast_pieces_cv") is not None else "")
    shown = "; ".join(f"{name}: bias {s['bias']:.3f}, paced CV {100 * s['paced_cv']:.1f}%{pieces(s)}, "
                      f"{s['sentinel_roundtrips_per_roundtrip']:.2f} sentinel rt, paused "
                      f"{100 * s['paused_share']:.1f}%{elastic(s)}"
                      for name, s in cell["slices"].items() if s["paced_cv"] is not None and s["bias"] is not None)
    print(f"{cell['runtime']:15} {cell['server']} × {cell['client']}: bias {bias['median_ratio']:.4f} "
          f"[{bias['interval'][0]:.3f}–{bias['interval'][1]:.3f}] over {bias['pairs']}; raw CV "
          f"{100 * cell['raw_cv']:.1f}%; {shown}", file=sys.stderr, flush=True)


def summarize(path: str) -> int:
    """--summarize: the figures of a stored run (plain or .json.xz) from its sub-windows, again."""
    try:
        stored = read_json(Path(path))
    except (OSError, ValueError) as exc:
        print(f"window_pace: --summarize: {path}: {exc}", file=sys.stderr)
        return 2
    slices = [(s[0], s[1], s[2] if len(s) > 2 else False) for s in stored["slices"]]  # before preempt: stopped
    cells = []
    for cell in stored["cells"]:
        if not cell.get("raw_windows"):
            continue
        windows = [{**w, "slices": (list(w["slices"]) + [False])[:3] if w["slices"] else None}
                   for w in cell["raw_windows"]]
        figured = {key: cell[key] for key in ("runtime", "server", "client", "loop")} | figures(windows, slices)
        show_cell(figured)
        cells.append(figured)
    json.dump({"summarized": path, "cells": cells}, sys.stdout, indent=1)
    print()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default=CELLS, help="SERVER:CLIENT[:LOOP[:LABEL]],... (default: one per runtime)")
    parser.add_argument("--seconds", type=float, default=20.0, help="per cell (default %(default)g)")
    parser.add_argument("--window", type=float, default=DEFAULT_MATRIX_DURATION_S,
                        help="sub-window, s (default %(default)g: the matrix's window)")
    parser.add_argument("--slices", default=f"{RUN_S * 1000:g}:{SLICE_ROUNDTRIPS}",
                        help="RUN_MS:SENTINEL_ROUNDTRIPS[:preempt|:stop][,...] to pace with, in turn (default "
                             "%(default)s; preempt: a sentinel in the real-time class takes the CPU, stop: it stops "
                             "the cell with SIGSTOP)")
    parser.add_argument("--placement", choices=("same-cpu", "split"), default="same-cpu",
                        help="each cell on one CPU (the matrix's; the sentinel takes the CPU) or its sides on two "
                             "(the cell stopped from here around both CPUs' slices)")
    parser.add_argument("--summarize", metavar="FILE", help="print the figures of a stored run again, from its "
                        "sub-windows (with each setting's elasticity), instead of measuring")
    args = parser.parse_args()
    if args.summarize:
        return summarize(args.summarize)
    if not host_sentinel.SENTINEL.exists():
        print(f"window_pace: {host_sentinel.SENTINEL.name} is not built (sh native/build.sh)", file=sys.stderr)
        return 2
    try:
        slices = parse_slices(args.slices)
    except ValueError as exc:
        print(f"window_pace: --slices: {exc}", file=sys.stderr)
        return 2
    cells_found = built_cells(args.cells, "window_pace")
    if cells_found is None:
        return 2
    found, specs = cells_found
    measurer = LocalMeasurer()
    cells = []
    began = datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        for server_name, client_name, loop, label in specs:
            server, client = found[("server", server_name)], found[("client", client_name)]
            missing = [i.name for i in (server, client) if not check_availability(i, ROOT).available]
            if missing:
                cells.append({"runtime": label, "server": server_name, "client": client_name,
                              "skipped": f"not available here: {', '.join(missing)}"})
                continue
            try:
                windows = measure_cell(server, client, loop, args.seconds, args.window, slices, measurer,
                                       args.placement)
            except RuntimeError as exc:
                cells.append({"runtime": label, "server": server_name, "client": client_name, "error": str(exc)})
                continue
            cell = {"runtime": label, "server": server_name, "client": client_name, "loop": loop,
                    **figures(windows, slices), "raw_windows": windows}
            cells.append(cell)
            show_cell(cell)
    finally:
        host_sentinel.close_all()
    within = [c for c in cells if c.get("bias") and abs(c["bias"]["median_ratio"] - 1) <= BIAS_TARGET]
    measured = [c for c in cells if c.get("bias")]
    print(f"bias within ±{100 * BIAS_TARGET:g}%: {len(within)} of {len(measured)} runtimes", file=sys.stderr)
    json.dump({"benchmark": "window_pace", "started_at": began, "seconds": args.seconds, "window_s": args.window,
               "placement": args.placement,
               "slices": [list(s) for s in slices], "reference_sentinel_ns": REFERENCE_SENTINEL_NS,
               "bias_target": BIAS_TARGET, "cells": cells}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
