"""`compare --alternate A B --runs N -- RUN OPTIONS`: make both sides' runs here, A, B, A, B, ..., then compare them
as `compare A1 .. AN --against B1 .. BN` does (compare.run itself).

A side is a checkout of this suite (a folder holding run_bench.py: a git worktree or a clone), whose runs start in
it, or a package set (python:PKG==VER[,...] or node:PKG@VER[,...]), whose runs start in this checkout with
--python-packages or --node-packages (settings/package_envs.py). The runs alternate so that the machine's drift
over the hours hits both sides alike, and a change is judged against the run-to-run variance it must beat.

Each run is a child `python run_bench.py RUN OPTIONS --results-dir DIR/<side>-<k>` in a session of its own: its
stderr comes through line by line, prefixed by its name; on Ctrl-C (or SIGTERM) its group gets SIGINT, which it
handles by saving what it measured, then SIGTERM and SIGKILL if it outlives the grace. A run that fails stops the
alternation; DIR keeps what was made, with alternation.json: the sides, the order and each run's start.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from pingpong.harness.commands import compare
from pingpong.harness.commands.parser import build_parser
from pingpong.harness.results.files import DEFAULT_RESULTS_DIR
from pingpong.harness.settings.catalog import PROJECT_ROOT
from pingpong.harness.settings.package_envs import parse_node_specs, parse_python_specs
from pingpong.harness.settings.usage import UsageError
from pingpong.harness.system import guardian, processes, work_dirs
from pingpong.harness.system.stop_signals import stop_requested

ALTERNATION_FORMAT_VERSION = 1  # of alternation.json
EXIT_RUN_FAILED = 2  # as for bad input: nothing was compared
RUN_EXIT_CODES_KEPT = (0, 1)  # a run's own codes that go on: all cells measured, or a cell failed (it is data)
SAVE_GRACE_S = 60.0  # after SIGINT, for a run to stop its cell's processes and save what it measured
TERM_GRACE_S = 10.0  # after SIGTERM, before its group gets SIGKILL
PACKAGE_OPTIONS = {"python": ("--python-packages", parse_python_specs),
                   "node": ("--node-packages", parse_node_specs)}
SIDE_FORMS = "a checkout of this suite (a folder with run_bench.py) or a package set python:PKG==VER[,...] or " \
             "node:PKG@VER[,...]"


@dataclass(frozen=True)
class SideSource:
    """Where one side's runs come from."""

    label: str  # A or B
    given: str  # as on the command line
    directory: str  # the folder its runs start in: the checkout, or this one for a package set
    package_options: tuple[str, ...]  # added to the run options: ("--python-packages", "aiohttp==3.9.1 ...") or ()

    def describe(self) -> str:
        if self.package_options:
            option, specs = self.package_options
            return f"{self.given} (this checkout with {option} \"{specs}\")"
        return f"{self.given} (a checkout)"


@dataclass(frozen=True)
class AlternateRun:
    """One run of the alternation, as alternation.json records it."""

    name: str  # A-1, B-1, A-2, ...
    side: str
    number: int
    command: list[str]  # argv, started in the side's directory
    started_at: str  # UTC, ISO 8601 to the second
    ended_at: str
    exit_code: int
    results: str | None  # the run's results file, None when it left none


