"""`python run_bench.py`: run the server x client matrix, print it, save it under results/."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from typing import Any

from pingpong.harness import package_envs, render, sweep
from pingpong.kit import tls
from pingpong.contract import WORKLOADS
from pingpong.harness.environment import describe_environment
from pingpong.contract import COMPRESSION_MODES, LOOPS
from pingpong.harness.manifest import Implementation, ManifestError, check_availability, load_manifest
from pingpong.contract import DEFAULT_PAYLOAD_KIND, DEFAULT_PAYLOAD_SIZE, PAYLOAD_KINDS
from pingpong.harness.results import Attempt, Cell, RunResult, load, write_atomically
from pingpong.harness.runner import CellSettings, pairs_per_process, plan_cpus, run_attempt
from pingpong.harness.summary import summarize_run
from pingpong.harness.usage import OneLineArgumentParser, UsageError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MANIFEST = PROJECT_ROOT / "manifest.toml"
DEFAULT_RESULTS_DIR = PROJECT_ROOT / "results"
EXIT_OK, EXIT_CELL_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
QUICK = {"duration": 1.0, "warmup": 0.5, "repeat": 1}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="run_bench.py",
        description="WebSocket ping-pong benchmark: every server x every client, roundtrips per second.",
        epilog="Subcommands: 'run_bench.py diagnose SERVER CLIENT' measures one cell in depth with A/B switches; "
               "'run_bench.py compare A.json B.json' compares two runs cell by cell.")
    selection = parser.add_argument_group("what to run")
    selection.add_argument("--servers", help="comma-separated server names (default: all available)")
    selection.add_argument("--clients", help="comma-separated client names (default: all available)")
    selection.add_argument("--list", action="store_true", help="list implementations and whether they run here")
    selection.add_argument("--manifest", type=Path, action="append",
                           help="manifest file(s) to read; repeat to add more (default: manifest.toml)")
    measuring = parser.add_argument_group("how to measure")
    measuring.add_argument("--duration", type=float, default=5.0, help="measured seconds per repeat (default 5)")
    measuring.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first (default 1)")
    measuring.add_argument("--repeat", type=int, default=3, help="repeats per cell, interleaved (default 3)")
    measuring.add_argument("--quick", action="store_true",
                           help=f"smoke run: --duration {QUICK['duration']:g} --warmup {QUICK['warmup']:g} "
                                f"--repeat {QUICK['repeat']}")
    measuring.add_argument("--loop", choices=LOOPS, default="auto",
                           help="event loop of the Python implementations (auto: what each picks by itself)")
    measuring.add_argument("--compression", choices=COMPRESSION_MODES, default="default",
                           help="permessage-deflate: each library's out-of-the-box behaviour, off, or on")
    measuring.add_argument("--payload-size", default=str(DEFAULT_PAYLOAD_SIZE), metavar="BYTES[,BYTES...]",
                           help=f"bytes per message (default {DEFAULT_PAYLOAD_SIZE}); a list sweeps, e.g. 16,1024,65536")
    measuring.add_argument("--payload-kind", default=DEFAULT_PAYLOAD_KIND, metavar="KIND[,KIND...]",
                           help=f"{' | '.join(PAYLOAD_KINDS)} (default {DEFAULT_PAYLOAD_KIND}); a list sweeps")
    measuring.add_argument("--pairs", default="1", metavar="N[,N...]",
                           help="independent pairs per cell, each in its own room, all driven by the client "
                                "(default 1; see --client-processes); a list sweeps, e.g. 1,10,100")
    measuring.add_argument("--client-processes", type=int, default=1, metavar="K",
                           help="spread each cell's pairs over K client processes (default 1), for when one client "
                                "process saturates its CPU; they share the client's CPUs")
    measuring.add_argument("--tls", action="store_true",
                           help="wss:// everywhere, with a throwaway CA and server certificate made for this run")
    measuring.add_argument("--workload", choices=WORKLOADS, default="pingpong",
                           help="pingpong: roundtrips/s on open connections; handshake: connections opened, one "
                                "roundtrip, closed, per second")
    measuring.add_argument("--no-pin", action="store_true",
                           help="do not pin server and client to separate CPUs")
    measuring.add_argument("--ready-timeout", type=float, default=15.0,
                           help="seconds a server may take to accept its first WebSocket (default 15)")
    measuring.add_argument("--stall-timeout", type=float, default=10.0,
                           help="seconds without a completed roundtrip before a client gives up (default 10)")
    measuring.add_argument("--client-grace", type=float, default=30.0,
                           help="seconds a client may take beyond warmup + duration before it is stopped as hung")
    add_package_options(parser)
    output = parser.add_argument_group("output")
    output.add_argument("--format", choices=("md", "json", "csv"), default="md", help="what to print on stdout")
    output.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR,
                        help="where <timestamp>.json/.md and latest.md go (default results/)")
    output.add_argument("--resume", type=Path, metavar="FILE",
                        help="continue the interrupted run saved in FILE: measure only its missing attempts "
                             "(the options must match the ones it was made with)")
    return parser


def add_package_options(parser: argparse.ArgumentParser) -> None:
    versions = parser.add_argument_group("other package versions (old releases on demand)")
    versions.add_argument("--python-packages", metavar="SPECS",
                          help='e.g. "aiohttp==3.9.1 uvicorn==0.24.0.post1": every Python implementation runs in a '
                               'cached virtual environment with these instead of the pinned versions')
    versions.add_argument("--node-packages", metavar="SPECS",
                          help='e.g. "ws@8.14.2": every JavaScript implementation loads these versions from a cached '
                               'node_modules instead of the project\'s')


def package_environments(options: argparse.Namespace) -> tuple[dict[str, str | None], dict[str, Any]]:
    """Build (or reuse) the environments --python-packages / --node-packages ask for.

    Returns the CellSettings fields that point at them and a record of what they hold, for the results.
    """
    fields: dict[str, str | None] = {"python_executable": None, "node_modules": None}
    record: dict[str, Any] = {}
    try:
        if options.python_packages is not None:
            environment = package_envs.python_environment(package_envs.parse_python_specs(options.python_packages),
                                                         PROJECT_ROOT)
            fields["python_executable"] = environment.executable_or_modules
            record["python"] = asdict(environment)
        if options.node_packages is not None:
            environment = package_envs.node_environment(package_envs.parse_node_specs(options.node_packages),
                                                       PROJECT_ROOT)
            fields["node_modules"] = environment.executable_or_modules
            record["node"] = asdict(environment)
    except package_envs.EnvironmentBuildError as exc:
        raise UsageError(f"could not build the package environment: {exc}") from None
    return fields, record


def main(argv: list[str] | None = None) -> int:
    """Map every outcome to an exit code: 0 all cells measured, 1 a cell failed, 2 bad input, 130 interrupted."""
    try:
        return run(argv)
    except (UsageError, ManifestError) as exc:
        print(f"run_bench.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


SUBCOMMANDS = ("diagnose", "compare")


def run(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["diagnose"]:
        from pingpong.harness import diagnose
        return diagnose.run(argv[1:])
    if argv[:1] == ["compare"]:
        from pingpong.harness import compare
        return compare.run(argv[1:])
    options = parse_options(argv)
    implementations = load_manifests(options.manifest)
    if options.list:
        print(render_listing(implementations, options.format))
        return EXIT_OK
    servers = select(implementations, "server", options.servers)
    clients = select(implementations, "client", options.clients)
    prepare_results_dir(options.results_dir)
    package_fields, package_record = package_environments(options)
    settings = CellSettings(duration_s=options.duration, warmup_s=options.warmup, loop=options.loop,
                            compression=options.compression, payload_size=DEFAULT_PAYLOAD_SIZE,
                            payload_kind=DEFAULT_PAYLOAD_KIND, ready_timeout_s=options.ready_timeout,
                            stall_timeout_s=options.stall_timeout, pin=not options.no_pin,
                            client_grace_s=options.client_grace, workload=options.workload,
                            client_processes=options.client_processes, **package_fields)
    with tempfile.TemporaryDirectory(prefix="pingpong-tls-") as tls_folder:
        if options.tls:
            files = tls.make_tls_files(Path(tls_folder))
            settings = replace(settings, tls_ca=files.ca, tls_cert=files.cert, tls_key=files.key)
        return run_points(argv, options, settings, implementations, servers, clients, package_record)


def run_points(argv, options, settings: CellSettings, implementations, servers, clients, package_record) -> int:
    """The matrix once, or once per point of a sweep."""
    points = sweep_points(options)
    if len(points) == 1:
        result, _ = run_matrix(argv, options, replace(settings, **points[0]), implementations, servers, clients,
                               package_record, print_table=True)
        return exit_code([result])
    if options.resume:
        raise UsageError("--resume continues one matrix, not a sweep; resume the sweep's unfinished point file")
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    results: list[tuple[dict[str, Any], RunResult, ResultPaths]] = []
    for index, point in enumerate(points, 1):
        print(f"sweep point {index}/{len(points)}: {sweep.describe_point(point)}", file=sys.stderr, flush=True)
        result, paths = run_matrix(argv, options, replace(settings, **point), implementations, servers, clients,
                                   package_record, print_table=False, suffix=sweep.point_suffix(point))
        results.append((point, result, paths))
        if result.interrupted:
            break
    report_sweep(started, results, options)
    return exit_code([result for _, result, _ in results])


def sweep_points(options: argparse.Namespace) -> list[dict[str, Any]]:
    """Every combination of the listed payload sizes, kinds and pair counts: one matrix each."""
    return [{"payload_size": size, "payload_kind": kind, "pairs": pairs}
            for size in options.payload_sizes for kind in options.payload_kinds for pairs in options.pairs_list]


def exit_code(results: list[RunResult]) -> int:
    if any(result.interrupted for result in results):
        return EXIT_INTERRUPTED
    failed = any(cell.status in ("failed", "partial") for result in results for cell in result.cells)
    return EXIT_CELL_FAILED if failed else EXIT_OK


def run_matrix(argv, options, settings: CellSettings, implementations, servers, clients, package_record,
               print_table: bool, suffix: str = "") -> tuple[RunResult, "ResultPaths"]:
    """Measure, save and draw one matrix with one set of settings (the whole run, or one point of a sweep)."""
    result = new_run(argv, options, settings, implementations, servers, clients)
    result.environment["package_environments"] = package_record
    paths = ResultPaths.for_run(options.results_dir, result.started_at, suffix)
    if options.resume:
        result, paths = resume(options.resume, result, options.results_dir)
    save(result, paths)
    measure_matrix(result, settings, servers, clients, options.repeat, paths)
    summaries = summarize_run(result)
    if print_table:
        print(render_stdout(result, summaries, options.format))
    print(f"results: {paths.json} and {paths.markdown} (also {paths.latest_markdown})", file=sys.stderr)
    figures = draw_figures(result, summaries, paths)
    if figures:
        print(f"figures: {', '.join(str(path) for path in figures)}", file=sys.stderr)
    return result, paths


def report_sweep(started: str, results, options: argparse.Namespace) -> None:
    """The sweep's index (JSON), its table (Markdown, also printed) and its curves (PNG)."""
    members = [(point, result, summarize_run(result), paths.json.name) for point, result, paths in results]
    stem = options.results_dir / (started.replace(":", "-").replace("+00-00", "Z") + "-sweep")
    index = sweep.sweep_index(members)
    write_atomically(stem.with_suffix(".json"), json.dumps(index, indent=1))
    markdown = sweep.render_sweep_markdown(index)
    write_atomically(stem.with_suffix(".md"), markdown)
    if options.format == "json":
        print(json.dumps(index, indent=1))
    else:
        print(markdown.rstrip("\n"))
    print(f"sweep: {stem}.json and {stem}.md", file=sys.stderr)
    try:
        from pingpong.harness import plots
        figure = plots.write_sweep_figure(index, stem)
        if figure:
            print(f"figures: {figure}", file=sys.stderr)
    except Exception as exc:
        print(f"figures not drawn: {type(exc).__name__}: {exc}", file=sys.stderr)


