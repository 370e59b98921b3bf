"""Is a bimodal cell's slow mode a property of a client process or of a moment? The variance split by level.

Issue 27, item 1. For each cell, in each of --blocks blocks (one server process each, the cells' blocks taken in
turn, so block b of every cell runs before block b+1 of any), interleaved on that server:
- **fresh**: --fresh attempts exactly as a run makes them (run_attempt_on: a fresh client process, a room probe, the
  default warmup and 0.2 s window, the rate timed by the driver), one window per process;
- **long-lived**: --long-lived processes of the same driver client, started with a window of --windows + 1 windows,
  whose rate is read from outside in consecutive 0.2 s windows once the driver opens its window: the kernel's
  data_segs_in of the client's two connections (each roundtrip brings one segment into each), halved. When the
  driver closes its window the count is read once more and set against the roundtrips the driver reports (they
  must agree within 1%; each process records the check).
No client starts ahead of its turn (the engine's spawn-ahead is off here), so nothing loads during a long window.
The fresh values vary by process and window; the long-lived windows by window only: pingpong/harness/analysis/
noise.py splits the variance of the log rates into window, process and block (server process and its minutes), and,
given earlier outputs of the same cells (--previous, ideally an hour apart), run. A window is slow below 0.85x its
cell's median (of the fresh values, as a run's rounds give it): if the slow windows come and go inside long-lived
processes the slow mode is of a moment; if whole processes are slow or fast, of a process; if they gather late in
the processes' lives, of the process's age. Last, the rounds a median needs for ±3%, from the components
(simulated: normal log rates with the sd of one round).

One JSON object on stdout (every window of every process, the analysis); a table on stderr; --output also writes
the JSON to a file, rewritten after every block so that an interruption loses nothing.
Usage: python -m benchmarks.noise_structure [--cells S:C,...] [--blocks 4] [--fresh 8] [--long-lived 2]
       [--windows 30] [--placement auto|same-cpu|split|unpinned] [--previous EARLIER.json ...] [--output FILE]
       [--quick]
       python -m benchmarks.noise_structure --analyse OUTPUT.json [--previous EARLIER.json ...]  (measures nothing)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.rounds_setup import ROOT, add_placement_option, implementations_by_role, matrix_settings
from pingpong.contract import EVENTS_FD_ENV, READY_EVENT, WINDOW_END_EVENT, WINDOW_START_EVENT
from pingpong.harness.analysis import noise
from pingpong.harness.measure.attempt_plan import (STDERR_TAIL_LINES, client_command, process_environment,
                                                   process_name, room_path, with_jit_warmup)
from pingpong.harness.measure.judge import parse_client_report
from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.measure.server import LocalServer, room_probe, start_server
from pingpong.harness.results.stored import read_json
from pingpong.harness.settings.cell import CellSettings, cpus_for, placement_of
from pingpong.harness.settings.environment import suite_commit
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.system import kernel_signals, listeners, processes
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

FORMAT_VERSION = 1
DEFAULT_CELLS = "node-ws:node-ws,aiohttp:aiohttp,blacksheep:node-ws,websockets:websockets"
QUICK = {"blocks": 1, "fresh": 2, "long_lived": 1, "windows": 5}
COUNT_AGREEMENT = 0.01  # the outside count and the driver's own must agree this closely
SEGMENTS_PER_ROUNDTRIP = 2  # a roundtrip brings one data segment into each of the client's two connections
END_GRACE_S = 5.0  # beyond its window, how long a long-lived client may take to close it, report and exit


def interleaved(fresh: int, long_lived: int) -> list[str]:
    """The order of a block's processes: the long-lived ones spread evenly among the fresh ones ("fresh", "long")."""
    total = fresh + long_lived
    places = {math.floor((index + 0.5) * total / long_lived) for index in range(long_lived)} if long_lived else set()
    return ["long" if place in places else "fresh" for place in range(total)]


