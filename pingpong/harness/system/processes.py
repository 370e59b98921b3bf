"""Child processes of a run: each in its own process group, optionally pinned, always stopped and reaped."""

from __future__ import annotations

import ctypes
import math
import os
import resource
import select
import signal
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pingpong.contract import FIXED_ADDRESS_LAYOUT_ENV
from pingpong.harness.system import guardian
from pingpong.harness.system.stop_signals import note_stop_request, stop_requested, stopping_signals

STOP_GRACE_S = 5.0
ADDR_NO_RANDOMIZE = 0x0040000  # <linux/personality.h>
PERSONALITY_QUERY = 0xFFFFFFFF  # personality(2): returns the current persona, changes nothing
CLEAN_EXIT_CODES = (0, -signal.SIGTERM, -signal.SIGINT)  # uvicorn re-raises the signal after a graceful stop


@dataclass
class ManagedProcess:
    """A started child: its Popen, and the files its stdout and stderr go to (never pipes that can fill up)."""

    name: str
    popen: subprocess.Popen
    stdout_path: Path
    stderr_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stdout_text(self) -> str:
        return self.stdout_path.read_text(errors="replace") if self.stdout_path.exists() else ""

    def stderr_tail(self, lines: int = 20) -> str:
        if not self.stderr_path.exists():
            return ""
        return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise this process's open-files limit (RLIMIT_NOFILE) to its hard limit; the (soft, hard) it then has.

    Every server and client starts with it raised (children inherit it across exec), so thousands of idle
    connections meet the hard limit, not the usual soft 1024; environment.py records what that is.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft, hard


def start(name: str, argv: list[str], cwd: Path, log_dir: Path, env: dict[str, str] | None = None,
          cpus: set[int] | None = None, pass_fds: tuple[int, ...] = ()) -> ManagedProcess:
    """Start argv in a process group of its own (so its whole tree can be signalled as one group), in this process's
    session, pinned to cpus if given.

    Not in a session of its own: with the kernel's autogroup on (/proc/sys/kernel/sched_autogroup_enabled), each
    session is a scheduling group with a weight of its own, so three sessions on one CPU (a server and two client
    processes) gave the server a third of it instead of its share as a task, and a server whose threads or workers
    span two CPUs half its weight on each: two go-gorilla client processes beside a cpp-websocketpp server on one
    CPU ran 31-32k roundtrips/s in sessions of their own, 43k in one (docs/methodology.md, "Sessions").

    Pinning happens before exec, so every thread the runtime starts (Node's thread pool, uvloop's) inherits it.
    SIGINT is back at its default in the child, whatever this process inherited (a background job ignores it):
    a server or client behaves the same however the run was started, and frameworks that stop their workers
    with SIGINT (Sanic) can.

    The child is started without Python code between fork and exec, so that subprocess can use vfork: a fork of
    this process (about 100 MB) and a preexec_fn cost 5-15 ms per child, vfork well under 1 ms. The child inherits
    the calling thread's CPU affinity and this process's raised open-files limit; a SIGINT handled here is reset to
    its default at exec. Only while SIGINT is ignored here (outside stop_signals_raise_interrupt) does the child
    reset it itself, in a preexec_fn.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    stdout_path = log_dir / f"{name}.stdout"
    stderr_path = log_dir / f"{name}.stderr"
    pinned = frozenset(cpus) if cpus else None
    raise_descriptor_limit()  # here, once: children inherit it

    def default_sigint_in_child() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    preexec = default_sigint_in_child if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else None
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr, _calling_thread_on(pinned), \
            _calling_thread_layout(fixed_address_layout()):
        popen = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                 process_group=0, pass_fds=pass_fds, preexec_fn=preexec)
    guardian.started(popen.pid)  # its own process group: the group's id is its PID
    process = ManagedProcess(name, popen, stdout_path, stderr_path)
    if stop_requested():  # a Ctrl-C as it started, its KeyboardInterrupt dropped (in an at-fork hook, a gc callback)
        with interrupts_deferred():
            stop(process)
        raise KeyboardInterrupt
    return process


@contextmanager
def _calling_thread_on(cpus: frozenset[int] | None):
    """While the block runs, the calling thread (only it: affinity is per thread) runs on cpus; a child it starts
    inherits them."""
    if not cpus:
        yield
        return
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, previous)


def fixed_address_layout() -> bool:
    """Whether the measurement switch FIXED_ADDRESS_LAYOUT_ENV is on ("1") in the orchestrator's environment."""
    return os.environ.get(FIXED_ADDRESS_LAYOUT_ENV) == "1"


@contextmanager
def _calling_thread_layout(fixed: bool):
    """While the block runs and fixed is true, the calling thread's persona has ADDR_NO_RANDOMIZE (as `setarch -R`
    gives it): a child it starts inherits it, and maps its binary, libraries, heap and stack at exec without
    randomization. The orchestrator's own mappings are not touched (a layout is chosen at exec)."""
    if not fixed:
        yield
        return
    personality = ctypes.CDLL(None, use_errno=True).personality
    personality.argtypes, personality.restype = [ctypes.c_ulong], ctypes.c_int
    previous = personality(PERSONALITY_QUERY)
    if previous == -1 or personality(previous | ADDR_NO_RANDOMIZE) == -1:
        raise OSError(ctypes.get_errno(), f"personality(2) refused {FIXED_ADDRESS_LAYOUT_ENV}=1")
    try:
        yield
    finally:
        personality(previous)