def parse_options(argv: list[str] | None) -> argparse.Namespace:
    options = build_parser().parse_args(argv)
    options.manifest = options.manifest or [DEFAULT_MANIFEST]
    if options.quick:
        options.duration, options.warmup, options.repeat = QUICK["duration"], QUICK["warmup"], QUICK["repeat"]
    problems = []
    if not options.duration > 0:
        problems.append(f"--duration must be > 0 seconds, got {options.duration:g}")
    if not options.warmup >= 0:
        problems.append(f"--warmup must be >= 0 seconds, got {options.warmup:g}")
    if options.repeat < 1:
        problems.append(f"--repeat must be at least 1, got {options.repeat}")
    options.payload_sizes = _integer_list("--payload-size", options.payload_size, minimum=1, problems=problems)
    options.pairs_list = _integer_list("--pairs", options.pairs, minimum=1, problems=problems)
    options.payload_kinds = [kind.strip() for kind in options.payload_kind.split(",") if kind.strip()]
    unknown_kinds = [kind for kind in options.payload_kinds if kind not in PAYLOAD_KINDS]
    if unknown_kinds or not options.payload_kinds:
        problems.append(f"--payload-kind {options.payload_kind!r}: choose from {', '.join(PAYLOAD_KINDS)}")
    if options.client_processes < 1:
        problems.append(f"--client-processes must be at least 1, got {options.client_processes}")
    if options.workload == "handshake" and (options.pairs_list != [1] or options.client_processes != 1):
        problems.append("--workload handshake opens one connection at a time; it takes no --pairs or "
                        "--client-processes")
    if not options.ready_timeout > 0 or not options.stall_timeout > 0 or not options.client_grace > 0:
        problems.append("--ready-timeout, --stall-timeout and --client-grace must be > 0 seconds")
    if problems:
        raise UsageError("; ".join(problems))
    return options


