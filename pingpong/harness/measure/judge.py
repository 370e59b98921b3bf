"""The judge of an attempt: pure functions from its typed records (boundary.py) and the settings to its Outcome.

The same functions judge an attempt on this machine and on a cluster's hosts; nothing here starts, reads or stops a
process. A failure is the first one found, in the order a reader would look: a client that broke the contract, a
client that failed (or a server that died under it), a workload's own check; else the attempt is ok with its figures.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pingpong import client_report
from pingpong.contract import GO_FD_ENV
from pingpong.harness.analysis import workload_figures
from pingpong.harness.analysis.host_pace import MIN_PAUSES, paced_window, wait_bound
from pingpong.harness.measure.boundary import (ClientFacts, ClientRun, HeldSample, Measured, Outcome, ServerFacts,
                                               WindowSamples)
from pingpong.harness.results import histograms
from pingpong.harness.settings.cell import CellSettings


def parse_client_report(stdout: str) -> tuple[dict | None, str | None]:
    """The driver's one JSON object in a format_version this orchestrator reads (pingpong/client_report.py), or
    why stdout is not that."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None, "client printed no JSON on stdout"
    if len(lines) > 1:
        return None, f"client printed {len(lines)} lines on stdout; the contract is exactly one JSON object"
    try:
        report = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        return None, f"client stdout is not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(report, dict):
        return None, "client stdout is JSON but not an object"
    unknown_version = client_report.version_problem(report)
    if unknown_version:
        return None, unknown_version
    for key in ("roundtrips", "elapsed_s", "roundtrips_per_s"):
        if report.get("error") is None and not isinstance(report.get(key), (int, float)):
            return None, f"client report lacks the number '{key}'"
    return with_pair_histograms(report), None


def with_pair_histograms(report: dict) -> dict:
    """The report with a compiled client's per_pair_value_counts encoded as per_pair_hdr_histograms, the field the
    drivers write and everything after the judge reads (the value counts themselves are not kept)."""
    value_counts = report.pop("per_pair_value_counts", None)
    if value_counts is not None and "per_pair_hdr_histograms" not in report:
        report["per_pair_hdr_histograms"] = [histograms.encode_value_counts(pair) for pair in value_counts]
    return report


def judge_client(run: ClientRun, server_exit_code: int | None, server: ServerFacts) -> Outcome | None:
    """The failed outcome of one client process, or None when its report is a success. server_exit_code: the
    server's, when it had exited by the time the client ended (None: it was still running)."""
    client = ClientFacts(pid=run.pid, exit_code=run.exit_code, stderr_tail=run.stderr_tail)
    report, problem = parse_client_report(run.stdout)
    if problem:
        return Outcome("client-failed", f"{problem} (exit code {run.exit_code})", client, server)
    client = ClientFacts(run.pid, run.exit_code, run.stderr_tail, report)
    if report.get("error") or run.exit_code != 0:
        reason = report.get("error") or f"client exited with code {run.exit_code}"
        if server_exit_code is not None:
            reason = f"server exited with code {server_exit_code} during the run; client: {reason}"
        return Outcome("client-failed" if server_exit_code is None else "server-crashed", reason, client, server)
    if not report.get("roundtrips") and not report.get("holder"):
        return Outcome("client-failed", "client reported zero roundtrips", client, server)
    return None


