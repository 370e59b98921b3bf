"""Compiled programs built on their first use, not by the set-up.

A manifest entry with a `build` command (the Go, Rust and C++ WebSocket programs: `sh native/build.sh websocket go`)
has its "file:" requirements built when a run first names it: before anything is measured, when one of those files
is missing and no earlier build wrote why it could not be (FILE.unavailable, which `--list` and a skipped cell then
give as the reason). No default run needs them, and they are most of a first set-up's time (about 3 minutes of 2
CPUs on a machine that never built them; seconds from the cache outside the checkout that native/build_common.sh
keeps), so `npm ci` builds only what every run needs.

Distinct commands run at once (their outputs shown whole, in order, on stderr: stdout is the run's JSON), under a
lock, so two runs or test workers never build one program twice. The builds are processes of this run like any
other (pingpong.harness.system.processes): a stopped or killed run leaves none behind.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from pingpong.harness.settings.manifest import UNAVAILABLE_SUFFIX, Implementation
from pingpong.harness.settings.package_envs import FileLock
from pingpong.harness.system import processes, work_dirs

PACKAGE_DATABASE = Path("/var/lib/dpkg/status")  # Debian's: written whenever apt-get installs or removes a package
BUILD_TIMEOUT_S = 1800.0  # a first Rust build on a slow 2-CPU machine takes minutes, not half an hour
LOCK_NAME = ".first-use-build.lock"  # in build/


def required_files(implementation: Implementation) -> list[str]:
    """Its "file:" requirements, relative to the project root (pure)."""
    return [name for kind, _, name in (requirement.partition(":") for requirement in implementation.requires)
            if kind == "file"]


def stale_note(note: Path, packages: Path = PACKAGE_DATABASE) -> bool:
    """Whether a note saying why a build failed predates the last change to the system's packages: most such notes
    name a missing library or compiler (apt-get install ...), so a build is tried once more after an install."""
    try:
        return note.stat().st_mtime < packages.stat().st_mtime
    except OSError:
        return False


def missing_files(implementation: Implementation, project_root: Path,
                  packages: Path = PACKAGE_DATABASE) -> list[str]:
    """The entry's "file:" requirements that are missing with no note saying why they could not be built, or a note
    older than the system's last package change (stale_note): what its build command would make."""
    def buildable(name: str) -> bool:
        note = project_root / (name + UNAVAILABLE_SUFFIX)
        return not note.exists() or stale_note(note, packages)

    return [name for name in required_files(implementation)
            if not (project_root / name).exists() and buildable(name)]


def builds_needed(implementations: list[Implementation], project_root: Path,
                  packages: Path = PACKAGE_DATABASE) -> list[tuple[str, ...]]:
    """The distinct build commands of those entries that have one and miss a file it makes, in their order."""
    return list(dict.fromkeys(i.build for i in implementations
                              if i.build and missing_files(i, project_root, packages)))


def log(message: str) -> None:
    print(f"build: {message}", file=sys.stderr, flush=True)


def build_on_first_use(implementations: list[Implementation], project_root: Path,
                       timeout_s: float = BUILD_TIMEOUT_S) -> list[tuple[str, ...]]:
    """Runs, at once, the build commands these entries need (builds_needed), each from the project root; returns the
    commands it ran. A build that fails is not an error here: its script writes FILE.unavailable, and the cells that
    need it are skipped with that reason (an entry whose command wrote no note reads as not built). One that runs
    past timeout_s is stopped, said on stderr, and its entries read as not built, as if it had failed."""
    if not builds_needed(implementations, project_root):
        return []
    (project_root / "build").mkdir(exist_ok=True)
    with FileLock(project_root / "build" / LOCK_NAME):
        commands = builds_needed(implementations, project_root)  # again: another run may have built them meanwhile
        if not commands:
            return []
        names = ", ".join(dict.fromkeys(i.name for i in implementations if i.build in commands))
        log(f"{names}: not built yet, built now, on first use (kept for later runs and clones): "
            f"{'; '.join(' '.join(command) for command in commands)}")
        started = time.monotonic()
        with work_dirs.temporary("pingpong-build-") as folder:
            running = [processes.start(f"build-{index}", list(command), project_root, Path(folder))
                       for index, command in enumerate(commands)]
            deadline = started + timeout_s
            try:
                for process in running:
                    processes.wait(process.popen, max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"stopped after {timeout_s:.0f} s, unfinished: the runs that need it will try again")
            finally:
                for process in running:
                    processes.stop(process)
            for process in running:
                sys.stderr.write(process.stdout_text())
                sys.stderr.write(process.stderr_path.read_text(errors="replace"))
        still = [i.name for i in implementations if i.build in commands
                 and not all((project_root / name).exists() for name in required_files(i))]
        log(f"done in {time.monotonic() - started:.0f} s" + (f"; still not built: {', '.join(still)}" if still else ""))
    return commands
