"""The suite's temporary folders (pingpong-* in the system's temporary folder), each marked with the process that owns
it, so that what a killed process left (kill -9 of the orchestrator, of a cluster worker) is removed by the next one.

A folder made here holds OWNER_FILE: its owner's pid and start time (psutil's create_time, so a pid used again by
another process does not keep the folder alive). remove_orphans() deletes every pingpong-* folder whose owner is
gone; folders without the file (made before it, or by someone else) are left alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import psutil

PREFIX = "pingpong-"
OWNER_FILE = ".pingpong-owner"


def _start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
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
    (folder / OWNER_FILE).write_text(f"{os.getpid()} {_start_time(os.getpid())!r}\n")


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
    except (OSError, ValueError):
        return None
    started = _start_time(int(pid_text))
    return started is not None and repr(started) == started_text


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