class EventLines:
    """The lines a client writes on its events pipe, read as they come (without blocking past a deadline)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer, self.closed = fd, b"", False

    def wait_for(self, name: str, deadline: float) -> bool:
        """Whether the line `name` came before the deadline (False too when the client closed the pipe first)."""
        while True:
            line, newline, rest = self.buffer.partition(b"\n")
            if newline:
                self.buffer = rest
                if line.decode(errors="replace").strip() == name:
                    return True
                continue
            if self.closed or not self.readable_by(deadline):
                return False
            chunk = os.read(self.fd, 4096)
            if not chunk:
                self.closed = True
            self.buffer += chunk

    def readable_by(self, deadline: float) -> bool:
        """Wait until a line may be read or the deadline has passed: whether something may be read."""
        return bool(select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))[0])


def reading(tree: list[int], port: int) -> tuple[float, float, dict[int, dict[str, int]]]:
    """The client's connection counters: the middle of the time taken to read them, that time, the counters."""
    before = time.monotonic()
    counters = kernel_signals.connection_counters(tree, port)
    after = time.monotonic()
    return (before + after) / 2, after - before, counters


def roundtrips_between(earlier: dict, later: dict) -> tuple[float, int]:
    delta = kernel_signals.counters_delta(earlier, later)
    return delta["data_segs_in"] / SEGMENTS_PER_ROUNDTRIP, delta["connections"]


def follow_windows(process: processes.ManagedProcess, events: EventLines, port: int, settings: CellSettings,
                   windows: int, window_s: float) -> dict:
    """A long-lived client's windows, read from outside, and the check of the whole count against its own."""
    if not events.wait_for(READY_EVENT, time.monotonic() + settings.ready_timeout_s):
        return {"problem": "the client did not open its connections"}
    tree = listeners.process_trees([process.pid]).get(process.pid, [process.pid])
    if not events.wait_for(WINDOW_START_EVENT, time.monotonic() + settings.warmup_s + settings.stall_timeout_s):
        return {"problem": "the client did not open its window"}
    began, took, first = reading(tree, port)
    last_time, last = began, first
    rates, edges, connections, reading_s = [], [], [], [took]
    for index in range(1, windows + 1):
        if events.readable_by(began + index * window_s):  # the client closed its window (or the pipe) early
            return {"problem": f"the client's window ended after {index - 1} of {windows} windows",
                    "rates": rates}
        now, took, counters = reading(tree, port)
        roundtrips, held = roundtrips_between(last, counters)
        rates.append(roundtrips / (now - last_time))
        edges.append(round(now - began, 6))
        connections.append(held)
        reading_s.append(round(took, 6))
        last_time, last = now, counters
    ended = events.wait_for(WINDOW_END_EVENT, time.monotonic() + window_s + settings.stall_timeout_s)
    _, _, end = reading(tree, port)
    counted, held = roundtrips_between(first, end)
    found = {"rates": rates, "window_ends_s": edges, "connections": connections, "reading_s": reading_s,
             "outside_roundtrips": counted, "outside_connections_at_end": held, "window_end_seen": ended}
    return found | ({} if ended else {"problem": "the client did not close its window"})


def long_lived_process(started: LocalServer, client: Implementation, settings: CellSettings, block: int,
                       windows: int) -> dict:
    """One long-lived client process on the block's server: its windows' rates, read from outside."""
    problem = started.problem or room_probe(started, settings)
    if problem is not None:
        return {"status": problem.status, "problem": problem.reason}
    started.take_turn(client, settings, block)  # numbered by its turn, as the engine numbers an attempt's client
    number = started.turns
    window_s = settings.duration_s
    own = with_jit_warmup(replace(settings, duration_s=round((windows + 1) * window_s, 6)), client.runtime,
                          started.runtime, number)
    url = started.base_url.replace("127.0.0.1", own.client_host, 1) + room_path(block, number)
    argv = client_command(client, own, url, 1, ROOT)
    _, client_cpus = cpus_for(own)
    read_fd, write_fd = os.pipe()
    process = None
    try:
        try:
            process = processes.start(process_name(0, 1, number), argv, ROOT, started.work_dir, cpus=client_cpus,
                                      pass_fds=(write_fd,), env=process_environment(own, **{EVENTS_FD_ENV:
                                                                                            str(write_fd)}))
        finally:
            os.close(write_fd)
        try:
            found = follow_windows(process, EventLines(read_fd), started.port, own, windows, window_s)
        except (OSError, ValueError) as exc:  # its sockets could not be read (it exited meanwhile, an old kernel)
            found = {"problem": f"its connections could not be read: {type(exc).__name__}: {exc}"}
        try:
            processes.wait(process.popen, END_GRACE_S)
        except subprocess.TimeoutExpired:
            found.setdefault("problem", "the client did not exit after its window")
        report, report_problem = parse_client_report(process.stdout_text())
    finally:
        with processes.interrupts_deferred():
            if process is not None:
                processes.stop(process)
            os.close(read_fd)
    found |= {"client_pid": process.pid, "warmup_s": own.warmup_s, "driver_window_s": own.duration_s}
    if report is None or report.get("error"):
        found.setdefault("problem", report_problem or f"the client failed: {report.get('error')}")
        found["stderr_tail"] = process.stderr_tail(STDERR_TAIL_LINES)
    else:
        found |= {"driver_roundtrips": report["roundtrips"], "driver_elapsed_s": report["elapsed_s"],
                  "driver_roundtrips_per_s": report["roundtrips_per_s"]}
        if "outside_roundtrips" in found and report["roundtrips"]:
            difference = found["outside_roundtrips"] / report["roundtrips"] - 1
            found |= {"count_difference": difference, "count_agrees": abs(difference) <= COUNT_AGREEMENT}
            if not found["count_agrees"]:  # the windows read from outside are not to be trusted
                found.setdefault("problem", f"the outside count differs from the driver's by {difference:+.2%}")
    found["status"] = "ok" if "problem" not in found and len(found.get("rates", ())) == windows else "failed"
    return found