def _integer_list(option: str, text: str, minimum: int, problems: list[str]) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        problems.append(f"{option} takes whole numbers separated by commas, got {text!r}")
        return [minimum]
    if not values or min(values) < minimum:
        problems.append(f"{option} values must be at least {minimum}, got {text!r}")
        return [minimum]
    return list(dict.fromkeys(values))


def load_manifests(paths: list[Path]) -> list[Implementation]:
    implementations: list[Implementation] = []
    for path in paths:
        for implementation in load_manifest(path):
            if any(i.role == implementation.role and i.name == implementation.name for i in implementations):
                raise ManifestError(f"manifest {path}: {implementation.role} '{implementation.name}' is already "
                                    f"defined in an earlier manifest")
            implementations.append(implementation)
    return implementations


def select(implementations: list[Implementation], role: str, names: str | None) -> list[Implementation]:
    known = [implementation for implementation in implementations if implementation.role == role]
    if names is None:
        return known
    by_name = {implementation.name: implementation for implementation in known}
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in by_name]
    if unknown or not wanted:
        raise UsageError(f"unknown {role} {', '.join(repr(n) for n in unknown) or '(none given)'}; "
                         f"valid {role}s: {', '.join(by_name)}")
    return [by_name[name] for name in dict.fromkeys(wanted)]