def judge_attempt(runs: list[ClientRun], server_exit_code: int | None, window: WindowSamples,
                  settings: CellSettings, server: ServerFacts, held: HeldSample | None = None) -> Outcome:
    """An attempt's outcome from its client processes (in share order) and the window's samples: ok with every
    figure, or the first failure with its reason."""
    reports = []
    for run in runs:
        failure = judge_client(run, server_exit_code, server)
        if failure is not None:  # said of its process, but filed under the attempt's first client's pid
            failure = replace(failure, client=replace(failure.client, pid=runs[0].pid))
            return failure.prefixed(f"client process {run.index}: ") if len(runs) > 1 else failure
        reports.append(parse_client_report(run.stdout)[0])
    first = ClientFacts(pid=runs[0].pid, exit_code=max(run.exit_code for run in runs))
    figures: dict[str, Any] | None = None
    if settings.workload == "broadcast":
        try:
            report, figures = workload_figures.broadcast(reports)
        except workload_figures.WorkloadError as exc:
            return Outcome("client-failed", str(exc), ClientFacts(first.pid, first.exit_code, None,
                                                                  workload_figures.without_timestamps(reports[0])),
                           server)
    else:
        measuring = [report for report in reports if not report.get("holder")]
        report = measuring[0] if len(measuring) == 1 else merge_reports(measuring)
        if settings.rate is not None:
            figures = {"open_loop": workload_figures.open_loop(measuring, settings.rate)}
        if held is not None:
            figures = (figures or {}) | {"idle": workload_figures.idle(reports, settings.idle_connections,
                                                                       held.memory_before, held.memory_held,
                                                                       held.established)}
            if figures["idle"]["opened"] != settings.idle_connections:
                return Outcome("client-failed", f"idle connections: the clients held {figures['idle']['opened']} "
                                                f"of {settings.idle_connections}",
                               ClientFacts(first.pid, first.exit_code, None, report), server)
    latency = report.get("latency") or {}
    histogram = latency.pop("hdr_histogram", None)
    value_counts = latency.pop("value_counts", None)
    if histogram is None and value_counts:
        histogram = histograms.encode_value_counts(value_counts)
    measured = at_window_pace(Measured(roundtrips=report["roundtrips"], elapsed_s=report["elapsed_s"],
                                       roundtrips_per_s=report["roundtrips_per_s"], latency_histogram=histogram,
                                       workload_figures=figures), window)
    client = ClientFacts(first.pid, first.exit_code, None, report)
    return unpaced_failure(measured, window, client, server) or Outcome("ok", None, client, server, measured, window)


def unpaced_failure(measured: Measured, window: WindowSamples | None, client: ClientFacts,
                    server: ServerFacts) -> Outcome | None:
    """A window that was to have the host's pace in it and has not (the sentinel failed, too few pauses): failed,
    so that a cell's rates are all at the reference pace or all raw, never both."""
    pace = window.host_pace if window else None
    if not pace or pace.get("off") or measured.raw_roundtrips_per_s is not None or measured.pace_not_applied:
        return None
    late = pace.get("start_late_s")
    why = pace.get("error") or (f"{pace.get('pauses', 0)} pauses (at least {MIN_PAUSES} needed)"
                                + (f"; the pauses began {late:.3f} s after the window's start event" if late else ""))
    return Outcome("error", f"the host's pace could not be measured in the window: {why}", client, server)


def at_window_pace(measured: Measured, window: WindowSamples | None) -> Measured:
    """The figures with the host's pace measured in the window (analysis/host_pace.py): the rate at the reference
    pace as roundtrips_per_s, the raw rate and the running time beside it; unchanged for a window without one."""
    pace = window.host_pace if window else None
    cpu_s = (window.server_cpu_s + window.client_cpu_s
             if window and window.server_cpu_s is not None and window.client_cpu_s is not None else None)
    waiting = wait_bound(pace, cpu_s, window.wall_s if window else None)
    if waiting:
        return replace(measured, pace_not_applied=waiting)
    paced = paced_window(measured.roundtrips, measured.elapsed_s, pace)
    if paced is None:
        return measured
    return replace(measured, roundtrips_per_s=paced.roundtrips_per_s,
                   raw_roundtrips_per_s=paced.raw_roundtrips_per_s, running_s=paced.running_s,
                   sentinel_roundtrips_per_roundtrip=paced.sentinel_roundtrips_per_roundtrip)


