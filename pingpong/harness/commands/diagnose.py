"""`python run_bench.py diagnose SERVER CLIENT`: one cell in depth, then A/B switches, then a verdict.

The cell runs as in the matrix (the baseline), then with one thing switched at a time; the variants are
interleaved repeat by repeat so the machine's drift spreads over all of them. One extra attempt runs with strace
attached to both sides for the measured window to count syscalls per roundtrip (strace slows the cell, so that
attempt's rate is not used). The report: the baseline's signals and flags, its latency histogram as text,
syscalls per roundtrip, each switch's rate over the baseline's (the median of per-round ratios, paired because the
variants run in the same rounds) with its interval and that interval's coverage, and a verdict.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pingpong.harness.analysis import anomalies
from pingpong.harness.analysis.stats import Ratio, paired_ratio
from pingpong.harness.analysis.summary import summarize_cell, summarize_run
from pingpong.harness.measure.local import run_attempt
from pingpong.harness.commands import diagnose_profiles
from pingpong.harness.report import formatting, profile_report
from pingpong.harness.results import histograms
from pingpong.harness.results.files import DEFAULT_RESULTS_DIR, prepare_results_dir
from pingpong.harness.results.records import Cell, load, write_atomically
from pingpong.harness.results.stored import stored_path
from pingpong.harness.settings.catalog import PROJECT_ROOT, find, load_manifests, skip_reason
from pingpong.harness.settings.cell import CellSettings, placement_of
from pingpong.harness.settings.configuration import (RunConfiguration, add_measuring_options, add_package_options,
                                                     build_configuration, resolve_options, with_package_environments,
                                                     with_tls_files)
from pingpong.harness.settings.environment import describe_environment
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.settings.native_build import build_on_first_use
from pingpong.harness.settings.usage import UsageError
from pingpong.harness.system import work_dirs
from pingpong.harness.system.syscall_trace import STRACE_MISSING, strace_path

EXIT_OK, EXIT_BASELINE_FAILED, EXIT_USAGE = 0, 1, 2
MOVES = 1.5  # a switch "moves" the rate when the ratio is at least this far from 1 and its interval excludes 1
DIAGNOSE_FORMAT_VERSION = 2  # 2: paired ratios with coverage, kind and n; summaries' intervals (see results.py)
TOP_SYSCALLS = 8


@dataclass(frozen=True)
class Switch:
    """One A/B experiment: a name, what it changes, and whether a big effect means an anomaly or a tuning choice."""

    name: str  # short key: compression-off, nodelay-forced, loop-uvloop, localhost, unpinned, ...
    description: str
    settings: CellSettings
    mechanism: bool  # True: a big effect names the anomaly's mechanism; False: a legitimate tuning difference


DEFAULT_DURATION_S = 3.0  # shorter than the matrix's: diagnose measures the cell several times over


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`run_bench.py diagnose`'s options: the matrix's measuring options, then what picks the switches and the context."""
    parser.add_argument("server")
    parser.add_argument("client")
    add_measuring_options(parser, duration=DEFAULT_DURATION_S)
    choosing = parser.add_argument_group("what to diagnose")
    choosing.add_argument("--no-strace", action="store_true", help="skip the syscall-counting attempt")
    choosing.add_argument("--switches", help="comma-separated subset of switches to run (default: all that apply)")
    choosing.add_argument("--reference", type=Path,
                         help="a matrix results file for row/column context (default: results/latest.json if it "
                              "has this cell's row or column)")
    choosing.add_argument("--profile", action="store_true",
                          help="profile both sides of the cell and of a healthy pair in rounds of their own (py-spy, "
                               "V8's profiler): top functions per side, the differences, flame graphs")
    choosing.add_argument("--profile-rounds", type=int, default=3, metavar="N",
                          help="rounds of profiled attempts with --profile (default 3)")
    choosing.add_argument("--against", nargs=2, metavar=("SERVER", "CLIENT"),
                          help="the healthy pair for --profile (default: this server with the fastest other client "
                               "of its row in --reference)")
    choosing.add_argument("--manifest", type=Path, action="append")
    add_package_options(parser)
    parser.add_argument("--format", choices=("md", "json"), default="md")
    parser.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR)


