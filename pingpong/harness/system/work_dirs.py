"""The suite's temporary folders (pingpong-* in the system's temporary folder), each marked with the process that owns
it, so that what a killed process left (kill -9 of the orchestrator, of a cluster worker) is removed by the next one.

A folder made here holds OWNER_FILE: its owner's pid and start time (the kernel's, in clock ticks since boot: field
22 of /proc/PID/stat, which a step of the wall clock does not move), so a pid used again by another process does not
keep the folder alive. remove_orphans() deletes every pingpong-* folder whose owner is gone; folders without the
file (made before it, by someone else, or handed over to the user with disown) are left alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

PREFIX = "pingpong-"
OWNER_FILE = ".pingpong-owner"


def _start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks since boot; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            return int(file.read().rsplit(b")", 1)[1].split()[19])  # field 22; the name may hold spaces
    except (OSError, ValueError, IndexError):
        return None


def make(prefix: str, parent: Path | None = None) -> Path:
    """A new folder named prefix + random in parent (default: the system's temporary folder), owned by this process."""
    if not prefix.startswith(PREFIX):
        raise ValueError(f"a work folder's prefix starts with {PREFIX!r}, got {prefix!r}")
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    mark_owned(folder)
    return folder


def mark_owned(folder: Path) -> None:
    """Write (or rewrite) folder's owner file: this process."""
    (folder / OWNER_FILE).write_text(f"{os.getpid()} {_start_ticks(os.getpid())}\n")


def disown(folder: Path) -> None:
    """Hand folder over to the user: without its owner file no later command removes it."""
    (folder / OWNER_FILE).unlink(missing_ok=True)


@contextlib.contextmanager
def temporary(prefix: str) -> Iterator[str]:
    """Like tempfile.TemporaryDirectory(prefix=...): the folder's path, removed on the way out (errors ignored)."""
    folder = make(prefix)
    try:
        yield str(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def owner_alive(folder: Path) -> bool | None:
    """Whether the process that made folder still runs; None when the folder has no owner file."""
    try:
        pid_text, started_text = (folder / OWNER_FILE).read_text().split()
        pid, started = int(pid_text), int(started_text)
    except (OSError, ValueError):
        return None  # no owner file, or one this module did not write: not ours to judge
    return pid > 0 and _start_ticks(pid) == started


def remove_orphans(parent: Path | None = None) -> list[Path]:
    """Delete the pingpong-* folders in parent (default: the system's temporary folder) whose owner has ended;
    the folders removed."""
    root = Path(parent or tempfile.gettempdir())
    removed = []
    try:
        candidates = [path for path in root.iterdir() if path.name.startswith(PREFIX) and path.is_dir()]
    except OSError:
        return removed
    for folder in candidates:
        if owner_alive(folder) is False:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed
