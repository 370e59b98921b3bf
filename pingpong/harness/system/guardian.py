"""The guardian: a small process that ends the run's process groups if the orchestrator dies without doing so.

Every server and client runs in a process group of its own (in the orchestrator's session), so that its whole
tree can be stopped as one; but then nothing stops it when the orchestrator is killed with SIGKILL, which no handler
sees. The guardian closes that gap. The orchestrator starts it once, in a session of its own, and tells it on a pipe each
process group it starts ("+PGID") and each one it has stopped and reaped ("-PGID"). Only the orchestrator holds
the pipe's write end (non-inheritable, so no child keeps it open), so the pipe reaches end of file exactly when
the orchestrator is gone, however it ended. The guardian then sends SIGKILL to every group still listed, and
exits. Groups are signalled only while listed as started and not yet reaped by the orchestrator: never by name,
never anyone else's.

Usage (by processes.py, not by hand): python -m pingpong.harness.system.guardian READ_FD
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

_lock = threading.Lock()
_write_fd: int | None = None
_process: subprocess.Popen | None = None


def parse_line(line: str, groups: set[int]) -> None:
    """Apply one "+PGID" or "-PGID" line to the listed groups (anything else is ignored)."""
    line = line.strip()
    if len(line) < 2 or line[0] not in "+-" or not line[1:].isdigit():
        return
    pgid = int(line[1:])
    if pgid <= 1:
        return
    if line[0] == "+":
        groups.add(pgid)
    else:
        groups.discard(pgid)


def end_groups(groups: set[int]) -> list[int]:
    """SIGKILL every listed group that still exists; the groups signalled."""
    ended = []
    for pgid in sorted(groups):
        try:
            os.killpg(pgid, signal.SIGKILL)
            ended.append(pgid)
        except (ProcessLookupError, PermissionError):
            continue
    return ended


def watch(read_fd: int) -> list[int]:
    """Read the orchestrator's lines until end of file, then end what is still listed."""
    groups: set[int] = set()
    with os.fdopen(read_fd, "r") as stream:
        for line in stream:
            parse_line(line, groups)
    return end_groups(groups)


def _tell(line: str) -> None:
    global _write_fd, _process
    with _lock:
        if _write_fd is None:
            if line.startswith("-"):
                return
            read_fd, write_fd = os.pipe()  # both non-inheritable: only the guardian gets the read end, by pass_fds
            try:
                # from the checkout, so `-m` finds the package whatever folder run_bench.py was started from
                _process = subprocess.Popen([sys.executable, "-m", "pingpong.harness.system.guardian", str(read_fd)],
                                            pass_fds=(read_fd,), start_new_session=True, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, cwd=Path(__file__).resolve().parents[3])
            except OSError:
                os.close(write_fd)
                return
            finally:
                os.close(read_fd)
            _write_fd = write_fd
            atexit.register(stop_guardian)
        try:
            os.write(_write_fd, f"{line}\n".encode())
        except OSError:  # the guardian is gone: the orchestrator still stops its children itself
            pass


def started(pgid: int) -> None:
    """A process group the orchestrator started (the guardian itself starts with the first one)."""
    _tell(f"+{pgid}")


def reaped(pgid: int) -> None:
    """A group the orchestrator has stopped and reaped: no longer the guardian's to end."""
    _tell(f"-{pgid}")


def stop_guardian(timeout_s: float = 5.0) -> None:
    """Close the pipe and wait for the guardian to end (at exit: so it is gone before the orchestrator is)."""
    global _write_fd, _process
    with _lock:
        if _write_fd is not None:
            os.close(_write_fd)
            _write_fd = None
        if _process is not None:
            try:
                _process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
            _process = None


def guardian_pid() -> int | None:
    """The guardian's PID once started (for tests)."""
    return _process.pid if _process is not None else None


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # it ends with the orchestrator's pipe, not with a Ctrl-C
    ended = watch(int(sys.argv[1]))
    if ended:
        print(f"guardian: the orchestrator is gone; ended process groups {ended}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