def merge_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One report for several client processes: rates and counts summed, histograms merged, each kept (with its
    pairs' roundtrips and latency histograms, when it reported them)."""
    merged = {key: value for key, value in reports[0].items()
              if key not in ("latency", "connections", "per_pair_hdr_histograms")}
    merged["client_processes"] = len(reports)
    merged["roundtrips"] = sum(r["roundtrips"] for r in reports)
    merged["roundtrips_per_s"] = sum(r["roundtrips_per_s"] for r in reports)
    merged["elapsed_s"] = max(r["elapsed_s"] for r in reports)
    merged["pairs"] = sum(r.get("pairs", 1) for r in reports)
    if all("pauses" in r for r in reports):  # each process sees every pause; each drops its own latencies
        merged["pauses"] = {"continued": min(r["pauses"]["continued"] for r in reports),
                            "latency_dropped": sum(r["pauses"]["latency_dropped"] for r in reports)}
    merged["per_process"] = [{"pairs": r.get("pairs", 1), "roundtrips": r["roundtrips"],
                              "roundtrips_per_s": r["roundtrips_per_s"], "elapsed_s": r["elapsed_s"],
                              **{key: r[key] for key in ("per_pair_roundtrips", "per_pair_hdr_histograms", "pauses")
                                 if key in r},
                              **_one_pair_histogram(r)}
                             for r in reports]
    merged["connections"] = [dict(c, process=index) for index, r in enumerate(reports)
                             for c in r.get("connections") or []]
    encoded = []
    for r in reports:
        latency = r.get("latency") or {}
        if latency.get("hdr_histogram"):
            encoded.append(latency["hdr_histogram"])
        elif latency.get("value_counts"):
            encoded.append(histograms.encode_value_counts(latency["value_counts"]))
    merged["latency"] = {"unit": "ns", "recorded": bool(encoded),
                         "hdr_histogram": histograms.merge(encoded).encode().decode("ascii") if encoded else None}
    return merged


def _one_pair_histogram(report: dict[str, Any]) -> dict[str, Any]:
    """A process that drove one pair: its histogram is its pair's ({"per_pair_hdr_histograms": [it]}); else {}."""
    histogram = (report.get("latency") or {}).get("hdr_histogram")
    if report.get("pairs", 1) == 1 and "per_pair_roundtrips" not in report and histogram:
        return {"per_pair_hdr_histograms": [histogram]}
    return {}


# -- failures before or instead of the judge: each says what was waited for, and the limit that was applied
def client_timed_out(run: ClientRun, processes: int, limit_s: float, first_pid: int | None, server: ServerFacts,
                     where: str = "") -> Outcome:
    """A client process that did not finish within its limit (client_limit_s) and was stopped."""
    who = "client" if processes == 1 else f"client process {run.index}"
    return Outcome("timeout", f"{who}{where} did not finish within {limit_s:g} s",
                   ClientFacts(first_pid, run.exit_code, run.stderr_tail), server)


def barrier_timed_out(ready: int, processes: int, limit_s: float, tails: list[str], first_pid: int | None,
                      server: ServerFacts, where: str = "") -> Outcome:
    """Not every client process was connected and ready within the start barrier's limit (barrier_limit_s)."""
    return Outcome("timeout", f"start barrier{where}: {ready} of {processes} client processes reported ready "
                              f"within {limit_s:g} s",
                   ClientFacts(pid=first_pid, stderr_tail="\n".join(f"client process {index}: {tail}"
                                                     for index, tail in enumerate(tails))), server)


def ended_before_release(run: ClientRun, server_exit_code: int | None, first_pid: int | None, server: ServerFacts,
                         where: str = "") -> Outcome:
    """A client process that ended before the start barrier released every client."""
    failure = judge_client(run, server_exit_code, server) or Outcome(
        "client-failed", f"it exited with code {run.exit_code} without waiting for the go on {GO_FD_ENV} "
                         "(docs/contract.md: the start barrier)",
        ClientFacts(exit_code=run.exit_code, stderr_tail=run.stderr_tail), server)
    failure = replace(failure, client=replace(failure.client, pid=first_pid))
    return failure.prefixed(f"client process {run.index}{where} ended before the start barrier released: ")


# -- a program measured from outside (measure/outside.py)
# Its roundtrips are counted as the data segments its two sockets received over the window, halved: in a serial
# ping-pong one message is in flight at a time, so the server's relays never share a segment, and each of the
# suite's servers writes a frame of up to 16 KiB in one write, which the kernel sends as one segment (loopback's
# MSS is 32 KiB or more). Each roundtrip brings one message into each of the pair's sockets: two segments, whatever
# the compression. The count can be one message off at each edge of the window (one in flight). Above 16 KiB a
# frame may be written in parts (aiohttp writes a larger frame's header apart from its payload), so the count is
# refused there, from the bytes per segment the same counters give.
OUTSIDE_SEGMENT_BYTES_LIMIT = 16 * 1024
OUTSIDE_COUNT_SOURCE = "data segments received by the program's two sockets (TCP_INFO), halved"


def outside_figures(counters: dict[str, Any]) -> dict[str, Any]:
    """What the window's counters say of a program measured from outside: messages, roundtrips, bytes per message
    each way and segments it sent per message (its library's writes), beside the raw deltas."""
    messages = counters["data_segs_in"]
    return {"count_source": OUTSIDE_COUNT_SOURCE, "messages_received": messages,
            "roundtrips": messages // 2, "wall_s": counters["wall_s"],
            "bytes_per_message_received": round(counters["bytes_received"] / messages, 1) if messages else None,
            "bytes_per_message_sent": round(counters["bytes_acked"] / messages, 1) if messages else None,
            "segments_sent_per_message": round(counters["data_segs_out"] / messages, 3) if messages else None,
            "counters": counters}


def judge_outside(window: WindowSamples, server_exit_code: int | None, client: ClientFacts,
                  server: ServerFacts) -> Outcome:
    """The outcome of a program measured from outside, from the window's samples: ok with its roundtrips (no
    latency: nothing inside the program timed them), or why its count cannot be had."""
    counters = window.connection_counters or {"error": "its connections were not counted"}
    if server_exit_code is not None:
        return Outcome("server-crashed", f"server exited with code {server_exit_code} during the window",
                       client, server)
    if "error" in counters:
        return Outcome("error", f"program measured from outside: {counters['error']}", client, server)
    if counters["connections"] > 2:  # a third one opened after the first two: the same fault as before the window
        return outside_not_started("too-many", counters["connections"], 0.0, client, server)
    if counters["connections"] != 2:
        return Outcome("client-failed", f"program measured from outside: {counters['connections']} of its 2 "
                                        f"connections stayed open through the window", client, server)
    if not counters["data_segs_in"]:
        return Outcome("client-failed", f"program measured from outside: no message crossed its 2 connections in "
                                        f"the {counters['wall_s']:.2f} s window (it never sent, or stalled)",
                       client, server)
    per_segment = counters["bytes_received"] / counters["data_segs_in"]
    if per_segment >= OUTSIDE_SEGMENT_BYTES_LIMIT:
        return Outcome("client-failed", f"program measured from outside: its messages average {per_segment:,.0f} "
                                        f"bytes per segment; at {OUTSIDE_SEGMENT_BYTES_LIMIT // 1024} KiB or more a "
                                        "message may span segments, so the count would not be exact", client, server)
    figures = outside_figures(counters)
    measured = at_window_pace(Measured(roundtrips=figures["roundtrips"], elapsed_s=counters["wall_s"],
                                       roundtrips_per_s=figures["roundtrips"] / counters["wall_s"],
                                       latency_histogram=None, workload_figures={"outside": figures}), window)
    return unpaced_failure(measured, window, client, server) or Outcome("ok", None, client, server, measured, window)


def outside_not_started(problem: str, connected: int, limit_s: float, client: ClientFacts,
                        server: ServerFacts) -> Outcome:
    """A program measured from outside that did not hold its two connections: it exited first, opened fewer
    within the limit, closed one during its warmup, or opened more."""
    if problem == "exited":
        return outside_ended(f"before opening its 2 connections ({connected} open)", client, server)
    if problem == "too-few":
        what = "no connection" if not connected else f"{connected} of its 2 connections"
        return Outcome("client-failed", f"program measured from outside opened {what} to the server within "
                                        f"{limit_s:g} s", client, server)
    if problem == "closed-one":
        return Outcome("client-failed", f"program measured from outside closed a connection during its warmup "
                                        f"({connected} of its 2 open)", client, server)
    if problem == "too-many":
        return Outcome("client-failed", f"program measured from outside opened {connected} connections; it must "
                                        "open exactly 2 (one pair in one room)", client, server)
    return Outcome("error", f"program measured from outside: {problem}", client, server)


def outside_ended(when: str, client: ClientFacts, server: ServerFacts) -> Outcome:
    """A program measured from outside that ended by itself: it is meant to run until it is stopped."""
    last = (client.stderr_tail or "").strip().splitlines()
    said = f": {last[-1].strip()[:160]}" if last else ""
    return Outcome("client-failed", f"program measured from outside exited with code {client.exit_code} {when}"
                                    f"{said}", client, server)