def run(options: argparse.Namespace, command_line: list[str]) -> int:
    resolved = resolve_options(options)
    implementations = load_manifests(list(resolved.manifests))
    server = find(implementations, "server", options.server)
    client = find(implementations, "client", options.client)
    configuration = build_configuration(resolved, command_line, implementations, [server], [client])
    if len(configuration.points) != 1:
        raise UsageError("diagnose measures one cell with one setting each: its A/B switches are its comparisons "
                         "(give one --payload-size, --payload-kind, --pairs, --loop, --compression, --tls)")
    with work_dirs.temporary("pingpong-tls-") as tls_folder:
        if configuration.tls:
            configuration = with_tls_files(configuration, Path(tls_folder))
        return diagnose_cell(options, configuration, server, client, implementations)


def diagnose_cell(options: argparse.Namespace, configuration: RunConfiguration, server: Implementation,
                  client: Implementation, implementations: list[Implementation]) -> int:
    """Measure the baseline and its switches, count syscalls, profile both sides if asked, write and print the
    report."""
    baseline = configuration.settings_at(configuration.points[0])
    build_on_first_use([server, client], PROJECT_ROOT)
    why_not = skip_reason(server, client, baseline)
    if why_not:
        raise UsageError(f"cannot measure {server.name} × {client.name}: {why_not}")
    switches = plan_switches(server, client, baseline)
    if options.switches:
        wanted = [name.strip() for name in options.switches.split(",") if name.strip()]
        unknown = [name for name in wanted if name not in {s.name for s in switches}]
        if unknown:
            raise UsageError(f"unknown or inapplicable switch {', '.join(unknown)}; for this cell: "
                             f"{', '.join(s.name for s in switches)}")
        switches = [s for s in switches if s.name in wanted]
    if len(configuration.interpreters) > 1:
        raise UsageError("diagnose measures one cell: give --python one interpreter (a run takes several)")
    prepare_results_dir(configuration.results_dir)
    configuration = with_package_environments(configuration)
    package_fields = {"python_executable": configuration.settings.python_executable,
                      "node_modules": configuration.settings.node_modules}
    package_record = configuration.package_environments
    baseline = replace(baseline, **package_fields)
    switches = [replace(s, settings=replace(s.settings, **package_fields)) for s in switches]
    reference = load_reference(options.reference, configuration.results_dir, server.name, client.name)
    if options.profile and options.profile_rounds < 1:
        raise UsageError("--profile-rounds must be at least 1")
    healthy = (diagnose_profiles.healthy_pair(implementations, server, client, options.against, reference, baseline)
               if options.profile else None)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    base = configuration.results_dir / f"diagnose-{server.name}-{client.name}-{stamp}"
    cells = measure_variants(server, client, baseline, switches, configuration.repeat)
    traces: dict[str, Any] = {}
    if not options.no_strace:
        traces["baseline"] = trace_syscalls(server, client, baseline)
        mover = first_moving_mechanism(switches, cells)
        if mover is not None and not isinstance(traces["baseline"], str):
            traces[mover.name] = trace_syscalls(server, client, mover.settings)
    comparison = None
    if healthy is not None:
        profile_root = base.parent / f"{base.name}-profiles"
        pairs = {diagnose_profiles.CELL: (server, client), diagnose_profiles.HEALTHY: healthy}
        profiled = diagnose_profiles.measure_profiled(pairs, baseline, options.profile_rounds, profile_root)
        comparison = diagnose_profiles.compare_sides(
            profiled, {label: f"{pair[0].name} × {pair[1].name}" for label, pair in pairs.items()}, profile_root)
    report = build_report(server.name, client.name, baseline, switches, cells, traces, reference,
                          {"server": server.runtime, "client": client.runtime})
    if comparison is not None:
        report["profiles"] = diagnose_profiles.saved(comparison)
        report["verdict"] += diagnose_profiles.profile_verdict(comparison)
    document = {"format_version": DIAGNOSE_FORMAT_VERSION, "kind": "diagnose", "server": server.name,
                "client": client.name, "baseline_settings": asdict(baseline),
                "switches": {s.name: {"description": s.description, "settings": asdict(s.settings),
                                      "mechanism": s.mechanism} for s in switches},
                "cells": {name: asdict(cell) for name, cell in cells.items()},
                "syscall_attempts": {name: asdict(trace) if not isinstance(trace, str) else trace
                                     for name, trace in traces.items()},
                "reference": str(reference[0]) if reference else None,
                "environment": {**describe_environment(PROJECT_ROOT), "package_environments": package_record},
                "report": report_json(report)}
    markdown = render_report(report)
    write_atomically(base.with_suffix(".json"), json.dumps(document, indent=1, default=str))
    write_atomically(base.with_suffix(".md"), markdown)
    if comparison is not None:
        write_atomically(base.with_suffix(".html"), profile_report.html_page(
            f"Diagnosis: {server.name} server × {client.name} client", markdown, comparison))
    print(json.dumps(report_json(report), indent=1) if configuration.output_format == "json" else markdown.rstrip("\n"))
    print(f"diagnosis: {base}.json and {base}.md" + (f", {base}.html and {base}-profiles/" if comparison else ""),
          file=sys.stderr)
    return EXIT_OK if report["baseline"].measured else EXIT_BASELINE_FAILED


