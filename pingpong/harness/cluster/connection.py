"""--cluster: the connection to a Dask distributed scheduler, its checked workers and their agents.

The orchestrator stays where it runs. Every host runs one Dask worker from a checkout of the same commit with the
same setup, tagged with the resource it offers: `server=1` or `client=1` (docs/cluster.md). At the start the
orchestrator refuses, in one line, a worker whose checkout or setup differs from its own, a cluster lacking a
resource, and a scheduler it cannot reach in time. Then it places one HostAgent actor (host_agent.py) on each worker;
the agent owns that host's processes. ClusterMeasurer (measurer.py) is the engine's Measurer there, so rounds, shuffling,
precision and the results are the same as in a local run: only where the processes run changes.

Dask is imported only here, and this module only with --cluster: without it no Dask process is started.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pingpong.harness.cluster import figures as cluster_figures
from pingpong.harness.cluster import host_agent
from pingpong.harness.settings.catalog import PROJECT_ROOT
from pingpong.harness.settings.usage import UsageError

RENEW_EVERY_S = 1.0  # lease renewals (the agents end their processes after --cluster-lease, LEASE_S, without one)
CALL_TIMEOUT_S = 60.0  # a call to an agent that takes longer than this fails the attempt
LOST_CHECK_S = 0.25  # a call waiting for its answer checks this often whether the agent's worker was lost
CLOCK_EXCHANGES = 5  # per host and attempt, to estimate its clock's offset
READY_PROBE_INTERVAL_S = 0.05
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
        """The agent's method's answer, within timeout (TimeoutError). A worker lost meanwhile fails the call as soon
        as the scheduler knows it (OSError): Dask's own call would first wait for the agent's task to be placed
        again, which took 15 s here while the nanny restarted the worker."""
        pending = getattr(self.agent, method)(*args)
        deadline = time.monotonic() + timeout
        while True:
            try:
                return pending.result(timeout=max(0.001, min(LOST_CHECK_S, deadline - time.monotonic())))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise
            status = getattr(self.future, "status", "finished")
            if status != "finished":  # the scheduler took the agent's task back: its worker is gone
                raise OSError(f"Unable to contact Actor's worker: {self.address} was lost (its agent: {status})")


class UnretrievedTimeouts(logging.Filter):
    """Drops asyncio's "Future exception was never retrieved" for a TimeoutError, and no other record. A run refused
    at the start (a worker from another commit) closes Dask's client while one of its own futures is still timing
    out; asyncio logged that future at exit, three lines under the run's one-line error (tests/test_cluster.py, in a
    terminal run of the tests on 2026-11-29)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exception = record.exc_info[1] if record.exc_info else None
        return not (record.getMessage().startswith("Future exception was never retrieved")
                    and type(exception).__name__ == "TimeoutError")


class Cluster:
    """The connection to the scheduler, the checked workers and their agents, and the lease that keeps them."""

    def __init__(self, address: str, tls_dir: Path | None, insecure: bool = False,
                 connect_timeout_s: float = 10.0, lease_s: float | None = None) -> None:
        problem = cluster_figures.address_problem(address, insecure)
        if problem:
            raise ClusterError(problem)
        if lease_s is not None and not lease_s > 0:
            raise ClusterError(f"--cluster-lease must be > 0 seconds, got {lease_s:g}")
        self.address = address
        self.lease_s = host_agent.LEASE_S if lease_s is None else lease_s
        security = security_for(address, tls_dir)
        asyncio_log = logging.getLogger("asyncio")
        if not any(isinstance(known, UnretrievedTimeouts) for known in asyncio_log.filters):
            asyncio_log.addFilter(UnretrievedTimeouts())
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
            future = self.client.submit(host_agent.HostAgent, self.lease_s, actor=True, workers=[address],
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
                host.call("renew", timeout=self.lease_s)
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
            except Exception as exc:  # a live agent ends what it started when the lease runs out, and keeps its folder
                log(f"closing the agent on {host.address} failed ({type(exc).__name__}: {exc}); what it started ends "
                    "when its lease runs out, or went with its worker")
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


def log(message: str) -> None:
    print(f"cluster: {message}", file=sys.stderr, flush=True)