def prepare_results_dir(results_dir: Path) -> None:
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        probe = results_dir / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"results folder {results_dir} is not writable: {exc.strerror}") from None


def skip_reason(server: Implementation, client: Implementation, settings: CellSettings) -> str | None:
    """Why a pair cannot be measured here and now, or None."""
    for implementation in (server, client):
        availability = check_availability(implementation, PROJECT_ROOT)
        if not availability.available:
            return f"{implementation.role} {implementation.name} unavailable: {availability.reason}"
    if server.protocol != client.protocol:
        return f"server speaks {server.protocol}, client speaks {client.protocol}"
    for implementation in (server, client):
        if settings.compression not in implementation.compression:
            return f"{implementation.role} {implementation.name} does not support --compression {settings.compression}"
    if max(pairs_per_process(settings.pairs, settings.client_processes)) > 1 and "pairs" not in client.features:
        return f"client {client.name} drives one pair only (no --pairs)"
    if settings.workload == "handshake" and "handshake" not in client.features:
        return f"client {client.name} does not run --workload handshake"
    if settings.tls_ca:
        for implementation in (server, client):
            if "tls" not in implementation.features:
                return f"{implementation.role} {implementation.name} does not support --tls"
    return None


def new_run(argv, options, settings: CellSettings, implementations, servers, clients) -> RunResult:
    server_cpus, client_cpus = plan_cpus(settings.pin)
    configuration = {**asdict(settings), "repeat": options.repeat, "pinned": server_cpus is not None,
                     "server_cpus": sorted(server_cpus) if server_cpus else None,
                     "client_cpus": sorted(client_cpus) if client_cpus else None,
                     "servers": [s.name for s in servers], "clients": [c.name for c in clients],
                     "python_packages": options.python_packages, "node_packages": options.node_packages,
                     "tls": settings.tls_ca is not None,
                     "manifests": [str(path) for path in options.manifest]}
    listing = {"server": {}, "client": {}}
    for implementation in implementations:
        availability = check_availability(implementation, PROJECT_ROOT)
        listing[implementation.role][implementation.name] = {**asdict(implementation), **asdict(availability)}
    cells = [Cell(server=s.name, client=c.name, skipped=skip_reason(s, c, settings)) for s in servers for c in clients]
    return RunResult(started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     command_line=[sys.executable, "run_bench.py", *(sys.argv[1:] if argv is None else argv)],
                     configuration=configuration, environment=describe_environment(PROJECT_ROOT),
                     implementations=listing, cells=cells)


