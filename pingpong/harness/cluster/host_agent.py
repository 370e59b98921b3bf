"""What runs on each host of a cluster run (--cluster): one HostAgent, a Dask actor, per worker.

The agent owns the processes the run starts on its host: servers, which live across many calls (a whole round of
clients), and the client processes of each attempt. It measures what can only be measured where a process runs:

- a server's CPU (its process tree) and its host's kernel TCP counters, sampled every SAMPLE_INTERVAL_S from just
  before the clients' go until they are done; the orchestrator interpolates both at the window's edges, which the
  client host forwards on its own wall clock (translated with the measured clock offsets: cluster_figures.py);
- with --workers N > 1, the Redis broker the server's host runs beside it (launch_server starts it there): its own
  PUBLISH count and CPU, sampled with the server's and interpolated the same way, and the workers' counts, handed
  back when the server stops;
- the clients' CPU, page faults, scheduling (run delay, context switches), counters and sockets at their window's
  edges, exactly as a local run does (window.WindowWatcher); the server's scheduling is not read (a reading every
  SAMPLE_INTERVAL_S of each of its threads would cost more than its CPU samples), so a cluster run's time budget
  has the client side only;
- readiness, the room probe and the relay verification, from the client's host over the real path.

Nothing here outlives the run. The orchestrator renews a lease every few seconds; when it stops renewing (it was
killed, even by SIGKILL, or the network between them is gone), the agent stops every process group it started.
If the worker process itself dies, the guardian (guardian.py) that processes.start talks to ends those groups.

Every method is a coroutine, so a lease renewal is answered while a long call (a client run) is under way; the
blocking work runs in threads.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from pingpong.contract import EVENTS_FD_ENV, GO_FD_ENV
from pingpong.harness.measure import probe
from pingpong.harness.measure.attempt_plan import (STDERR_TAIL_LINES, ClientShare, client_command, process_environment,
                                                   window_processes)
from pingpong.harness.measure.boundary import ClientRun
from pingpong.harness.measure.server import LocalServer, launch_server, stop_server, wait_for_workers, worker_counts
from pingpong.harness.measure.start_barrier import StartBarrier
from pingpong.harness.measure.window import WindowWatcher
from pingpong.harness.settings.catalog import PROJECT_ROOT
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.system import cpu, guardian, kernel_signals, listeners, processes, work_dirs

# One worker process may hold several agents (one per orchestrator that came by). They share the process's guardian,
# so an agent stops it only when no other agent has processes running, and never while one is starting a process.
_AGENTS: "weakref.WeakSet[HostAgent]" = weakref.WeakSet()
_STARTING = threading.Lock()

LEASE_S = 10.0  # the agent ends its processes when the orchestrator has not renewed for this long
SAMPLE_INTERVAL_S = 0.02  # the server side's CPU and counters, while an attempt's clients run
# The broker's PUBLISH count and CPU are read with every sample. A window's edges fall between samples, and its count
# stops growing when the clients stop, so a sample only every 0.1 s under-counted a 0.5 s window's publishes by 1-7%
# (interpolated across the stop: results/reference/2026-11-25-workers-cluster-broker-every-0.1s-sweep.md); each
# reading is one INFO the broker answers, whose time (its own usec count) is left out of its CPU; about 5 µs more per
# reading (the exchange itself) stays in: 0.3 ms of broker CPU a second.


def server_cpus_on_host(cpus: list[int], workers: int) -> list[int]:
    """The CPUs a pinned server gets on its host: one per worker, up to all but the last (a client on the same host
    is pinned to the last), and at least the first."""
    return cpus[:max(1, min(workers, len(cpus) - 1))]


def host_identity() -> dict[str, Any]:
    """Who this host is: its name, kernel boot id and network namespace (two agents in one namespace share a host's
    network: their traffic goes over loopback), and the CPUs this worker may use."""
    try:
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        netns = None
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot_id = None
    return {"hostname": socket.gethostname(), "boot_id": boot_id, "netns": netns,
            "cpus": sorted(os.sched_getaffinity(0)), "pid": os.getpid()}


def host_fingerprint(project_root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """What must match between the orchestrator and every worker: the checkout's commit (and whether it has local
    changes, by a digest of them), the Python and Node.js versions, and the installed versions of every pinned Python
    package and every npm package the lock file lists."""
    import hashlib

    from pingpong.harness.settings.environment import runtime_version, suite_commit
    commit, dirty = suite_commit(project_root)
    changes = None
    if dirty:
        diff = subprocess.run(["git", "-C", str(project_root), "diff", "HEAD"], capture_output=True).stdout
        changes = hashlib.sha256(diff).hexdigest()[:16]
    return {"commit": commit, "local_changes": changes, "python": platform.python_version(),
            "node": runtime_version("node", project_root),
            "python_packages": pinned_python_packages(project_root), "npm_packages": npm_packages(project_root)}


def pinned_python_packages(project_root: Path) -> dict[str, str | None]:
    """name -> installed version (None: not installed) of every package requirements.txt pins."""
    from importlib import metadata
    installed: dict[str, str | None] = {}
    for line in (project_root / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" not in line:
            continue
        name = line.split("==", 1)[0].strip()
        try:
            installed[name.lower()] = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed[name.lower()] = None
    return installed


def npm_packages(project_root: Path) -> dict[str, str | None]:
    """name -> installed version (None: missing) of every package package-lock.json lists."""
    try:
        lock = json.loads((project_root / "package-lock.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    found: dict[str, str | None] = {}
    for key in lock.get("packages", {}):
        if not key.startswith("node_modules/"):
            continue
        try:
            found[key[len("node_modules/"):]] = json.loads((project_root / key / "package.json").read_text()).get(
                "version")
        except (OSError, json.JSONDecodeError):
            found[key[len("node_modules/"):]] = None
    return found


def route_to(address: str) -> dict[str, Any]:
    """The interface this host reaches address through, and its MTU ("lo" when address is one of this host's)."""
    try:
        text = subprocess.run(["ip", "-o", "route", "get", address], capture_output=True, text=True,
                              timeout=5).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": f"ip route get: {exc}"}
    words = text.split()
    if "dev" not in words:
        return {"error": f"ip route get {address}: {text.strip() or 'no route'}"}
    interface = words[words.index("dev") + 1]
    try:
        mtu = int(Path(f"/sys/class/net/{interface}/mtu").read_text())
    except (OSError, ValueError):
        mtu = None
    return {"interface": interface, "mtu": mtu, "loopback": interface == "lo"}


class _ServerSampler(threading.Thread):
    """The server tree's CPU and this host's TCP counters every SAMPLE_INTERVAL_S, on this host's wall clock."""

    def __init__(self, pid: int, broker=None) -> None:
        super().__init__(daemon=True)
        self.tree = listeners.process_tree(pid)  # the same pids throughout, as a local window samples them
        self.source = cpu.cpu_source()
        self.samples: list[tuple[int, float, dict[str, int]]] = []  # (wall ns, cumulative CPU s, counters)
        # --workers N > 1: the server's broker (system/broker.Broker), as (wall ns, its CPU s, {"publishes": calls})
        self.broker = broker
        self.broker_samples: list[tuple[int, float, dict[str, int]]] = []
        self._halt = threading.Event()
        self._previous: cpu.Sample | None = None
        self._cumulative = 0.0
        self._take()

    def _take(self) -> None:
        now = cpu.sample(self.tree, self.source)
        counters = kernel_signals.read_tcp_counters()
        if self._previous is not None:
            self._cumulative += cpu.cpu_delta(self._previous, now)
        self._previous = now
        self.samples.append((time.time_ns(), self._cumulative, counters))
        if self.broker is not None:
            reading = self.broker.sample()
            if reading is not None:
                self.broker_samples.append((time.time_ns(), reading.cpu_ns_beyond_readings / 1e9,
                                            {"publishes": reading.publish_calls,
                                             "cpu_us_with_readings": reading.cpu_ns // 1000}))

    def run(self) -> None:
        while not self._halt.wait(SAMPLE_INTERVAL_S):
            self._take()

    def finish(self) -> list[tuple[int, float, dict[str, int]]]:
        self._halt.set()
        self.join(5)
        self._take()
        return self.samples


class _ClientRun:
    """The client processes of one attempt on this host, from their start to their reports."""

    def __init__(self, client: Implementation, settings: CellSettings, url: str, rooms: list[str],
                 shares: list[ClientShare], names: list[str], work_dir: Path, cpus: set[int] | None) -> None:
        self.settings = settings
        self.shares = shares
        # every process waits for the go; the orchestrator's go() is the barrier's last arrival, so clients on
        # every client host start together
        self.barrier = StartBarrier(len(shares) + 1)
        read_fd, write_fd = os.pipe()
        self.clients: list[processes.ManagedProcess] = []
        try:
            for index, (share, room, name) in enumerate(zip(shares, rooms, names)):
                argv = client_command(client, settings, f"{url}{room}", share.pairs, PROJECT_ROOT, share)
                fds = {EVENTS_FD_ENV: write_fd, GO_FD_ENV: self.barrier.read_fds[index]}
                self.clients.append(processes.start(
                    name, argv, PROJECT_ROOT, work_dir, cpus=cpus, pass_fds=tuple(fds.values()),
                    env=process_environment(settings, **{env: str(fd) for env, fd in fds.items()})))
        except BaseException:
            os.close(read_fd)
            self.barrier.abort()
            self.stop()
            raise
        finally:
            os.close(write_fd)
            self.barrier.close_read_ends()
        self.window = WindowWatcher(read_fd, None, [c.pid for c in self.clients], int(url.rsplit(":", 1)[1]),
                                    settings, work_dir, on_ready=self.barrier.arrived,
                                    window_processes=window_processes(settings, shares))

    def wait_ready(self, timeout_s: float) -> dict[str, Any] | None:
        """None once every process here is connected and waiting for the go; else why not: {"ended": ClientRun}
        (its JSON mapping, boundary.py), or {"timeout": {"ready", "processes", "tails"}}."""
        deadline = time.monotonic() + timeout_s
        while self.barrier.ready < len(self.clients):
            ended = [index for index, c in enumerate(self.clients) if c.popen.poll() is not None]
            if ended:
                self.barrier.abort()
                return {"ended": self._client_run(ended[0]).to_dict()}
            if time.monotonic() >= deadline:
                self.barrier.abort()
                return {"timeout": {"ready": self.barrier.ready, "processes": len(self.clients),
                                    "tails": [c.stderr_tail(STDERR_TAIL_LINES) for c in self.clients]}}
            time.sleep(0.01)
        return None

    def go(self) -> None:
        self.barrier.arrived()

    def finish(self, timeout_s: float) -> dict[str, Any]:
        """Wait for every process (stopping all of them past timeout_s): {"timed_out": index or None, "processes":
        [ClientRun], "window": WindowSamples}, each in its JSON mapping (boundary.py), indexed on this host."""
        deadline = time.monotonic() + timeout_s
        timed_out = None
        for index, client in enumerate(self.clients):
            try:
                client.popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = index
                break
        self.stop()
        self.window.join()
        return {"timed_out": timed_out,
                "processes": [self._client_run(index).to_dict() for index in range(len(self.clients))],
                "window": self.window.samples().to_dict()}

    def _client_run(self, index: int) -> ClientRun:
        client = self.clients[index]
        return ClientRun(index, client.pid, client.popen.poll(), client.stdout_text(),
                         client.stderr_tail(STDERR_TAIL_LINES))

    def stop(self) -> None:
        self.barrier.abort()
        for client in self.clients:
            processes.stop(client)


class HostAgent:
    """The actor on one worker: starts, samples and stops this host's servers and clients for the orchestrator."""

    def __init__(self, lease_s: float = LEASE_S) -> None:
        processes.raise_descriptor_limit()
        work_dirs.remove_orphans()  # what agents of killed workers on this host left
        self.work_dir = work_dirs.make("pingpong-host-")
        self.lease_s = lease_s
        self.renewed_at = time.monotonic()
        self.servers: dict[int, processes.ManagedProcess] = {}
        self.launched: dict[int, LocalServer] = {}  # the same servers (by the same pids), with broker and counts
        self.samplers: dict[int, _ServerSampler] = {}
        self.client_runs: dict[str, _ClientRun] = {}
        self.ended_by_lease = False
        self.closed = False
        self._lock = threading.Lock()
        self._serial = 0
        self._watchdog = threading.Thread(target=self._watch_lease, daemon=True)
        self._watchdog.start()
        _AGENTS.add(self)

    # -- the lease
    def _watch_lease(self) -> None:
        while not self.ended_by_lease and not self.closed:
            time.sleep(min(1.0, self.lease_s / 4))
            if time.monotonic() - self.renewed_at > self.lease_s:
                self.ended_by_lease = True
                print(f"pingpong agent {os.getpid()}: no renewal for {self.lease_s:g} s; ending "
                      f"{len(self.servers)} server(s) and {len(self.client_runs)} client run(s)", file=sys.stderr,
                      flush=True)
                self._end_everything()

    async def renew(self) -> int:
        """The orchestrator is still there; this host's wall clock (ns), for the clock offset."""
        self.renewed_at = time.monotonic()
        return time.time_ns()

    async def clock(self) -> int:
        return time.time_ns()

    async def route_to(self, address: str) -> dict[str, Any]:
        return await asyncio.to_thread(route_to, address)

    async def close(self) -> None:
        self.closed = True
        await asyncio.to_thread(self._end_everything, True)

    def _end_everything(self, final: bool = False) -> None:
        """Stop every client run and server of this agent and empty its folder; final (the orchestrator's close):
        remove the folder too, else (the lease ran out) keep it, empty, for a call that may still come."""
        with self._lock:
            runs, self.client_runs = list(self.client_runs.values()), {}
            self.servers = {}
            launched, self.launched = list(self.launched.values()), {}
        for run in runs:
            run.stop()
        for server in launched:
            stop_server(server)  # its broker too
        with _STARTING:  # nothing left to guard in this worker: the guardian ends too (started again when needed)
            if not any(agent.servers or agent.client_runs for agent in list(_AGENTS) if agent is not self):
                guardian.stop_guardian()
        with self._lock:  # a lease running out while the run closes the agent must not bring the folder back
            shutil.rmtree(self.work_dir, ignore_errors=True)
            if not final and not self.closed:
                self.work_dir.mkdir(parents=True, exist_ok=True)
                work_dirs.mark_owned(self.work_dir)

    # -- servers
    async def start_server(self, server: Implementation, settings: CellSettings, host: str) -> dict[str, Any]:
        return await asyncio.to_thread(self._start_server, server, settings, host)

    def _start_server(self, server: Implementation, settings: CellSettings, host: str) -> dict[str, Any]:
        self._serial += 1
        work_dir = self.work_dir / f"server-{self._serial}"
        work_dir.mkdir(parents=True)
        cpus = sorted(os.sched_getaffinity(0))
        with _STARTING:
            started = launch_server(server, settings, PROJECT_ROOT, work_dir,
                                    set(server_cpus_on_host(cpus, settings.workers)) if settings.pin else None, host)
            with self._lock:
                self.servers[started.process.pid] = started.process
                self.launched[started.process.pid] = started
        return {"pid": started.process.pid, "port": started.port, "base_url": started.base_url,
                "cpus": sorted(started.cpus) if started.cpus else None, "workers": started.workers,
                "worker_stats": started.worker_stats_dir is not None,
                "broker": started.broker.record() if started.broker is not None else None}

    async def wait_for_workers(self, pid: int, timeout_s: float) -> str | None:
        """None once every worker of a multi-process server says it serves (each then pinned to one of the server's
        CPUs); else why not, in one line."""
        started = self.launched.get(pid)
        if started is None:
            return "the server was already gone (its host ended it)"
        return await asyncio.to_thread(wait_for_workers, started, timeout_s)

    async def server_status(self, pid: int) -> dict[str, Any]:
        server = self.servers.get(pid)
        if server is None:
            return {"returncode": -9, "stderr_tail": "", "gone": True}
        return {"returncode": server.popen.poll(), "stderr_tail": server.stderr_tail(STDERR_TAIL_LINES)}

    async def server_info(self, pid: int) -> dict[str, Any] | None:
        server = self.servers.get(pid)
        if server is None:
            return None
        try:
            return json.loads((server.stdout_path.parent / "server-info.json").read_text())
        except (OSError, json.JSONDecodeError):
            return None

    async def port_check(self, pid: int, port: int) -> str | None:
        """None when this server's tree holds its port; else who does (read from /proc, in a thread)."""
        def check() -> str | None:
            owner = listeners.port_owner(port)
            if owner is not None and owner not in listeners.process_tree(pid):
                return f"port {port} answered, but it is held by another process (pid {owner}), not by the server"
            return None
        return await asyncio.to_thread(check)

    async def begin_sampling(self, pid: int) -> None:
        launched = self.launched.get(pid)
        sampler = await asyncio.to_thread(_ServerSampler, pid, launched.broker if launched is not None else None)
        sampler.start()
        self.samplers[pid] = sampler

    async def end_sampling(self, pid: int) -> dict[str, Any]:
        sampler = self.samplers.pop(pid, None)
        samples = await asyncio.to_thread(sampler.finish) if sampler else []
        return {"samples": samples, "cpu_source": sampler.source.name if sampler else None,
                "peak_rss_bytes": cpu.peak_rss_bytes(pid), "broker_samples": sampler.broker_samples if sampler else []}

    async def server_sockets(self, pid: int, port: int) -> dict[str, Any]:
        return await asyncio.to_thread(kernel_signals.inspect_sockets, listeners.process_tree(pid), port, False)

    async def stop_server(self, pid: int) -> dict[str, Any]:
        """Stop it (and its broker); its exit code, stderr's tail, and its workers' final counts (a server with the
        "workers" feature; else [])."""
        with self._lock:
            server = self.servers.pop(pid, None)
            launched = self.launched.pop(pid, None)
        if server is None:
            return {"exit_code": None, "stderr_tail": "the server was already gone (its host ended it)",
                    "worker_counts": []}
        code = await asyncio.to_thread(stop_server, launched)
        return {"exit_code": code, "stderr_tail": server.stderr_tail(STDERR_TAIL_LINES),
                "worker_counts": worker_counts(launched)}

    # -- probes, from this host over the real path
    async def handshake(self, base_url: str, path: str, timeout_s: float) -> str | None:
        """None when one handshake on path completes now (readiness, the room probe); else the error."""
        def attempt() -> str | None:
            try:
                with probe.open_connection(base_url, path, timeout_s, None):
                    return None
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"
        return await asyncio.to_thread(attempt)

    async def verify_relay(self, base_url: str, silence_s: float = probe.DEFAULT_RELAY_SILENCE_S) -> str | None:
        return await asyncio.to_thread(probe.verify_relay, base_url, None, silence_s)

    # -- clients
    async def start_clients(self, attempt_id: str, client: Implementation, settings: CellSettings, url: str,
                            rooms: list[str], shares: list[ClientShare], names: list[str]) -> dict[str, Any] | None:
        """Start this host's client processes and wait until all are connected; None when they are."""
        def start() -> dict[str, Any] | None:
            cpus = sorted(os.sched_getaffinity(0))
            pinned = {cpus[-1]} if settings.pin else None  # a server here has the others (server_cpus_on_host)
            work_dir = self.work_dir / attempt_id
            work_dir.mkdir(parents=True, exist_ok=True)
            with _STARTING:
                run = _ClientRun(client, settings, url, rooms, shares, names, work_dir, pinned)
                with self._lock:
                    self.client_runs[attempt_id] = run
            return run.wait_ready(settings.start_barrier_timeout_s)
        return await asyncio.to_thread(start)

    async def go(self, attempt_id: str) -> int:
        """Release this host's clients; the wall clock (ns) when it did."""
        self.client_runs[attempt_id].go()
        return time.time_ns()

    async def finish_clients(self, attempt_id: str, timeout_s: float) -> dict[str, Any]:
        run = self.client_runs[attempt_id]
        try:
            return await asyncio.to_thread(run.finish, timeout_s)
        finally:
            with self._lock:
                self.client_runs.pop(attempt_id, None)
            shutil.rmtree(self.work_dir / attempt_id, ignore_errors=True)

    async def abandon_clients(self, attempt_id: str) -> None:
        with self._lock:
            run = self.client_runs.pop(attempt_id, None)
        if run is not None:
            await asyncio.to_thread(run.stop)

    async def processes_started(self) -> list[int]:
        """The process groups this agent has running now (for tests)."""
        return sorted([*self.servers, *(c.pid for run in self.client_runs.values() for c in run.clients)])


def describe_host() -> dict[str, Any]:
    """This worker's identity and fingerprint (run on every worker before any agent is placed)."""
    return {**host_identity(), "fingerprint": host_fingerprint()}
