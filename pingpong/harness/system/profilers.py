"""CPU profilers attached from outside to one side of a pair for the measured window (diagnose --profile).

- Python: py-spy (PyPI, pinned in requirements.txt) `record --native --subprocesses --format raw`, attached to the
  side's root process at the window's start and stopped with SIGINT at its end. --native unwinds C frames too, so
  zlib, the C parsers and uvloop show under the Python function that called them. py-spy stops the process for
  each sample (its default, needed by --native): a profiled attempt is slower than a headline one, which is why
  profiles come from attempts of their own.
- Node.js: V8's own CPU profiler, through the inspector. The process is started with NODE_OPTIONS
  --inspect-port=0 (nothing listens until asked); SIGUSR1 opens its inspector on a free loopback port, found among
  the process's listening sockets; the profiler is started over the inspector's WebSocket when the window opens,
  and stopped when it closes, which returns the `.cpuprofile`. The inspector stays on the loopback address.
- Bun: nothing attaches to a running Bun, so a Bun side of a profiled attempt is started with its own profiler on
  (`bun --cpu-prof`, written when it exits); the window's edges, on the wall clock that Bun's timestamps use, keep
  the samples of the window only.
- The compiled programs: no profiler attaches here; the capture says why.

A capture is where the profile was written, its format, the sampling interval, and how long the profiler sampled
(from the moment it said it was sampling to the moment it stopped): the roundtrips in it are the attempt's rate
times that time (analysis/profiles.py turns samples into µs per roundtrip).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pingpong.harness.system import guardian, listeners

PY_SPY_RATE_HZ = 250  # samples per second per process: enough over a 2 s window, a bounded slowdown
V8_SAMPLING_INTERVAL_US = 250  # the same rate for V8 (its default, 1000 µs, would see few samples per window)
ATTACH_TIMEOUT_S = 10.0
POLL_S = 0.01  # polling the profiler's own output, not the measured pair
NODE_PROFILING_OPTIONS = "--inspect-port=127.0.0.1:0"  # in NODE_OPTIONS of a profiled Node.js side
PROFILED_RUNTIMES = ("python", "node")


def py_spy_path() -> str | None:
    """py-spy installed beside this interpreter (requirements.txt), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def missing_profiler(runtime: str) -> str | None:
    """Why a side of this runtime cannot be profiled here, in one line; None when it can."""
    if runtime == "python":
        return None if py_spy_path() else "py-spy is not installed (pip install -r requirements.txt)"
    if runtime in ("node", "bun"):
        return None
    return f"no profiler attaches to a {runtime} program here (perf would: not used by this suite)"


@dataclass(frozen=True)
class Capture:
    """One side's profile of one window, or why there is none."""

    side: str
    runtime: str
    profiler: str | None = None
    format: str | None = None  # "collapsed" (py-spy raw) or "cpuprofile" (V8)
    path: str | None = None
    interval_s: float | None = None
    sampled_s: float | None = None  # how long the profiler sampled
    error: str | None = None
    window_wall_us: list[float] | None = None  # a whole-life profile (Bun): the window's edges, wall-clock µs

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PySpyProfiler:
    """py-spy record attached to a process tree; stop() ends it (SIGINT) and it writes its collapsed stacks."""

    def __init__(self, side: str, pid: int, output: Path) -> None:
        self.side, self.output = side, output
        self.error: str | None = None
        self.started: float | None = None
        self.log = output.with_suffix(".log")
        argv = [py_spy_path() or "py-spy", "record", "--pid", str(pid), "--rate", str(PY_SPY_RATE_HZ), "--native",
                "--subprocesses", "--format", "raw", "--output", str(output)]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        guardian.started(self.process.pid)  # ended with the run's processes if the orchestrator is killed
        self._wait_sampling()

    def _wait_sampling(self) -> None:
        """py-spy prints 'Sampling process ...' once it samples; the sampled time counts from there."""
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while time.monotonic() < deadline:
            said = self.log.read_text(errors="replace")
            if "Sampling process" in said:
                self.started = time.monotonic()
                return
            if self.process.poll() is not None:
                self.error = f"py-spy exited with code {self.process.returncode}: {_last_line(said)}"
                return
            time.sleep(POLL_S)
        self.error = f"py-spy did not start sampling within {ATTACH_TIMEOUT_S:g} s"

    def stop(self) -> Capture:
        stopped = time.monotonic()
        _interrupt(self.process)
        if self.error is None and (not self.output.exists() or not self.output.stat().st_size):
            self.error = f"py-spy wrote no samples: {_last_line(self.log.read_text(errors='replace'))}"
        if self.error:
            return Capture(self.side, "python", error=self.error)
        return Capture(self.side, "python", profiler=f"py-spy {py_spy_version()}", format="collapsed",
                       path=str(self.output), interval_s=1 / PY_SPY_RATE_HZ, sampled_s=stopped - self.started)


