"""--cluster: servers and clients on other hosts, placed through a Dask distributed scheduler.

The orchestrator stays where it runs. Every host runs one Dask worker from a checkout of the same commit with the
same setup, tagged with the resource it offers: `server=1` or `client=1` (docs/cluster.md). At the start the
orchestrator refuses, in one line, a worker whose checkout or setup differs from its own, a cluster lacking a
resource, and a scheduler it cannot reach in time. Then it places one HostAgent actor (host_agent.py) on each worker;
the agent owns that host's processes. ClusterMeasurer has the engine's Measurer methods, so rounds, shuffling,
precision and the results are the same as in a local run: only where the processes run changes.

Dask is imported only here, and this module only with --cluster: without it no Dask process is started.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pingpong.harness.cluster import figures as cluster_figures, host_agent
from pingpong.harness.system import kernel_signals
from pingpong.harness.settings.catalog import PROJECT_ROOT
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.results.records import Attempt
from pingpong.harness.measure.runner import (ClientShare, client_shares, connecting_allowance_s, judge_outcome,
                                             parse_client_report, with_jit_warmup)
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.usage import UsageError

RENEW_EVERY_S = 1.0  # lease renewals (the agents end their processes after host_agent.LEASE_S without one)
CALL_TIMEOUT_S = 60.0  # a call to an agent that takes longer than this fails the attempt
CLOCK_EXCHANGES = 5  # per host and attempt, to estimate its clock's offset
READY_PROBE_INTERVAL_S = 0.05
ROOM_PROBE_TIMEOUT_S = 3.0
TLS_FILES = {"ca": "ca.pem", "cert": "client.pem", "key": "client-key.pem"}
CERT_ROLES = ("scheduler", "worker", "client")


class ClusterError(UsageError):
    """A cluster that cannot be used as given (one line: what and where)."""


def make_certificates(folder: Path) -> list[Path]:
    """A CA made for the cluster and one certificate per role, all signed by it (mutual TLS: every party presents
    one). Copy ca.pem with the role's pair to each host; keep ca-key.pem nowhere but here."""
    import trustme
    folder.mkdir(parents=True, exist_ok=True)
    authority = trustme.CA(organization_name="pingpong cluster")
    written = [folder / "ca.pem"]
    authority.cert_pem.write_to_path(str(written[0]))
    authority.private_key_pem.write_to_path(str(folder / "ca-key.pem"))
    for role in CERT_ROLES:
        issued = authority.issue_cert(f"pingpong-{role}", common_name=f"pingpong-{role}")
        certificate, key = folder / f"{role}.pem", folder / f"{role}-key.pem"
        with open(certificate, "wb") as out:
            for blob in issued.cert_chain_pems:
                out.write(blob.bytes())
        issued.private_key_pem.write_to_path(str(key))
        key.chmod(0o600)
        written += [certificate, key]
    (folder / "ca-key.pem").chmod(0o600)
    return written


def security_for(address: str, tls_dir: Path | None):
    """Dask's Security for the orchestrator: mutual TLS with the cluster's files for tls://, none for tcp://."""
    from distributed.security import Security
    if not address.startswith("tls://"):
        return Security()
    if tls_dir is None:
        raise ClusterError(f"--cluster {address}: give the cluster's TLS files with --cluster-tls DIR "
                           f"(run_bench.py cluster-certs DIR makes them; docs/cluster.md)")
    paths = {name: tls_dir / file for name, file in TLS_FILES.items()}
    missing = [str(path) for path in paths.values() if not path.is_file()]
    if missing:
        raise ClusterError(f"--cluster-tls {tls_dir}: missing {', '.join(missing)}")
    return Security(tls_ca_file=str(paths["ca"]), tls_client_cert=str(paths["cert"]),
                    tls_client_key=str(paths["key"]), require_encryption=True)


@dataclass
class Host:
    """One worker with its agent."""

    address: str
    role: str  # "server" or "client"
    agent: Any
    identity: dict[str, Any]
    future: Any = None  # the actor's future: the agent lives as long as it is held

    @property
    def ip(self) -> str:
        return self.address.split("://", 1)[1].rsplit(":", 1)[0]

    def call(self, method: str, *args, timeout: float = CALL_TIMEOUT_S):
        return getattr(self.agent, method)(*args).result(timeout=timeout)