def plan_switches(server: Implementation, client: Implementation, baseline: CellSettings) -> list[Switch]:
    """The one-thing-at-a-time experiments that apply to this pair."""
    switches = []
    if server.protocol == "websocket":
        if "off" in client.compression and baseline.compression != "off":
            switches.append(Switch("compression-off", "permessage-deflate off in the client (no offer made)",
                                   replace(baseline, client_compression="off"), mechanism=True))
        elif "off" in server.compression and baseline.compression != "off":
            switches.append(Switch("compression-off", "permessage-deflate refused by the server (this client "
                                   "cannot stop offering it)", replace(baseline, compression="off",
                                                                        client_compression=baseline.compression),
                                   mechanism=True))
    switches.append(Switch("nodelay-forced", "TCP_NODELAY set on both sides' sockets from outside (pidfd_getfd)",
                           replace(baseline, force_nodelay=True), mechanism=True))
    python_sides = [i for i in (server, client) if i.runtime == "python" and {"asyncio", "uvloop"} <= set(i.loops)]
    if python_sides:
        for loop in ("asyncio", "uvloop"):
            if loop != baseline.loop:
                switches.append(Switch(f"loop-{loop}", f"every Python side on {loop}",
                                       replace(baseline, loop=loop), mechanism=False))
    if any(side.runtime == "python" for side in (server, client)):
        other = "as-is" if baseline.malloc == "settled" else "settled"
        switches.append(Switch(f"malloc-{other}", "glibc malloc left as each process finds it (by chance, an mmap "
                               "and munmap per asyncio read)" if other == "as-is" else
                               "glibc malloc's thresholds fixed in every process (GLIBC_TUNABLES)",
                               replace(baseline, malloc=other), mechanism=True))
    switches.append(Switch("localhost", "the client connects to 'localhost' instead of the literal 127.0.0.1",
                           replace(baseline, client_host="localhost"), mechanism=True))
    placement = placement_of(baseline)
    if placement != "split":
        switches.append(Switch("placement-split", "server and client on CPUs of their own: a cross-CPU wakeup per "
                               "message", replace(baseline, pin=True, placement="split"), mechanism=False))
    if placement != "same-cpu":
        switches.append(Switch("placement-same-cpu", "server and client on one CPU, the orchestrator on another",
                               replace(baseline, pin=True, placement="same-cpu"), mechanism=False))
    if placement != "unpinned":
        switches.append(Switch("unpinned", "no CPU pinning: the kernel places both sides",
                               replace(baseline, pin=False), mechanism=False))
    return switches


def measure_variants(server: Implementation, client: Implementation, baseline: CellSettings,
                     switches: list[Switch], repeats: int) -> dict[str, Cell]:
    variants = [("baseline", baseline)] + [(s.name, s.settings) for s in switches]
    cells = {name: Cell(server=server.name, client=client.name) for name, _ in variants}
    total = repeats * len(variants)
    done = 0
    for repeat in range(1, repeats + 1):
        for name, settings in variants:
            attempt = run_attempt(server, client, settings, repeat, PROJECT_ROOT)
            cells[name].attempts.append(attempt)
            done += 1
            outcome = f"{attempt.roundtrips_per_s:,.0f} roundtrips/s" if attempt.ok else f"{attempt.status}: " \
                                                                                         f"{attempt.reason}"
            print(f"[{done}/{total}] {name}, repeat {repeat}: {outcome}", file=sys.stderr, flush=True)
    return cells


def trace_syscalls(server: Implementation, client: Implementation, baseline: CellSettings):
    """One attempt with strace attached to both sides over the measured window, or why not."""
    if strace_path() is None:
        return STRACE_MISSING
    print("syscall count: one more attempt with strace attached (slower by design)", file=sys.stderr, flush=True)
    return run_attempt(server, client, replace(baseline, trace_syscalls=True), 0, PROJECT_ROOT)


def first_moving_mechanism(switches: list[Switch], cells: dict[str, Cell]) -> Switch | None:
    """The first mechanism switch that moved the rate: its syscalls are counted too, to contrast the baseline's."""
    for switch in switches:
        ratio = switch_ratio(cells[switch.name], cells["baseline"])
        if switch.mechanism and ratio is not None and moves(ratio):
            return switch
    return None


def switch_ratio(variant: Cell, baseline: Cell) -> Ratio | None:
    """The variant's rate over the baseline's, paired by round (they alternate within each round); None when they
    have no good round in common."""
    variant_rates, baseline_rates = variant.rates_by_round(), baseline.rates_by_round()
    if not variant_rates.keys() & baseline_rates.keys():
        return None
    return paired_ratio(variant_rates, baseline_rates)


def load_reference(path: Path | None, results_dir: Path, server: str, client: str):
    """(path, summaries) of a matrix run with this cell's row or column, for context; None when there is none."""
    candidate = path or results_dir / "latest.json"
    try:
        run = load(candidate)
    except FileNotFoundError:
        if path:
            raise UsageError(f"--reference: {path} does not exist") from None
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        if path:
            raise UsageError(f"--reference: {path} is not a results file of this suite ({exc})") from None
        return None
    summaries = summarize_run(run)
    if not any(key[0] == server or key[1] == client for key, s in summaries.items() if s.measured):
        if path:
            raise UsageError(f"--reference: {path} has neither server {server} nor client {client}")
        return None
    return stored_path(candidate), summaries  # the file read: X.json.xz when X.json was compressed


def syscalls_per_roundtrip(attempt) -> dict[str, Any]:
    """Per side, {syscall: calls per roundtrip} (top ones), or the reason strace gave none."""
    if isinstance(attempt, str) or attempt is None:
        return {"note": attempt or "skipped (--no-strace)"}
    if not attempt.ok:
        return {"note": f"the traced attempt failed: {attempt.status}: {attempt.reason}"}
    found: dict[str, Any] = {"traced_roundtrips_per_s": attempt.roundtrips_per_s}
    for side in ("server", "client"):
        side_counts = (attempt.syscalls or {}).get(side) or {"error": "no strace output"}
        if "calls" not in side_counts or not side_counts.get("traced_wall_s"):
            found[side] = {"note": side_counts.get("error") or "strace detached before the window ended"}
            continue
        roundtrips = diagnose_profiles.attached_roundtrips(attempt, side_counts, "traced_wall_s")
        if roundtrips <= 0:
            found[side] = {"note": "no roundtrip completed while strace was attached"}
            continue
        calls = side_counts["calls"]
        per = {name: count / roundtrips for name, count in calls.items()}
        top = dict(sorted(per.items(), key=lambda item: -item[1])[:TOP_SYSCALLS])
        found[side] = {"total": sum(per.values()), "top": top,
                       "futex": per.get("futex", 0.0)}
    return found