def fresh_attempt(started: LocalServer, client: Implementation, settings: CellSettings, block: int) -> dict:
    attempt = run_attempt_on(started, client, settings, block, ROOT)
    warmup = (attempt.client_report or {}).get("warmup") or {}
    return {"status": attempt.status, "reason": attempt.reason, "roundtrips_per_s": attempt.roundtrips_per_s,
            "roundtrips": attempt.roundtrips, "elapsed_s": attempt.elapsed_s, "client_pid": attempt.client_pid,
            "warmup_s": warmup.get("elapsed_s")}


def run_block(server: Implementation, client: Implementation, settings: CellSettings, block: int,
              order: list[str], windows: int, began: float, work: Path) -> dict:
    """One block of one cell: a server process, its fresh and long-lived clients in the given order."""
    server_cpus, _ = cpus_for(settings)
    found: dict = {"block": block, "order": order, "fresh": [], "long_lived": [],
                   "started_s": round(time.monotonic() - began, 3)}
    try:
        started = start_server(server, settings, ROOT, work, server_cpus)
    except Exception as exc:  # noqa: BLE001 - an OS error: this block fails, the others go on
        return found | {"problem": f"the server did not start: {type(exc).__name__}: {exc}"}
    try:
        found["server_pid"] = started.pid
        if started.problem:
            return found | {"problem": f"{started.problem.status}: {started.problem.reason}"}
        for kind in order:
            at = round(time.monotonic() - began, 3)
            if kind == "fresh":
                found["fresh"].append({"at_s": at} | fresh_attempt(started, client, settings, block))
            else:
                found["long_lived"].append({"at_s": at} | long_lived_process(started, client, settings, block,
                                                                             windows))
    finally:
        with processes.interrupts_deferred():
            processes.stop(started.process)
    return found


def block_values(entry: dict) -> noise.Block:
    """The rates a block's entry holds, for the analysis: ok fresh attempts, and complete long-lived processes."""
    return noise.Block(fresh=tuple(f["roundtrips_per_s"] for f in entry["fresh"]
                                   if f["status"] == "ok" and f["roundtrips_per_s"]),
                       long_lived=tuple(tuple(p["rates"]) for p in entry["long_lived"] if p["status"] == "ok"))


def analyse(cell: dict, previous: list[dict]) -> dict:
    """A cell's components, slow mode, run-level component (with earlier runs of the same cell) and sizing."""
    blocks = [block_values(entry) for entry in cell["blocks"]]
    parts = noise.components(blocks)
    runs = [noise.run_mean(blocks)] + [noise.run_mean([block_values(entry) for entry in earlier["blocks"]])
                                       for earlier in previous]
    runs = [run for run in runs if run is not None]
    run = noise.run_component(runs)
    slow = noise.slow_mode(blocks)
    checks = [p.get("count_agrees") for entry in cell["blocks"] for p in entry["long_lived"]]
    return {"components": asdict(parts), "runs": [{"mean_log_rate": m, "variance_of_mean": v} for m, v in runs],
            "run": run, "slow_mode": asdict(slow) | {"long_lived_windows": slow.long_lived_windows,
                                                     "long_lived_slow": slow.long_lived_slow} if slow else None,
            "sizing": asdict(noise.sizing(parts, run)),
            "counts_agree": {"checked": sum(check is not None for check in checks),
                             "agreeing": sum(bool(check) for check in checks)}}