# The configuration keys that shape the figures: a resumed run must not change any of them.
RESUME_KEYS = ("duration_s", "warmup_s", "repeat", "loop", "compression", "payload_size", "payload_kind", "pin",
               "servers", "clients", "python_packages", "node_packages", "pairs", "workload", "tls",
               "client_processes")


def resume(path: Path, fresh: RunResult, results_dir: Path) -> tuple[RunResult, "ResultPaths"]:
    """The saved run to continue, after checking this command asks for the same configuration."""
    try:
        saved = load(path)
    except FileNotFoundError:
        raise UsageError(f"--resume: {path} does not exist") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--resume: {path} is not a results file of this suite ({exc})") from None
    differences = [f"{key} {saved.configuration.get(key)!r} (this command: {fresh.configuration.get(key)!r})"
                   for key in RESUME_KEYS if saved.configuration.get(key) != fresh.configuration.get(key)]
    if differences:
        raise UsageError(f"--resume: {path.name} was measured with other settings: {'; '.join(differences)}; "
                         f"repeat its original options")
    saved.interrupted = False
    saved.finished_at = None
    saved.command_line = saved.command_line + ["# resumed:"] + fresh.command_line[1:]
    return saved, ResultPaths(path, path.with_suffix(".md"), results_dir / "latest.md", results_dir / "latest.json")


@dataclass(frozen=True)
class ResultPaths:
    json: Path
    markdown: Path
    latest_markdown: Path
    latest_json: Path

    @classmethod
    def for_run(cls, results_dir: Path, started_at: str, suffix: str = "") -> "ResultPaths":
        stamp = started_at.replace(":", "-").replace("+00-00", "Z") + suffix
        return cls(results_dir / f"{stamp}.json", results_dir / f"{stamp}.md", results_dir / "latest.md",
                   results_dir / "latest.json")


def save(result: RunResult, paths: ResultPaths) -> None:
    """Rewrite every results file; called after each attempt so that an interruption loses nothing."""
    summaries = summarize_run(result)
    data = json.dumps(result.to_dict(summaries), indent=1)
    markdown = render.render_markdown(result, summaries)
    write_atomically(paths.json, data)
    write_atomically(paths.markdown, markdown)
    write_atomically(paths.latest_json, data)
    write_atomically(paths.latest_markdown, markdown)


NOT_READY_LIMIT = 2  # consecutive not-ready attempts after which a server's remaining attempts are not tried