def column_context(reference, server: str, client: str) -> dict[str, Any]:
    """Medians of CPU per roundtrip over the reference run's column (same client) and row (same server)."""
    if not reference:
        return {}
    _, summaries = reference
    column = [s.client_cpu.us_per_roundtrip for (sv, cl), s in summaries.items()
              if cl == client and sv != server and s.client_cpu.us_per_roundtrip]
    row = [s.server_cpu.us_per_roundtrip for (sv, cl), s in summaries.items()
           if sv == server and cl != client and s.server_cpu.us_per_roundtrip]
    own = summaries.get((server, client))
    return {"client_cpu_column_median": statistics.median(column) if column else None,
            "server_cpu_row_median": statistics.median(row) if row else None,
            "flags_in_reference": list(own.flags) if own and own.flags is not None else None,
            "expected_roundtrips_per_s": own.expected_roundtrips_per_s if own else None}


def build_report(server: str, client: str, baseline: CellSettings, switches: list[Switch], cells: dict[str, Cell],
                 traces: dict[str, Any], reference, runtimes: dict[str, str] | None = None) -> dict[str, Any]:
    summary = summarize_cell(cells["baseline"])
    report: dict[str, Any] = {"server": server, "client": client, "baseline": summary,
                              "flags": anomalies.rule_flags(summary, baseline.payload_size, runtimes=runtimes,
                                                            malloc=baseline.malloc)
                              if summary.measured else [],
                              "context": column_context(reference, server, client),
                              "syscalls_per_roundtrip": syscalls_per_roundtrip(traces.get("baseline")),
                              "syscalls_per_roundtrip_switched": {
                                  name: syscalls_per_roundtrip(trace) for name, trace in traces.items()
                                  if name != "baseline"},
                              "switches": []}
    histogram_lines = []
    encoded = [a.latency_histogram for a in cells["baseline"].attempts if a.ok and a.latency_histogram]
    if encoded:
        histogram_lines = histograms.text_histogram(histograms.merge(encoded))
    report["latency_histogram_text"] = histogram_lines
    for switch in switches:
        variant = summarize_cell(cells[switch.name])
        entry: dict[str, Any] = {"name": switch.name, "description": switch.description,
                                 "mechanism": switch.mechanism, "summary": variant}
        ratio = switch_ratio(cells[switch.name], cells["baseline"])
        if ratio is not None:
            entry["ratio"] = asdict(ratio)
            entry["moves"] = moves(ratio)
        else:
            entry["ratio"] = None
            entry["moves"] = False
        report["switches"].append(entry)
    report["verdict"] = verdict(report)
    return report


def report_json(report: dict[str, Any]) -> dict[str, Any]:
    """The report as saved and printed: its cell summaries (baseline, each switch's) as their JSON mapping."""
    return {**report, "baseline": report["baseline"].to_json(),
            "switches": [{**entry, "summary": entry["summary"].to_json()} for entry in report["switches"]]}


def moves(ratio: Ratio) -> bool:
    """A switch moves the rate when the ratio is >= MOVES or <= 1/MOVES and its interval excludes 1."""
    big = ratio.value >= MOVES or ratio.value <= 1 / MOVES
    return big and (ratio.low is None or ratio.excludes_one())