class V8InspectorProfiler:
    """V8's CPU profiler of a Node.js process started with NODE_PROFILING_OPTIONS, over its inspector."""

    def __init__(self, side: str, pid: int, output: Path, other_ports: set[int]) -> None:
        self.side, self.output = side, output
        self.error: str | None = None
        self.started: float | None = None
        self.connection = None
        self.next_id = 0
        try:
            url = self._open_inspector(pid, other_ports)
            from websockets.sync.client import connect  # the orchestrator's own websockets, for the inspector
            self.connection = connect(url, max_size=None, open_timeout=ATTACH_TIMEOUT_S)
            self._call("Profiler.enable")
            self._call("Profiler.setSamplingInterval", {"interval": V8_SAMPLING_INTERVAL_US})
            self._call("Profiler.start")
            self.started = time.monotonic()
        except (OSError, ValueError, RuntimeError, TimeoutError) as exc:
            self.error = f"the V8 inspector of process {pid} could not be used: {exc}"
            self._close()

    def _open_inspector(self, pid: int, other_ports: set[int]) -> str:
        """SIGUSR1 opens the inspector on a free port; its WebSocket URL, from the process's new listening port."""
        before = {port for _, port in listeners.listeners_of_tree(pid)} | other_ports
        os.kill(pid, signal.SIGUSR1)
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while time.monotonic() < deadline:
            opened = [port for host, port in listeners.listeners_of_tree(pid) if port not in before]
            if opened:
                with urllib.request.urlopen(f"http://127.0.0.1:{opened[0]}/json/list", timeout=2) as answer:
                    targets = json.loads(answer.read())
                if targets and targets[0].get("webSocketDebuggerUrl"):
                    return targets[0]["webSocketDebuggerUrl"]
                raise RuntimeError("its inspector lists no target")
            time.sleep(POLL_S)
        raise RuntimeError(f"no inspector port opened within {ATTACH_TIMEOUT_S:g} s of SIGUSR1 (was it started with "
                           f"NODE_OPTIONS={NODE_PROFILING_OPTIONS}?)")

    def _call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        self.connection.send(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while True:
            message = json.loads(self.connection.recv(timeout=max(0.0, deadline - time.monotonic())))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error'].get('message')}")
                return message.get("result", {})

    def _close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def stop(self) -> Capture:
        stopped = time.monotonic()
        if self.error is None:
            try:
                profile = self._call("Profiler.stop")["profile"]
                self.output.write_text(json.dumps(profile))
            except (OSError, ValueError, RuntimeError, TimeoutError, KeyError) as exc:
                self.error = f"V8's profiler did not return its profile: {exc}"
        self._close()
        if self.error:
            return Capture(self.side, "node", error=self.error)
        return Capture(self.side, "node", profiler="v8 cpu profiler (inspector)", format="cpuprofile",
                       path=str(self.output), interval_s=V8_SAMPLING_INTERVAL_US / 1e6,
                       sampled_s=stopped - self.started)


def bun_profile_folder(profile_dir: Path, side: str) -> Path:
    """Where a Bun side of a profiled attempt writes its .cpuprofile when it exits."""
    return profile_dir / f"bun-{side}"


def bun_profiling_arguments(folder: Path) -> list[str]:
    """Bun's own profiler (`bun --cpu-prof`): on from the start, written on exit, at V8_SAMPLING_INTERVAL_US."""
    return ["--cpu-prof", f"--cpu-prof-dir={folder}", f"--cpu-prof-interval={V8_SAMPLING_INTERVAL_US}"]


class BunWindow:
    """A Bun side profiles its whole life (bun --cpu-prof: nothing attaches to a running Bun); this marks the
    window's edges on the wall clock, in µs like the profile's timestamps, to keep the samples inside it."""

    def __init__(self, side: str, folder: Path) -> None:
        self.side, self.folder = side, folder
        self.started_us = time.time_ns() / 1000

    def stop(self) -> Capture:
        ended_us = time.time_ns() / 1000
        return Capture(self.side, "bun", profiler="bun --cpu-prof (JavaScriptCore), kept to the window",
                       format="cpuprofile-whole-life", path=str(self.folder), interval_s=V8_SAMPLING_INTERVAL_US / 1e6,
                       sampled_s=(ended_us - self.started_us) / 1e6, window_wall_us=[self.started_us, ended_us])


def start_profiler(side: str, runtime: str, pid: int, output_stem: Path, other_ports: set[int]):
    """A started profiler of this side (stop() gives its Capture), or the Capture saying why there is none."""
    missing = missing_profiler(runtime)
    if missing:
        return Capture(side, runtime, error=missing)
    if runtime == "bun":
        return BunWindow(side, bun_profile_folder(output_stem.parent, side))
    if runtime == "python":
        return PySpyProfiler(side, pid, output_stem.with_suffix(".collapsed.txt"))
    return V8InspectorProfiler(side, pid, output_stem.with_suffix(".cpuprofile"), other_ports)


def stop_profiler(profiler) -> Capture:
    return profiler if isinstance(profiler, Capture) else profiler.stop()


@functools.lru_cache(maxsize=1)
def py_spy_version() -> str:
    try:
        said = subprocess.run([py_spy_path() or "py-spy", "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    match = re.search(r"(\d+\.\d+\.\d+)", said.stdout)
    return match.group(1) if match else "?"


def _interrupt(process: subprocess.Popen) -> None:
    """SIGINT to the profiler's group (py-spy writes its output on it), SIGKILL after a grace."""
    try:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
        process.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        process.wait()
    guardian.reaped(process.pid)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(nothing said)"