def split_run_options(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """`compare ... -- RUN OPTIONS`: compare's own arguments and the run options (None without --); pure.
    Only for compare: measure takes its program after --."""
    if argv[:1] != ["compare"] or "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]


def side_source(label: str, given: str) -> SideSource:
    """A side as given: a package set (python:... or node:...) or a checkout's folder; a one-line UsageError."""
    kind, colon, rest = given.partition(":")
    if colon and kind in PACKAGE_OPTIONS:
        option, parse = PACKAGE_OPTIONS[kind]
        specs = [spec.strip() for spec in re.split(r",(?![^\[]*\])", rest)]  # not the commas of pkg[extra1,extra2]
        try:
            parse(" ".join(specs))
        except UsageError as exc:
            raise UsageError(f"--alternate {label} = {given}: {exc}") from None
        return SideSource(label, given, str(PROJECT_ROOT), (option, " ".join(specs)))
    folder = Path(given).expanduser()
    if not folder.is_dir():
        raise UsageError(f"--alternate {label} = {given}: no such folder; a side is {SIDE_FORMS}")
    if not (folder / "run_bench.py").is_file():
        raise UsageError(f"--alternate {label} = {given}: no run_bench.py in it; a side is {SIDE_FORMS}")
    return SideSource(label, given, str(folder.resolve()), ())


def check_run_options(run_options: list[str], sides: list[SideSource]) -> None:
    """The run options, read as `run` reads them here; a one-line UsageError for those the alternation sets itself
    or that make no run. Options this checkout does not know go through: the other checkout may know them."""
    if run_options[:1] and not run_options[0].startswith("-") and run_options[0] != "run":
        raise UsageError(f"the options after -- are run's options; {run_options[0]!r} is not one")
    if any(word in ("-h", "--help") for word in run_options):
        raise UsageError("the options after -- are run's options, for its runs; see 'run_bench.py run --help'")
    words = run_options[1:] if run_options[:1] == ["run"] else run_options
    try:
        parsed, _ = build_parser("run").parse_known_args(["run", *words])
    except UsageError as exc:
        raise UsageError(f"the run options after --: {exc}") from None
    if parsed.results_dir is not DEFAULT_RESULTS_DIR:  # argparse keeps a non-string default as the same object
        raise UsageError("the run options after -- may not set --results-dir: each run's folder is DIR/<side>-<k> "
                         "(--keep DIR)")
    if parsed.resume is not None:
        raise UsageError("the run options after -- may not --resume a run: compare --alternate makes new runs")
    if parsed.list:
        raise UsageError("the run options after -- may not --list: compare --alternate measures runs")
    for side in sides:
        if side.package_options:
            option = side.package_options[0]
            if getattr(parsed, option[2:].replace("-", "_")):
                raise UsageError(f"{option} in the run options after -- and side {side.label} = {side.given}: give "
                                 "the packages in one place")


def order(runs_a_side: int) -> list[tuple[str, int]]:
    """A, B, A, B, ...: (side, run number) in the order they run; pure."""
    return [(side, number) for number in range(1, runs_a_side + 1) for side in ("A", "B")]


def run_command(side: SideSource, run_options: list[str], results_dir: Path) -> list[str]:
    return [sys.executable, "run_bench.py", *run_options, *side.package_options, "--results-dir", str(results_dir)]


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run_one(name: str, side: SideSource, argv: list[str], results_dir: Path) -> AlternateRun:
    """One run, in its own session, its stderr shown line by line as '[A-1] ...'; stopped and reaped whatever
    happens (Ctrl-C: SIGINT to its group, which saves; then SIGTERM, then SIGKILL)."""
    started_at = now()
    print(f"compare --alternate: {name} started {started_at} in {side.directory}: {' '.join(argv[1:])}",
          file=sys.stderr, flush=True)

    def default_sigint_in_child() -> None:  # started as a background job (SIGINT ignored), a run would ignore ours
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    preexec = default_sigint_in_child if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else None
    popen = subprocess.Popen(argv, cwd=side.directory, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec)
    relay = threading.Thread(target=relay_lines, args=(popen.stderr, f"[{name}] "), daemon=True)
    try:
        guardian.started(popen.pid)  # its own session: the group's id is its PID
        relay.start()
        if stop_requested():  # a Ctrl-C as it started, its KeyboardInterrupt dropped (see stop_signals)
            raise KeyboardInterrupt
        exit_code = popen.wait()
    finally:
        stop_run(popen)
        if relay.ident is not None:  # started
            relay.join(5)
    return AlternateRun(name=name, side=side.label, number=int(name.split("-")[1]), command=argv,
                        started_at=started_at, ended_at=now(), exit_code=exit_code, results=results_file(results_dir))


def relay_lines(stream, prefix: str) -> None:
    """A run's stderr, line by line, prefixed, to this process's stderr (until the run closes it)."""
    with stream:
        for line in iter(stream.readline, b""):
            sys.stderr.write(prefix + line.decode(errors="replace").rstrip("\r\n") + "\n")
            sys.stderr.flush()


def stop_run(popen: subprocess.Popen) -> None:
    """Stop a run still going (interrupted): SIGINT to its group, as Ctrl-C would (it stops its cell's processes and
    saves), then SIGTERM, then SIGKILL; and reap it. Only the run's own group is signalled, never a name."""
    with processes.interrupts_deferred():  # a second Ctrl-C must not abandon the run half stopped
        for number, grace_s in ((signal.SIGINT, SAVE_GRACE_S), (signal.SIGTERM, TERM_GRACE_S)):
            if popen.poll() is not None:
                break
            try:
                os.killpg(popen.pid, number)
            except ProcessLookupError:
                break
            try:
                processes.wait(popen, grace_s)
            except subprocess.TimeoutExpired:
                continue
        processes.kill_group(popen.pid)  # whatever of its group is left
        popen.wait()
        guardian.reaped(popen.pid)


def results_file(results_dir: Path) -> str | None:
    """The run's own results file in its folder (not latest.json, nor a sweep's index); None if it left none."""
    found = sorted(path for path in results_dir.glob("*.json")
                   if path.name != "latest.json" and not path.name.endswith("-sweep.json"))
    return str(found[0]) if len(found) == 1 else None


def why_it_stops(done: AlternateRun, results_dir: Path) -> str | None:
    """Why a finished run stops the alternation, or None: it failed, or it left no one results file to compare."""
    if done.exit_code not in RUN_EXIT_CODES_KEPT:
        return f"exited with code {done.exit_code}"
    if done.results is None:
        several = len([path for path in results_dir.glob("*.json") if path.name != "latest.json"]) > 1
        return ("saved several matrices (a list of settings): compare --alternate compares one matrix a run"
                if several else "left no results file")
    return None


def write_record(folder: Path, sides: list[SideSource], run_options: list[str], runs: list[AlternateRun],
                 interrupted: str | None = None) -> None:
    """alternation.json, rewritten after every run, so that a later failure loses nothing; interrupted names the
    run that Ctrl-C stopped (its folder holds what it saved)."""
    record = {"format_version": ALTERNATION_FORMAT_VERSION, "sides": [asdict(side) for side in sides],
              "run_options": run_options, "order": [run.name for run in runs], "runs": [asdict(run) for run in runs],
              "interrupted": interrupted}
    path = folder / "alternation.json"
    path.with_suffix(".tmp").write_text(json.dumps(record, indent=1))
    path.with_suffix(".tmp").replace(path)


def render_alternation(sides: list[SideSource], run_options: list[str], runs: list[AlternateRun],
                       kept: Path | None) -> str:
    """The runs behind the comparison as Markdown: the sides, the order with each start, where the files are; pure."""
    lines = ["## The runs, alternated", "",
             "; ".join(f"{side.label} = {side.describe()}" for side in sides) + ".",
             f"Run options: {' '.join(run_options) or '(none: the default run)'}.",
             "Order and start times (UTC): " + ", ".join(f"{run.name} {run.started_at}" for run in runs) + "."]
    failed_cells = [run.name for run in runs if run.exit_code == 1]
    if failed_cells:
        lines.append(f"Runs with a failed cell (exit code 1; the cell is not comparable): {', '.join(failed_cells)}.")
    lines.append(f"Files: {kept} (alternation.json records the order)." if kept else
                 "Files: removed with their temporary folder (--keep DIR keeps them).")
    return "\n".join(lines) + "\n"


def asked(options: argparse.Namespace, run_options: list[str] | None) -> bool:
    """Whether compare was asked to make its runs: --alternate, or an option that goes only with it."""
    return bool(options.alternate) or run_options is not None or options.alternate_runs is not None \
        or options.keep is not None


def check_options(options: argparse.Namespace, run_options: list[str] | None) -> list[SideSource]:
    """Everything that can be refused before the first run is; the two sides."""
    if not options.alternate:
        given = [name for name, value in (("run options after --", run_options is not None),
                                          ("--runs", options.alternate_runs is not None),
                                          ("--keep", options.keep is not None)) if value]
        raise UsageError(f"{given[0]} go{'es' if given[0].startswith('--') else ''} with --alternate A B")
    if options.runs or options.against:
        raise UsageError("--alternate makes its own runs: no results files, no --against")
    if options.alternate_runs is None or options.alternate_runs < 2:
        raise UsageError("--alternate needs --runs N, at least 2 runs a side (the interval across runs needs 2)"
                         if options.alternate_runs is None else
                         f"--runs {options.alternate_runs}: at least 2 runs a side (the interval across runs needs 2)")
    compare.check_fail_above(options.fail_above)
    sides = [side_source(label, given) for label, given in zip("AB", options.alternate)]
    check_run_options(run_options or [], sides)
    if options.keep is not None and options.keep.exists() and (not options.keep.is_dir()
                                                                or any(options.keep.iterdir())):
        raise UsageError(f"--keep {options.keep}: not a new or empty folder")
    return sides


def run(options: argparse.Namespace, run_options: list[str] | None) -> int:
    """The two sides' runs alternated, then compare.run on their files; exits with the gate's code."""
    sides = check_options(options, run_options)
    run_options = run_options or []
    work_dirs.remove_orphans()  # the folders a killed run (kill -9) could not remove
    folder = options.keep.resolve() if options.keep else work_dirs.make("pingpong-alternate-")
    folder.mkdir(parents=True, exist_ok=True)
    by_label = {side.label: side for side in sides}
    runs: list[AlternateRun] = []
    name = None
    try:
        for label, number in order(options.alternate_runs):
            name = f"{label}-{number}"
            results_dir = folder / name
            done = run_one(name, by_label[label], run_command(by_label[label], run_options, results_dir),
                           results_dir)
            runs.append(done)
            write_record(folder, sides, run_options, runs)
            why = why_it_stops(done, results_dir)
            if why:
                work_dirs.disown(folder)  # the user's now: no later command removes it
                print(f"run_bench.py: error: compare --alternate: run {name} ({by_label[label].given}) {why}; "
                      f"stopped, the runs so far are in {folder}", file=sys.stderr)
                return EXIT_RUN_FAILED
    except KeyboardInterrupt:
        write_record(folder, sides, run_options, runs, interrupted=name)
        work_dirs.disown(folder)
        print(f"\ncompare --alternate: stopped during {name}; the runs so far are in {folder}", file=sys.stderr)
        raise
    files = {label: [Path(run.results) for run in runs if run.side == label] for label in "AB"}
    try:
        code = compare.run(argparse.Namespace(runs=files["A"], against=files["B"], format=options.format,
                                              fail_above=options.fail_above))
    except UsageError as exc:
        work_dirs.disown(folder)
        raise UsageError(f"{exc}; the runs are in {folder}") from None
    if options.format == "md":
        print("\n" + render_alternation(sides, run_options, runs, folder if options.keep else None).rstrip("\n"))
    if not options.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return code