class Cluster:
    """The connection to the scheduler, the checked workers and their agents, and the lease that keeps them."""

    def __init__(self, address: str, tls_dir: Path | None, insecure: bool = False,
                 connect_timeout_s: float = 10.0) -> None:
        problem = cluster_figures.address_problem(address, insecure)
        if problem:
            raise ClusterError(problem)
        self.address = address
        security = security_for(address, tls_dir)
        from distributed import Client
        try:
            self.client = Client(address, security=security, timeout=connect_timeout_s)
        except Exception as exc:  # OSError, TimeoutError, ssl errors: all mean "not this scheduler, not now"
            raise ClusterError(f"--cluster {address}: cannot connect within {connect_timeout_s:g} s "
                               f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
        self.fingerprint = host_agent.host_fingerprint(PROJECT_ROOT)
        self.hosts: list[Host] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        try:
            self.attach()
        except BaseException:
            self.client.close()
            raise
        self._renewer = threading.Thread(target=self._renew, daemon=True)
        self._renewer.start()

    # -- workers and agents
    def workers(self) -> dict[str, dict[str, float]]:
        """address -> resources of every worker the scheduler knows now."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return {address: worker.get("resources") or {} for address, worker in info.items()}

    def attach(self, wait_s: float = 0.0, keep: list[Host] | None = None) -> None:
        """Check every worker and place an agent on each that offers server or client and has none yet (keep: the
        hosts whose agents still answer). wait_s: how long to wait for a role that has no worker (one coming back
        after a loss). At the start (keep None) any worker that cannot run the suite refuses the run; later, a
        worker that is going away is skipped."""
        kept = {host.address: host for host in keep or []}
        deadline = time.monotonic() + wait_s
        while True:
            workers = self.workers()
            roles = {address: role_of(resources) for address, resources in workers.items()}
            missing = [role for role in ("server", "client") if role not in roles.values()]
            if not missing or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if missing:
            known = ", ".join(f"{address} {resources or '{}'}" for address, resources in workers.items()) or "none"
            raise ClusterError(f"--cluster {self.address}: no worker offers resource {' or '.join(missing)}=1 "
                               f"(workers: {known}); start one with 'run_bench.py cluster worker ... "
                               f"--role {missing[0]}'")
        candidates = [address for address, role in roles.items() if role and address not in kept]
        described = (self.client.run(host_agent.describe_host, on_error="return", workers=candidates)
                     if candidates else {})
        hosts = list(kept.values())
        for address in sorted(described):
            answer = described[address]
            if isinstance(answer, BaseException):
                if keep is not None:  # a worker on its way out (or in): the next refresh sees it again
                    log(f"worker {address} skipped: {type(answer).__name__}: {answer}")
                    continue
                raise ClusterError(f"worker {address} cannot run the suite ({type(answer).__name__}: {answer}); "
                                   f"start it with 'run_bench.py cluster worker' from a checkout of this commit "
                                   f"(docs/cluster.md)")
            mismatches = cluster_figures.fingerprint_mismatches(self.fingerprint, answer["fingerprint"])
            if mismatches:
                raise ClusterError(f"worker {address} ({answer.get('hostname')}) differs from this checkout: "
                                   f"{'; '.join(mismatches[:4])}{' ...' if len(mismatches) > 4 else ''}")
            future = self.client.submit(host_agent.HostAgent, host_agent.LEASE_S, actor=True, workers=[address],
                                        allow_other_workers=False, pure=False, key=f"pingpong-agent-{uuid.uuid4()}")
            hosts.append(Host(address, roles[address], future.result(timeout=CALL_TIMEOUT_S), answer, future))
        hosts.sort(key=lambda host: host.address)
        with self._lock:
            self.hosts = hosts

    def of_role(self, role: str) -> list[Host]:
        with self._lock:
            return [host for host in self.hosts if host.role == role]

    def refresh(self) -> None:
        """After a failed call: keep the agents that still answer (and the servers they run), and place agents on
        the workers that have none (a worker restarted by its nanny comes back with a new address)."""
        alive = []
        for host in self.of_role("server") + self.of_role("client"):
            try:
                host.call("clock", timeout=5)
                alive.append(host)
            except Exception:
                log(f"worker {host.address} ({host.role}) is gone")
        self.attach(wait_s=30.0, keep=alive)

    def _renew(self) -> None:
        """Renew every agent's lease, each in a thread of its own: a lost worker's call (which may take its time
        to fail) never delays the others'."""
        def renew(host: Host) -> None:
            try:
                host.call("renew", timeout=host_agent.LEASE_S)
            except Exception:  # a lost worker: the attempt on it fails and refresh() replaces its agent
                pass
        pending: dict[str, threading.Thread] = {}
        while not self._closed.wait(RENEW_EVERY_S):
            for host in self.of_role("server") + self.of_role("client"):
                if host.address in pending and pending[host.address].is_alive():
                    continue
                pending[host.address] = threading.Thread(target=renew, args=(host,), daemon=True)
                pending[host.address].start()

    def clock_offsets(self, hosts: list[Host]) -> dict[str, dict[str, int]]:
        """Each host's wall clock minus this one's, from the best of a few exchanges."""
        offsets = {}
        for host in hosts:
            exchanges = []
            for _ in range(CLOCK_EXCHANGES):
                sent = time.time_ns()
                remote = host.call("clock")
                exchanges.append((sent, remote, time.time_ns()))
            offsets[host.address] = cluster_figures.best_offset(exchanges)
        return offsets

    def topology(self) -> dict[str, Any]:
        """Hosts, the link between the first server host and each client host (interface, MTU, loopback or not)."""
        servers, clients = self.of_role("server"), self.of_role("client")
        links = []
        for server in servers[:1]:
            for client in clients:
                route = client.call("route_to", server.ip)
                same = same_host(server.identity, client.identity)
                links.append({"from": client.address, "to": server.address, "same_network": same, **route})
        return {"scheduler": self.address,
                "hosts": [{"address": host.address, "role": host.role,
                           **{key: host.identity.get(key) for key in ("hostname", "netns", "cpus")}}
                          for host in servers + clients],
                "links": links,
                "link": ("loopback" if links and all(link.get("loopback") for link in links) else
                         ", ".join(sorted({f"{link.get('interface')} (MTU {link.get('mtu')})" for link in links}))),
                "clock_offsets": self.clock_offsets(servers + clients)}

    def close(self) -> None:
        self._closed.set()
        for host in self.of_role("server") + self.of_role("client"):
            try:
                host.call("close", timeout=15)
            except Exception:
                pass
        try:
            self.client.close(timeout=10)
        except Exception:
            pass


def role_of(resources: dict[str, float]) -> str | None:
    if resources.get("server"):
        return "server"
    if resources.get("client"):
        return "client"
    return None


def same_host(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Both in one network namespace of one booted kernel: their traffic goes over loopback."""
    return (one.get("boot_id"), one.get("netns")) == (other.get("boot_id"), other.get("netns"))


class RemoteProcess:
    """A server process on another host, as the engine sees a local one: pid, poll, stderr tail."""

    def __init__(self, host: Host, pid: int) -> None:
        self.host, self.pid, self.name = host, pid, "server"
        self.popen = self
        self.returncode: int | None = None
        self.final_stderr_tail: str | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                status = self.host.call("server_status", self.pid, timeout=10)
                self.returncode = status["returncode"]
            except Exception:  # its host is gone, and the server with it (the guardian there ended it)
                self.returncode = -9
        return self.returncode

    def stderr_tail(self, lines: int = 20) -> str:
        if self.final_stderr_tail is not None:
            return self.final_stderr_tail
        try:
            return self.host.call("server_status", self.pid, timeout=10)["stderr_tail"]
        except Exception as exc:
            return f"(its host is unreachable: {type(exc).__name__})"


@dataclass
class RemoteServer:
    """A server started on a server host for a round of clients (the engine's ServerUnderTest, elsewhere)."""

    process: RemoteProcess
    base_url: str
    port: int
    cpus: list[int] | None
    ready_after_s: float | None = None
    problem: dict[str, Any] | None = None
    clients_started: int = 0
    server_info: dict[str, Any] | None = None
    runtime: str | None = None  # the server implementation's runtime

    def attempt_fields(self, repeat: int, started_at: str, client_cpus: list[int] | None) -> dict[str, Any]:
        return dict(repeat=repeat, started_at=started_at, port=self.port, server_pid=self.process.pid,
                    server_cpus=self.cpus, client_cpus=client_cpus)


@dataclass
class ReportedClient:
    """A client process that ran on another host, as runner._judge reads one."""

    pid: int
    code: int | None
    stdout: str
    tail: str
    popen: Any = field(default=None)

    def __post_init__(self) -> None:
        self.popen = self
        self.returncode = self.code

    def poll(self) -> int | None:
        return self.code

    def stdout_text(self) -> str:
        return self.stdout

    def stderr_tail(self, lines: int = 20) -> str:
        return self.tail


@dataclass
class JoinedWindow:
    """The window as runner._judge reads it: client figures from the client hosts, server figures interpolated
    from the server host's samples."""

    server_cpu_s: float | None
    client_cpu_s: float | None
    cpu_source: Any
    spread: dict[str, Any] | None
    wall_s: float | None
    server_peak_rss_bytes: int | None
    tcp_counters: dict[str, int] | None
    sockets: dict[str, Any] | None
    syscalls: None = None
    sampling_s: float | None = None
    client_minor_faults: int | None = None
    server_minor_faults: None = None  # the server host's sampler does not read them


@dataclass(frozen=True)
class _SourceName:
    name: str


def spread_shares(shares: list[ClientShare], hosts: int, workload: str) -> list[list[int]]:
    """Which shares (by index) each client host runs: round robin; a broadcast's all on the first (its receivers
    processes ack on a pipe to the sender's)."""
    if workload == "broadcast" or hosts == 1:
        return [list(range(len(shares)))] + [[] for _ in range(hosts - 1)]
    return [list(range(index, len(shares), hosts)) for index in range(hosts)]


class ClusterMeasurer:
    """The engine's Measurer, with every process on the cluster's hosts."""

    def __init__(self, cluster: Cluster, clients_on: str = "any") -> None:
        self.cluster = cluster
        # which client hosts take the clients: "any"; or, for comparing links in one run, only those sharing the
        # server's network ("same-host": over loopback) or only the others ("other-host")
        self.clients_on = clients_on
        self.topology: dict[str, Any] | None = None
        self._stale = False
        self._next_server = 0

    def client_hosts(self, server_host: Host | None = None) -> list[Host]:
        hosts = self.cluster.of_role("client")
        if self.clients_on == "any" or server_host is None:
            return hosts
        wanted = self.clients_on == "same-host"
        return [host for host in hosts if same_host(server_host.identity, host.identity) == wanted]

    def _ensure_agents(self) -> None:
        if self._stale:
            self._stale = False
            self.cluster.refresh()

    def start(self, server: Implementation, settings: CellSettings, work_dir: Path,
              upcoming: list | None = None) -> RemoteServer:
        """upcoming is not used: a cluster's clients start at their turn, on their own hosts."""
        try:
            self._ensure_agents()
            servers = self.cluster.of_role("server")
            host = servers[self._next_server % len(servers)]
            self._next_server += 1
            launched = host.call("start_server", server, settings, host.ip)
        except Exception as exc:
            self._stale = True
            gone = RemoteProcess(None, 0)  # type: ignore[arg-type]
            gone.returncode = -9
            return RemoteServer(gone, "", 0, None, problem=dict(status="error", reason=cluster_reason(exc)))
        process = RemoteProcess(host, launched["pid"])
        started = RemoteServer(process, launched["base_url"], launched["port"], launched["cpus"],
                               runtime=server.runtime)
        try:
            started.problem = self._check(started, settings)
        except Exception as exc:
            self._stale = True
            started.problem = dict(status="error", reason=cluster_reason(exc))
        return started

    def _check(self, started: RemoteServer, settings: CellSettings) -> dict[str, Any] | None:
        """Readiness and verification from a client host, over the real path; the port's owner on the server's."""
        prober = self.client_hosts(started.process.host)[0]
        began = time.monotonic()
        last = "no attempt made"
        while True:
            code = started.process.poll() if started.process.returncode is None else started.process.returncode
            if code is not None:
                return dict(status="not-ready", reason=f"server exited with code {code} before accepting a "
                                                       f"connection from {prober.address}")
            last = prober.call("handshake", started.base_url, "/__readiness_probe__", 2.0)
            if last is None:
                break
            if time.monotonic() - began >= settings.ready_timeout_s:
                return dict(status="not-ready", reason=f"no handshake from {prober.address} within "
                                                       f"{settings.ready_timeout_s:g} s (last attempt: {last})")
            time.sleep(READY_PROBE_INTERVAL_S)
        started.ready_after_s = round(time.monotonic() - began, 4)
        conflict = started.process.host.call("port_check", started.process.pid, started.port)
        if conflict:
            return dict(status="port-conflict", reason=conflict)
        problem = prober.call("verify_relay", started.base_url)
        if problem:
            return dict(status="verification-failed", reason=problem, ready_after_s=started.ready_after_s)
        started.server_info = started.process.host.call("server_info", started.process.pid)
        return None

    def stop(self, started: RemoteServer) -> int | None:
        if started.process.host is None:
            return -9
        try:
            stopped = started.process.host.call("stop_server", started.process.pid)
        except Exception as exc:
            self._stale = True
            started.process.final_stderr_tail = cluster_reason(exc)
            return -9
        started.process.final_stderr_tail = stopped["stderr_tail"]
        return stopped["exit_code"]

    def fresh_attempt(self, server: Implementation, client: Implementation, settings: CellSettings,
                      round_number: int) -> Attempt:
        started = self.start(server, settings, Path("."))
        try:
            attempt = self.attempt_on(started, client, settings, round_number)
        finally:
            code = self.stop(started)
        return replace(attempt, server_exit_code=code)

    def attempt_on(self, started: RemoteServer, client: Implementation, settings: CellSettings,
                   round_number: int) -> Attempt:
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            self._ensure_agents()  # a client host lost in the previous attempt: its replacement, or the others
            if started.problem:
                outcome = started.problem
            else:
                outcome = self._measure(started, client, settings, round_number,
                                        self.client_hosts(started.process.host))
        except Exception as exc:  # a lost worker, a timed-out call: this attempt fails, the run goes on
            self._stale = True
            outcome = dict(status="error", reason=cluster_reason(exc))
        client_cpus = outcome.pop("client_cpus", None)
        return Attempt(**started.attempt_fields(round_number, started_at, client_cpus), **outcome)

    def _measure(self, started: RemoteServer, client: Implementation, settings: CellSettings, repeat: int,
                 client_hosts: list[Host]) -> dict[str, Any]:
        server_host = started.process.host
        prober = client_hosts[0]
        if started.process.poll() is not None:
            return dict(status="server-crashed", reason=f"the server exited with code {started.process.returncode} "
                                                        f"before this attempt")
        problem = prober.call("handshake", started.base_url, f"/__room_probe_{started.clients_started}",
                              ROOM_PROBE_TIMEOUT_S)
        if problem:
            return dict(status="not-ready", reason=f"room probe before the client (from {prober.address}): {problem}")
        started.clients_started += 1
        number = started.clients_started
        settings = with_jit_warmup(settings, client.runtime, started.runtime, number)
        shares = client_shares(settings)
        placement = spread_shares(shares, len(client_hosts), settings.workload)
        used = [(host, indexes) for host, indexes in zip(client_hosts, placement) if indexes]
        attempt_id = f"attempt-{uuid.uuid4().hex[:12]}"
        common = dict(ready_after_s=started.ready_after_s, server_info=started.server_info)
        server_host.call("begin_sampling", started.process.pid)
        began_hosts: list[Host] = []
        try:
            with ThreadPoolExecutor(len(used)) as pool:
                futures = []
                for host, indexes in used:
                    rooms = [f"/bench-r{repeat}" + (f"-n{number}" if number > 1 else "") +
                             (f"-c{index}" if len(shares) > 1 and settings.workload != "broadcast" else "")
                             for index in indexes]
                    names = [(f"client{index}" if len(shares) > 1 else "client") +
                             (f"-n{number}" if number > 1 else "") for index in indexes]
                    began_hosts.append(host)
                    futures.append(pool.submit(host.call, "start_clients", attempt_id, client, settings,
                                               started.base_url, rooms, [shares[i] for i in indexes], names,
                                               timeout=CALL_TIMEOUT_S + settings.start_barrier_timeout_s
                                               + connecting_allowance_s(settings)))
                ready = [future.result() for future in futures]
            failed = [(host, answer) for (host, _), answer in zip(used, ready) if answer]
            if failed:
                return self._not_started(failed, common, started)
            offsets = self.cluster.clock_offsets([server_host] + [host for host, _ in used])
            go_at = {host.address: host.call("go", attempt_id) for host, _ in used}
            server_sockets = server_host.call("server_sockets", started.process.pid, started.port)
            timeout = settings.warmup_s + settings.duration_s + settings.client_grace_s + \
                connecting_allowance_s(settings)
            with ThreadPoolExecutor(len(used)) as pool:
                finished = list(pool.map(lambda pair: pair[0].call("finish_clients", attempt_id, timeout,
                                                                   timeout=timeout + CALL_TIMEOUT_S), used))
            began_hosts = []
        finally:
            for host in began_hosts:
                try:
                    host.call("abandon_clients", attempt_id, timeout=15)
                except Exception:
                    pass
            sampled = server_host.call("end_sampling", started.process.pid)
        return self._judge(started, settings, used, finished, sampled, offsets, go_at, server_sockets, common,
                           server_host)

    def _not_started(self, failed: list[tuple[Host, dict[str, Any]]], common: dict[str, Any],
                     started: RemoteServer) -> dict[str, Any]:
        host, answer = failed[0]
        if answer.get("timeout"):
            return dict(status="timeout", reason=f"start barrier on {host.address}: {answer['ready']} of "
                                                 f"{answer['processes']} client processes reported ready",
                        client_stderr_tail="\n".join(answer["tails"]), **common)
        report, problem = parse_client_report(answer["stdout"])
        reason = problem or (report or {}).get("error") or f"it exited with code {answer['code']}"
        status = "client-failed"
        if started.process.poll() is not None:
            status, reason = "server-crashed", f"server exited with code {started.process.returncode}; {reason}"
        return dict(status=status, reason=f"client process {answer['ended']} on {host.address} ended before the "
                                          f"start barrier released: {reason}",
                    client_exit_code=answer["code"], client_stderr_tail=answer["stderr_tail"], **common)

    def _judge(self, started: RemoteServer, settings: CellSettings, used: list[tuple[Host, list[int]]],
               finished: list[dict[str, Any]], sampled: dict[str, Any], offsets: dict[str, dict[str, int]],
               go_at: dict[str, int], server_sockets: dict[str, Any], common: dict[str, Any],
               server_host: Host) -> dict[str, Any]:
        timed_out = [(host, answer) for (host, _), answer in zip(used, finished) if answer["timed_out"] is not None]
        if timed_out:
            host, answer = timed_out[0]
            limit_s = settings.warmup_s + settings.duration_s + settings.client_grace_s
            return dict(status="timeout", reason=f"a client process on {host.address} did not finish within "
                                                 f"{limit_s:g} s", **common)
        # the processes in share order, as a local run lists them
        ordered: dict[int, dict[str, Any]] = {}
        for (host, indexes), answer in zip(used, finished):
            for index, process in zip(indexes, answer["processes"]):
                ordered[index] = process
        clients = [ReportedClient(p["pid"], p["code"], p["stdout"], p["stderr_tail"])
                   for _, p in sorted(ordered.items())]
        codes = [client.code if client.code is not None else -9 for client in clients]
        windows = [answer["window"] for answer in finished]
        joined, placement = join_windows(windows, [host for host, _ in used], sampled, offsets, server_host,
                                         server_sockets)
        placement["go_wall_ns"] = go_at
        outcome = judge_outcome(started.process, clients, codes, joined, dict(common, client_pid=clients[0].pid),
                                settings)
        outcome["placement"] = placement
        outcome["client_cpus"] = None
        return outcome


FLOOR = "raw-tcp-c"  # the raw-TCP floor whose round trip across the link the topology states


def measure_floor(measurer: ClusterMeasurer, implementations: list[Implementation],
                  settings: CellSettings) -> dict[str, Any]:
    """One short attempt of the C raw-TCP floor across the link: its rate and round-trip percentiles."""
    from pingpong.harness.results import histograms
    by_name = {(i.role, i.name): i for i in implementations}
    server, client = by_name.get(("server", FLOOR)), by_name.get(("client", FLOOR))
    if server is None or client is None:
        return {"error": f"the manifest has no {FLOOR} server and client"}
    floor_settings = replace(settings, workload="pingpong", rate=None, pairs=1, client_processes=1, receivers=1,
                             payload_size=32, duration_s=1.0, warmup_s=0.3, compression="off")
    attempt = measurer.fresh_attempt(server, client, floor_settings, 0)
    if not attempt.ok:
        return {"error": f"{attempt.status}: {attempt.reason}"}
    latency = histograms.latency_summary(histograms.merge([attempt.latency_histogram]))
    return {"implementation": FLOOR, "roundtrips_per_s": round(attempt.roundtrips_per_s, 1),
            "p50_us": round(latency["p50_ns"] / 1e3, 1), "p99_us": round(latency["p99_ns"] / 1e3, 1),
            "payload_size": 32, "window_s": floor_settings.duration_s}


def join_windows(windows: list[dict[str, Any]], hosts: list[Host], sampled: dict[str, Any],
                 offsets: dict[str, dict[str, int]], server_host: Host,
                 server_sockets: dict[str, Any]) -> tuple[JoinedWindow, dict[str, Any]]:
    """The attempt's window from every client host's, and the server's figures over it."""
    starts = [cluster_figures.translate(w["start_wall_ns"], offsets[h.address]["offset_ns"], 0)
              for w, h in zip(windows, hosts) if w["start_wall_ns"] is not None]
    ends = [cluster_figures.translate(w["end_wall_ns"], offsets[h.address]["offset_ns"], 0)
            for w, h in zip(windows, hosts) if w["end_wall_ns"] is not None]
    server_offset = offsets[server_host.address]["offset_ns"]
    figures = {"cpu_s": None, "tcp_counters": None, "covered": False}
    if starts and ends and sampled["samples"]:
        start, end = max(starts), min(ends)
        figures = cluster_figures.server_window(sampled["samples"], start + server_offset, end + server_offset)
    client_counters = [w["tcp_counters"] for w in windows]
    shared = all(same_host(server_host.identity, h.identity) for h in hosts)
    client_cpu = [w["client_cpu_s"] for w in windows]
    client_sockets = [w["sockets"] for w in windows if w["sockets"]]
    sockets = {"server": server_sockets,
               "client": kernel_signals.merge_socket_readings(client_sockets,
                                                              any(r.get("forced") for r in client_sockets))}
    joined = JoinedWindow(
        server_cpu_s=figures["cpu_s"],
        client_cpu_s=sum(client_cpu) if None not in client_cpu else None,
        cpu_source=_SourceName(windows[0]["cpu_source"]),
        spread=windows[0]["spread"] if len(windows) == 1 else None,
        wall_s=(min(ends) - max(starts)) / 1e9 if starts and ends else None,
        server_peak_rss_bytes=sampled.get("peak_rss_bytes"),
        # one host's counters when every side shares its network; else every side's added up, as one host would see
        tcp_counters=client_counters[0] if shared else cluster_figures.summed_counters(figures["tcp_counters"],
                                                                                      *client_counters),
        sockets=sockets,
        sampling_s=max((w["sampling_s"] or 0) for w in windows),
        client_minor_faults=(None if any(w.get("client_minor_faults") is None for w in windows)
                             else sum(w["client_minor_faults"] for w in windows)))
    placement = {"server_host": server_host.address, "client_hosts": [h.address for h in hosts],
                 "same_network": shared, "clock_offsets": {a: offsets[a] for a in offsets},
                 "window_wall_ns": {"start": max(starts) if starts else None, "end": min(ends) if ends else None},
                 "server_samples": len(sampled["samples"]), "server_window_covered": figures["covered"],
                 "tcp_counters": {"server": figures["tcp_counters"],
                                  "client": cluster_figures.summed_counters(*client_counters)}}
    return joined, placement


def cluster_reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"cluster: {type(exc).__name__}: {text}"[:400] or "cluster: a call to a host failed"


def refuse_unsupported(configuration) -> None:
    """The settings a cluster run does not take yet, each refused in one line."""
    if configuration.tls:
        raise ClusterError("--cluster with --tls on: not supported yet (the run's certificate names 127.0.0.1)")
    points = configuration.points
    settings = [configuration.settings_at(point) for point in points]
    if any(s.idle_connections or s.sample_server_memory for s in settings):
        raise ClusterError("--cluster with --idle-connections: not supported yet (the server's memory is sampled "
                           "before the go, on the client's host)")
    if any(s.python_executable or s.node_modules for s in settings):
        raise ClusterError("--cluster with --python-packages/--node-packages: not supported (those environments "
                           "exist only on this host)")


def log(message: str) -> None:
    print(f"cluster: {message}", file=sys.stderr, flush=True)