def verdict(report: dict[str, Any]) -> list[str]:
    """Short sentences naming the mechanism, from the switches that moved the rate and the signals; pure."""
    baseline = report["baseline"]
    if not baseline.measured:
        return ["baseline failed: " + "; ".join(baseline.failures or ["no attempt succeeded"])]
    context = report.get("context") or {}
    sentences = []
    by_name = {entry["name"]: entry for entry in report["switches"]}
    compression = by_name.get("compression-off")
    if compression and compression["moves"] and compression["ratio"]["value"] > 1:
        cpu = baseline.client_cpu.us_per_roundtrip
        off_cpu = compression["summary"].client_cpu.us_per_roundtrip
        detail = []
        if cpu and context.get("client_cpu_column_median"):
            detail.append(f"client CPU {cpu / context['client_cpu_column_median']:.1f}× its column median")
        elif cpu and off_cpu:
            detail.append(f"client CPU {cpu:.0f} µs per roundtrip against {off_cpu:.0f} without it")
        negotiated = baseline.compression_negotiated or "permessage-deflate"
        sentences.append(f"compression negotiated ({negotiated.split(';')[0]})"
                         + (f": {detail[0]}" if detail else "")
                         + f"; with compression off {compression['ratio']['value']:.1f}× faster")
    nodelay = by_name.get("nodelay-forced")
    if nodelay and nodelay["moves"] and nodelay["ratio"]["value"] > 1:
        segments = baseline.segments_per_message
        delayed = baseline.delayed_acks_per_roundtrip
        signals = []
        if delayed is not None:
            signals.append(f"{delayed:.2f} delayed ACKs per roundtrip")
        if segments is not None:
            signals.append(f"{segments:.2f} TCP segments per message")
        sentences.append("Nagle's algorithm meets delayed ACKs"
                         + (f" ({', '.join(signals)})" if signals else "")
                         + f"; with TCP_NODELAY forced {nodelay['ratio']['value']:.1f}× faster")
    localhost = by_name.get("localhost")
    if localhost and localhost["moves"]:
        sentences.append(f"connecting to 'localhost' instead of 127.0.0.1 changes the rate "
                         f"{localhost['ratio']['value']:.2f}× (address family "
                         f"{localhost['summary'].address_family or '?'})")
    if not sentences:
        flags = report.get("flags") or []
        if flags:
            sentences.append("flagged, but no switch moved the rate: " + "; ".join(flags))
        else:
            sentences.append("no anomaly: no signal rule fired and no switch that names a mechanism (compression, "
                             "TCP_NODELAY, localhost) moved the rate by "
                             f"{MOVES:g}× or more")
    for entry in report["switches"]:
        if not entry["mechanism"] and entry["moves"]:
            sentences.append(f"tuning, not an anomaly: {entry['description']}: {entry['ratio']['value']:.2f}×")
    return sentences