@contextmanager
def this_process_on(cpus: set[int] | None):
    """While the block runs, every thread of this process (the orchestrator: its sampling, its helper threads) runs
    on cpus, then back where it was; None: left where it is."""
    if not cpus:
        yield
        return
    previous = os.sched_getaffinity(0)
    pin_threads(os.getpid(), cpus)
    try:
        yield
    finally:
        pin_threads(os.getpid(), previous)


def pin_threads(pid: int, cpus: set[int]) -> None:
    """Move every thread of a running process to cpus: affinity is per thread, and a runtime starts its helper
    threads (V8's, libuv's) at start-up. Threads it starts later inherit the new set."""
    try:
        tasks = [int(entry.name) for entry in os.scandir(f"/proc/{pid}/task")]
    except OSError:
        return  # it has exited: its attempt says so
    for task in tasks:
        try:
            os.sched_setaffinity(task, cpus)
        except OSError:
            pass  # a thread that ended meanwhile


def stop(process: ManagedProcess, grace_s: float = STOP_GRACE_S) -> int | None:
    """SIGTERM the leader (letting a framework stop its own workers), then SIGKILL whatever of its group is left.

    Returns the leader's exit code. Only this process's own group is ever signalled.
    """
    popen = process.popen
    if popen.poll() is None:
        try:
            popen.send_signal(signal.SIGTERM)
            os.killpg(popen.pid, signal.SIGCONT)  # a group left stopped (measure/pacer.py) could not act on it
        except (ProcessLookupError, PermissionError):
            pass
        try:
            wait(popen, grace_s)
        except subprocess.TimeoutExpired:
            pass
    kill_group(popen.pid)
    try:
        code = wait(popen, grace_s)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        return None
    if group_gone(popen.pid) or not group_members(popen.pid):
        guardian.reaped(popen.pid)
    return code


def wait(popen: subprocess.Popen, timeout_s: float) -> int:
    """popen.wait(timeout_s), woken by the exit itself. Popen.wait with a timeout polls, sleeping 0.5 ms, then 1, 2,
    4 ... up to 50 ms between looks: a child that exits 20 ms in is seen at 31.5 ms, one waited for from its start
    up to 50 ms late. A pidfd (Linux 5.3) becomes readable when the child exits; without one, Popen.wait it is."""
    if popen.returncode is not None:
        return popen.returncode
    if wait_exited(popen, timeout_s):
        return popen.wait()
    return popen.wait(timeout_s)


def wait_exited(popen: subprocess.Popen, timeout_s: float) -> bool:
    """Wait for the child to exit, woken by the exit, and leave it unreaped (a zombie), so that its CPU time can
    still be read (system/cpu.py); TimeoutExpired if it runs on. False where no pidfd can tell (the caller then
    waits with popen.wait)."""
    if popen.returncode is not None:
        return True
    try:
        exit_fd = os.pidfd_open(popen.pid)
    except (AttributeError, OSError):  # no pidfd here, or the child is already reaped
        return False
    try:
        exited = select.poll()
        exited.register(exit_fd, select.POLLIN)
        if not exited.poll(max(0, math.ceil(timeout_s * 1000))) and popen.poll() is None:
            raise subprocess.TimeoutExpired(popen.args, timeout_s)
    finally:
        os.close(exit_fd)
    return True


@contextmanager
def interrupts_deferred():
    """Hold the signals that stop a run while children are being stopped; raise KeyboardInterrupt afterwards if one
    came.

    A second Ctrl-C during cleanup would otherwise abandon the processes still being stopped. A SIGINT that this
    process ignores (started as a background job) stays ignored here too.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def defer(signal_number, frame) -> None:
        received.append(signal_number)
        note_stop_request(signal_number)

    previous = {number: signal.signal(number, defer) for number in stopping_signals()}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if received:
            raise KeyboardInterrupt


def kill_group(pgid: int) -> None:
    """SIGKILL every process still in process group pgid, and wait until none is left."""
    deadline = time.monotonic() + STOP_GRACE_S
    while not group_gone(pgid) and group_members(pgid) and time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except PermissionError:  # pragma: no cover - only our own groups are passed in
            return
        time.sleep(0.01)


def group_gone(pgid: int) -> bool:
    """True when no process, not even a zombie, is left in process group pgid: the usual case once a child has
    exited and been reaped, answered by the kernel without reading /proc (group_members takes a few ms)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # pragma: no cover - only our own groups are passed in
        return False
    return False


def group_members(pgid: int) -> list[int]:
    """PIDs of live (non-zombie) processes in process group pgid, read from /proc."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as file:
                stat = file.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, process_group = fields[0], int(fields[2])
        if process_group == pgid and state != "Z":
            members.append(int(entry.name))
    return members


def address_family(host: str) -> socket.AddressFamily:
    """The family of a numeric host: IPv6 for an address with a colon (::1), IPv4 otherwise."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel says is free right now (the server may still lose a race for it: that is reported)."""
    with socket.socket(address_family(host), socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range of local ports for connect() and bind(0) (/proc/sys/net/ipv4/ip_local_port_range);
    Linux's default when it cannot be read."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as file:
            low, high = (int(word) for word in file.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a listening socket could bind host:port now, in the host's own address family."""
    with socket.socket(address_family(host), socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True
