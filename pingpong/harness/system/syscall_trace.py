"""Syscall counts of a running process tree over the measured window: strace -c -f attached, then detached."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from pingpong.harness.system import listeners

STRACE_MISSING = ("strace is not installed, so syscalls were not counted; install it (Debian: apt-get install "
                  "strace) and run diagnose again")
ATTACH_TIMEOUT_S = 5.0


def strace_path() -> str | None:
    return shutil.which("strace")


class SyscallTracer:
    """strace -c -f attached to every thread of a process tree; stop() detaches and returns the counts."""

    def __init__(self, root_pid: int, output: Path) -> None:
        self.output = output
        self.error: str | None = None
        self.process: subprocess.Popen | None = None
        executable = strace_path()
        if executable is None:
            self.error = STRACE_MISSING
            return
        members = listeners.process_tree(root_pid)
        if not members:
            self.error = f"process {root_pid} is gone; nothing to trace"
            return
        argv = [executable, "-c", "-f", "-o", str(output)]
        for pid in members:  # with -f, "-p PID" attaches every thread of PID ("attached with N threads")
            argv += ["-p", str(pid)]
        self.attach_log = output.with_suffix(".log")
        self._log = open(self.attach_log, "w")
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self._log, start_new_session=True)
        self._wait_attached(len(members))

    def _wait_attached(self, expected: int) -> None:
        """strace says 'Process N attached' per process on stderr; wait for them so the window is traced whole."""
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            if self.attach_log.read_text().count(" attached") >= expected:
                return
            time.sleep(0.01)  # polling strace's own log, not the measured pair

    def stop(self) -> dict[str, int] | None:
        """Detach and return {syscall: calls}, or None with self.error set."""
        if self.process is None:
            return None
        try:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGINT)
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)
        finally:
            self._log.close()
        try:
            counts = parse_strace_summary(self.output.read_text())
        except OSError as exc:
            self.error = f"strace wrote no summary: {exc.strerror}"
            return None
        if not counts:
            tail = self.attach_log.read_text().strip().splitlines()[-1:] or ["(nothing)"]
            self.error = f"strace counted no syscalls (it said: {tail[0]})"
            return None
        return counts


def parse_strace_summary(text: str) -> dict[str, int]:
    """The calls column of `strace -c` output, per syscall name (the 'total' line left out)."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 5 or not fields[0].replace(".", "", 1).isdigit():
            continue
        name = fields[-1]
        if name == "total":
            continue
        # % time, seconds, usecs/call, calls, [errors], syscall
        try:
            counts[name] = int(fields[3])
        except ValueError:
            continue
    return counts