def render_report(report: dict[str, Any]) -> str:
    """The diagnosis as Markdown; pure."""
    baseline = report["baseline"]
    lines = [f"# Diagnosis: {report['server']} server × {report['client']} client", ""]
    lines += ["## Verdict", ""] + [f"- {sentence}" for sentence in report["verdict"]]
    lines += ["", "## Baseline", ""]
    if baseline.measured:
        rates = baseline.roundtrips_per_s
        lines.append(f"- {formatting.matrix_cell_text(baseline)} roundtrips/s (median of {rates.n}, "
                     f"{formatting.format_rate(rates.minimum)}–{formatting.format_rate(rates.maximum)})")
        context = report.get("context") or {}
        if context.get("expected_roundtrips_per_s"):
            lines.append(f"- the reference matrix expected {context['expected_roundtrips_per_s']:,.0f}/s from this "
                         f"cell's row and column")
        for side in ("server", "client"):
            cpu = baseline.cpu(side).us_per_roundtrip
            utilization = baseline.cpu(side).utilization
            median_key = "server_cpu_row_median" if side == "server" else "client_cpu_column_median"
            reference = context.get(median_key)
            lines.append(f"- {side}: {formatting.format_optional(cpu, '{:.1f}')} µs CPU per roundtrip"
                         + (f" ({cpu / reference:.1f}× the reference {'row' if side == 'server' else 'column'} "
                            f"median of {reference:.1f})" if cpu and reference else "")
                         + f", CPU/wall {formatting.format_optional(utilization, '{:.2f}')}, TCP_NODELAY "
                         + formatting.NODELAY_TEXT[baseline.tcp_nodelay(side)])
        lines.append(f"- negotiated: {formatting.short_extensions(baseline.compression_negotiated)}; address "
                     f"family {baseline.address_family}; loops {baseline.server_loop}/{baseline.client_loop}")
        tcp = baseline.tcp_per_roundtrip or {}
        if tcp:
            lines.append("- kernel TCP counters per roundtrip: " + ", ".join(
                f"{name.split('.', 1)[1]} {value:.3g}" for name, value in tcp.items()))
        lines.append(f"- share of roundtrips slower than 35 ms: "
                     f"{slow_share(baseline.latency) * 100:.2f}%")
    flags = report.get("flags") or []
    lines += ["", "Flags: " + ("; ".join(flags) if flags else "none")]
    lines += ["", "## Latency histogram (baseline, all repeats)", "", "```"] + report["latency_histogram_text"] + ["```"]
    lines += ["", "## Syscalls per roundtrip (strace -c -f, one attempt)", ""]
    syscalls = report["syscalls_per_roundtrip"]
    if "note" in syscalls:
        lines.append(f"Not counted: {syscalls['note']}")
    else:
        lines.append(f"Under strace the pair ran at {syscalls['traced_roundtrips_per_s']:,.0f} roundtrips/s; "
                     "counts per roundtrip do not depend much on that.")
        lines.append("")
        for side in ("server", "client"):
            side_counts = syscalls[side]
            if "note" in side_counts:
                lines.append(f"- {side}: not counted: {side_counts['note']}")
                continue
            lines.append(f"- {side}: {side_counts['total']:.1f} syscalls per roundtrip; " + ", ".join(
                f"{name} {value:.2f}" for name, value in side_counts["top"].items()))
        for name, switched in (report.get("syscalls_per_roundtrip_switched") or {}).items():
            lines += ["", f"With the switch that moved the rate, {name}:"]
            if "note" in switched:
                lines.append(f"- not counted: {switched['note']}")
                continue
            for side in ("server", "client"):
                side_counts, before = switched[side], syscalls[side]
                if "note" in side_counts or "note" in before:
                    continue
                lines.append(f"- {side}: {side_counts['total']:.1f} syscalls per roundtrip (baseline "
                             f"{before['total']:.1f}); futex {side_counts['futex']:.2f} (baseline "
                             f"{before['futex']:.2f})")
    ratios = [Ratio(**entry["ratio"]) for entry in report["switches"] if entry["ratio"]]
    usual = formatting.usual_label(ratios)
    lines += ["", "## Switches (one change at a time, interleaved with the baseline)", "",
              "Ratio to baseline: the median of the per-round ratios of the switch's rate to the baseline's (both run "
              f"in every round); {formatting.interval_legend(ratios)}.", "",
              "| switch | what changes | roundtrips/s | ratio to baseline [interval] | moves the rate? |",
              "|---|---|---:|---:|---|"]
    for entry in report["switches"]:
        variant = entry["summary"]
        rate = formatting.matrix_cell_text(variant) if variant.measured else "failed"
        ratio = entry["ratio"]
        ratio_text = formatting.format_ratio(Ratio(**ratio), usual) if ratio else "–"
        lines.append(f"| {entry['name']} | {entry['description']} | {rate} | {ratio_text} | "
                     f"{'**yes**' if entry['moves'] else 'no'} |")
    if report.get("profiles"):
        lines += profile_report.markdown_lines(report["profiles"])
    return "\n".join(lines) + "\n"


def slow_share(latency) -> float:
    """The share of roundtrips slower than 35 ms in a summary.Latency; 0 when nothing was recorded."""
    return latency.slow_share if latency is not None and latency.slow_share is not None else 0.0