def previous_cells(paths: list[Path]) -> dict[tuple[str, str], list[dict]]:
    """The cells of earlier outputs of this benchmark, by (server, client)."""
    found: dict[tuple[str, str], list[dict]] = {}
    for path in paths:
        earlier = read_json(path)  # plain or compressed (the reference outputs are .json.xz)
        if earlier.get("benchmark") != "noise_structure":
            raise SystemExit(f"noise_structure: {path} is not an output of this benchmark")
        for cell in earlier["cells"]:
            found.setdefault((cell["server"], cell["client"]), []).append(cell)
    return found


def percent_sd(variance: float | None) -> str:
    """A variance of log rate as the spread it means, in percent."""
    return "—" if variance is None else f"{math.sqrt(variance):.1%}"


def describe(cell: dict) -> list[str]:
    """The lines a cell's analysis prints on stderr."""
    analysis = cell["analysis"]
    parts, slow, size = analysis["components"], analysis["slow_mode"], analysis["sizing"]
    name = f"{cell['server']} × {cell['client']}"
    if slow is None:
        return [f"{name}: no values"]
    lines = [f"{name}: median {slow['median']:,.0f}/s; sd of log rate by level: run {percent_sd(analysis['run'])}, "
             f"block {percent_sd(parts['block'])}, process {percent_sd(parts['process'])} "
             f"(from long-lived means {percent_sd(parts['process_from_long_lived'])}), window "
             f"{percent_sd(parts['window'])}; one fresh window {percent_sd(parts['fresh'])}, one round "
             f"{percent_sd(parts['round'])}"]
    ratio, lag, drift = parts["window_over_fresh"], parts["window_lag_one_correlation"], parts["age_drift"]
    lines.append(f"  window/fresh variance {'—' if ratio is None else f'{ratio:.2f}'}, consecutive windows r "
                 f"{'—' if lag is None else f'{lag:.2f}'}, last third over first third of a long-lived process "
                 f"{'—' if drift is None else f'{math.exp(drift):.3f}'}; {parts['fresh_values']} fresh, "
                 f"{parts['long_lived_processes']} long-lived ({parts['long_lived_windows']} windows), "
                 f"{parts['blocks']} blocks; outside counts agree with the driver's in "
                 f"{analysis['counts_agree']['agreeing']} of {analysis['counts_agree']['checked']}")
    per_process = ", ".join(f"{p['slow']}/{p['windows']} ({p['switches']} sw)" for p in slow["long_lived"])
    early, late = slow["early_slow_fraction"], slow["late_slow_fraction"]
    lines.append(f"  slow (< {slow['threshold']:,.0f}/s): fresh {slow['fresh_slow']} of {slow['fresh']}; "
                 f"long-lived {per_process or 'none'}"
                 + (f"; first third {early:.0%}, last third {late:.0%}" if early is not None else ""))
    lines.append(f"  verdict: {slow['verdict']} ({slow['reason']})")
    def count(value: int | None) -> str:
        return ">1000" if value is None else str(value)

    at = ", ".join(f"{n} rounds ±{p:.1%}" for n, p in size["precision_at"].items() if p is not None)
    runs = ", ".join(f"{count(r)} runs of {n} rounds" for n, r in size["runs_needed"].items())
    lines.append(f"  largest level: {size['largest_level']} ({size['remedy']})")
    lines.append(f"  ±{size['precision']:.0%}: {count(size['rounds_needed'])} rounds for half of the runs, "
                 f"{count(size['rounds_needed_most'])} for 9 in 10; half of the runs reach {at}"
                 + (f"; across runs: {runs}" if runs else ""))
    return lines


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default=DEFAULT_CELLS, help="server:client pairs, comma-separated")
    parser.add_argument("--blocks", type=int, default=4, help="server processes per cell")
    parser.add_argument("--fresh", type=int, default=8, help="fresh client processes per block, one window each")
    parser.add_argument("--long-lived", type=int, default=2, help="long-lived client processes per block")
    parser.add_argument("--windows", type=int, default=30, help="windows read in each long-lived process")
    add_placement_option(parser)
    parser.add_argument("--previous", type=Path, nargs="*", default=[],
                        help="earlier outputs of this benchmark: the run-level component from their cells")
    parser.add_argument("--output", type=Path, help="also write the JSON here (rewritten after every block)")
    parser.add_argument("--analyse", type=Path, metavar="OUTPUT.json",
                        help="measure nothing: analyse an earlier output again (with --previous, if given)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: the first cell, 1 block, 2 fresh, 1 long-lived of 5 windows")
    arguments = parser.parse_args()
    if arguments.quick:
        vars(arguments).update(QUICK)
        arguments.cells = arguments.cells.split(",")[0]
    arguments.cell_pairs = [tuple(pair.split(":")) for pair in arguments.cells.split(",")]
    return arguments