def measure_matrix(result: RunResult, settings: CellSettings, servers: list[Implementation],
                   clients: list[Implementation], repeats: int, paths: ResultPaths) -> None:
    """Round-robin over cells, one repeat at a time, so slow drift of the machine spreads over every cell.

    Attempts already in the result (a resumed run) are not measured again. A server that fails to become ready
    NOT_READY_LIMIT times in a row has its remaining attempts recorded as not attempted, with the reason.
    """
    by_name = {("server", s.name): s for s in servers} | {("client", c.name): c for c in clients}
    plan = [(repeat, cell) for repeat in range(1, repeats + 1) for cell in result.cells
            if not cell.skipped and not any(attempt.repeat == repeat for attempt in cell.attempts)]
    progress = Progress(len(plan), settings)
    not_ready_streak: dict[str, int] = {}
    given_up: dict[str, str] = {}
    previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for repeat, cell in plan:
            if cell.server in given_up:
                attempt = Attempt(repeat=repeat, status="not-ready", reason=given_up[cell.server],
                                  started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
            else:
                progress.before(cell, repeat, repeats)
                attempt = run_attempt(by_name[("server", cell.server)], by_name[("client", cell.client)],
                                      settings, repeat, PROJECT_ROOT)
                streak = not_ready_streak.get(cell.server, 0) + 1 if attempt.status == "not-ready" else 0
                not_ready_streak[cell.server] = streak
                if streak >= NOT_READY_LIMIT:
                    given_up[cell.server] = (f"not attempted: server {cell.server} failed to become ready "
                                             f"{streak} times in a row (last: {attempt.reason})")
            cell.attempts.append(attempt)
            cell.attempts.sort(key=lambda a: a.repeat)
            progress.after(cell, attempt)
            save(result, paths)
    except KeyboardInterrupt:
        result.interrupted = True
        print("\ninterrupted: saving what was measured", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
        progress.finish()
        result.finished_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        save(result, paths)


def _raise_interrupt(signal_number, frame):
    raise KeyboardInterrupt


class Progress:
    """Current cell, cells left and ETA on stderr: one rewritten line on a terminal, one line per attempt else."""

    def __init__(self, total: int, settings: CellSettings) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.estimate_s = settings.warmup_s + settings.duration_s + 2.0  # until real timings exist
        self.terminal = sys.stderr.isatty()

    def _eta(self) -> str:
        per_attempt = (time.monotonic() - self.started) / self.done if self.done else self.estimate_s
        seconds = int(per_attempt * (self.total - self.done))
        return f"{seconds // 60}m{seconds % 60:02d}s"

    def before(self, cell: Cell, repeat: int, repeats: int) -> None:
        if self.terminal:
            sys.stderr.write(f"\r\033[K[{self.done + 1}/{self.total}] {cell.server} server × {cell.client} client, "
                             f"repeat {repeat}/{repeats}; {self.total - self.done - 1} left, ETA {self._eta()}")
            sys.stderr.flush()

    def after(self, cell: Cell, attempt) -> None:
        self.done += 1
        outcome = (f"{attempt.roundtrips_per_s:,.0f} roundtrips/s" if attempt.ok
                   else f"{attempt.status}: {attempt.reason}")
        if not self.terminal:
            print(f"[{self.done}/{self.total}] {cell.server} server × {cell.client} client, repeat {attempt.repeat}: "
                  f"{outcome}; ETA {self._eta()}", file=sys.stderr, flush=True)
        elif not attempt.ok:
            sys.stderr.write(f"\r\033[K{cell.server} × {cell.client} repeat {attempt.repeat}: {outcome}\n")

    def finish(self) -> None:
        if self.terminal:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def draw_figures(result: RunResult, summaries, paths: "ResultPaths") -> list[Path]:
    """PNG figures next to the results; a plotting failure is reported, never fatal (the results are saved)."""
    try:
        from pingpong.harness import plots
        return plots.write_figures(result, summaries, paths.json.with_suffix(""))
    except Exception as exc:  # matplotlib missing or failing must not cost the run its exit code
        print(f"figures not drawn: {type(exc).__name__}: {exc}", file=sys.stderr)
        return []


def render_stdout(result: RunResult, summaries, output_format: str) -> str:
    if output_format == "json":
        return json.dumps(result.to_dict(summaries), indent=1)
    if output_format == "csv":
        return render.render_csv(result, summaries).rstrip("\n")
    return render.render_markdown(result, summaries).rstrip("\n")


def render_listing(implementations: list[Implementation], output_format: str) -> str:
    rows = []
    for implementation in implementations:
        availability = check_availability(implementation, PROJECT_ROOT)
        rows.append({"role": implementation.role, "name": implementation.name, "runtime": implementation.runtime,
                     "protocol": implementation.protocol, "available": availability.available,
                     "why_not": availability.reason, "loops": list(implementation.loops),
                     "compression": list(implementation.compression), "description": implementation.description})
    if output_format == "json":
        return json.dumps(rows, indent=1)
    lines = [f"{'role':<7} {'name':<12} {'runtime':<7} {'protocol':<10} available"]
    for row in rows:
        state = "yes" if row["available"] else f"no: {row['why_not']}"
        lines.append(f"{row['role']:<7} {row['name']:<12} {row['runtime']:<7} {row['protocol']:<10} {state}")
        if row["description"]:
            lines.append(f"{'':<39}{row['description']}")
    lines.append("Servers and clients pair only when they speak the same protocol: a websocket server with websocket "
                 "clients, a raw-tcp floor with raw-tcp clients; other pairs show as '—'.")
    return "\n".join(lines)