def main() -> int:
    arguments = parse_arguments()
    earlier = previous_cells(arguments.previous)
    if arguments.analyse:
        found = read_json(arguments.analyse)
        found["previous"] = [str(path) for path in arguments.previous]
        return report(found, earlier, arguments.output, interrupted=bool(found.get("interrupted")))
    implementations = implementations_by_role()
    settings = matrix_settings(arguments.placement)
    commit, modified = suite_commit(ROOT)
    order = interleaved(arguments.fresh, arguments.long_lived)
    cells = [{"server": server, "client": client, "blocks": []} for server, client in arguments.cell_pairs]
    found = {"benchmark": "noise_structure", "format_version": FORMAT_VERSION, "commit": commit,
             "modified": modified, "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
             "settings": {"warmup_s": settings.warmup_s, "window_s": settings.duration_s,
                          "jit_warmup_s": settings.jit_warmup_s, "placement": placement_of(settings),
                          "blocks": arguments.blocks,
                          "fresh": arguments.fresh, "long_lived": arguments.long_lived,
                          "windows": arguments.windows, "order": order, "slow_below": noise.SLOW_BELOW,
                          "count_agreement": COUNT_AGREEMENT},
             "previous": [str(path) for path in arguments.previous], "cells": cells}
    began = time.monotonic()
    interrupted = False
    try:
        with stop_signals_raise_interrupt(), tempfile.TemporaryDirectory(prefix="pingpong-noise-") as work:
            for block in range(1, arguments.blocks + 1):
                for cell in cells:
                    server = implementations[("server", cell["server"])]
                    client = implementations[("client", cell["client"])]
                    with tempfile.TemporaryDirectory(dir=work) as block_work:
                        entry = run_block(server, client, settings, block, order, arguments.windows, began,
                                          Path(block_work))
                    cell["blocks"].append(entry)
                    print(f"block {block}/{arguments.blocks} {cell['server']} × {cell['client']}: "
                          f"{summary_line(entry)}", file=sys.stderr, flush=True)
                    save(found, arguments.output)
    except KeyboardInterrupt:
        interrupted = True
        print("noise_structure: interrupted; the blocks measured so far are kept", file=sys.stderr)
    found["measuring_s"] = round(time.monotonic() - began, 1)
    found["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    found["interrupted"] = interrupted
    return report(found, earlier, arguments.output, interrupted)


def report(found: dict, earlier: dict[tuple[str, str], list[dict]], output: Path | None, interrupted: bool) -> int:
    """Analyse every cell (with its earlier runs), print the table and the JSON, save it; the exit code."""
    for cell in found["cells"]:
        cell["analysis"] = analyse(cell, earlier.get((cell["server"], cell["client"]), []))
        print("\n".join(describe(cell)), file=sys.stderr)
    save(found, output)
    print(json.dumps(found, indent=1))
    return 130 if interrupted else 0


def summary_line(entry: dict) -> str:
    if "problem" in entry:
        return entry["problem"]
    values = block_values(entry)
    fresh = ", ".join(f"{rate:,.0f}" for rate in values.fresh)
    long_lived = "; ".join(f"{min(p):,.0f}–{max(p):,.0f}" for p in values.long_lived if p)
    failed = [f.get("reason") or f.get("problem") for f in entry["fresh"] + entry["long_lived"] if f["status"] != "ok"]
    return (f"fresh {fresh}; long-lived {long_lived or 'none'}"
            + (f"; {len(failed)} failed: {failed[0]}" if failed else ""))


def save(found: dict, path: Path | None) -> None:
    if path is not None:
        path.write_text(json.dumps(found, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
