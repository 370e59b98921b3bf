"""Hosts on this machine for tests and benchmarks of --cluster: network namespaces joined by veth links.

Each host is a network namespace of its own with one veth link to a bridge in a switch namespace, all made here
and removed by close(): no address outside them is ever used, and no packet leaves the machine. On the hosts run
a Dask scheduler (with the cluster's mutual TLS) and one worker each, started as docs/cluster.md says
(`run_bench.py cluster scheduler|worker`); every process started here is in a process group of its own and ended
by PID.

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's `ip`; available() says why not when it cannot work.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from pingpong.harness.settings.catalog import PROJECT_ROOT

SUBNET = "10.231.77"  # /24 inside the lab's own namespaces only
SCHEDULER_PORT = 8786  # each namespace has ports of its own


def available() -> str | None:
    """None when namespaces can be made here; else why not."""
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    name = f"pp{os.getpid()}probe"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", name], capture_output=True)
    return None


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass
class LabHost:
    name: str  # the lab's name for it ("h0", "server", ...)
    netns: str
    address: str


@dataclass
class Lab:
    """Namespaces on one bridge; processes started in them; everything removed by close()."""

    tag: str = field(default_factory=lambda: f"pp{os.getpid() % 100000}")
    hosts: dict[str, LabHost] = field(default_factory=dict)
    processes: list[subprocess.Popen] = field(default_factory=list)
    switch: str = ""

    def __post_init__(self) -> None:
        self.switch = f"{self.tag}-sw"
        ip("netns", "add", self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")

    def add_host(self, name: str) -> LabHost:
        index = len(self.hosts) + 1
        netns = f"{self.tag}-{name}"
        ip("netns", "add", netns)
        ip("-n", netns, "link", "set", "lo", "up")
        # a veth pair made directly inside the two namespaces (the default namespace never sees it)
        ip("link", "add", "eth0", "netns", netns, "type", "veth", "peer", "name", f"port{index}",
           "netns", self.switch)
        ip("-n", self.switch, "link", "set", f"port{index}", "master", "br0", "up")
        address = f"{SUBNET}.{index}"
        ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", netns, "link", "set", "eth0", "up")
        self.hosts[name] = LabHost(name, netns, address)
        return self.hosts[name]

    def run(self, host: str, argv: list[str], log: Path, env: dict[str, str] | None = None,
            cwd: Path = PROJECT_ROOT) -> subprocess.Popen:
        """Start argv in host's namespace, in a session of its own, output to log."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            process = subprocess.Popen(["ip", "netns", "exec", self.hosts[host].netns, *argv], cwd=cwd,
                                       env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append(process)
        return process

    def pids(self, host: str) -> set[int]:
        """Every process in host's namespace now."""
        listed = subprocess.run(["ip", "netns", "pids", self.hosts[host].netns], capture_output=True, text=True)
        return {int(word) for word in listed.stdout.split()}

    def stop(self, process: subprocess.Popen, grace_s: float = 10.0) -> None:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(grace_s)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        for process in reversed(self.processes):
            self.stop(process)
        for host in self.hosts.values():
            for pid in self.pids(host.name):  # anything left in a namespace of ours was started in it by us
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run(["ip", "netns", "delete", host.netns], capture_output=True)
        subprocess.run(["ip", "netns", "delete", self.switch], capture_output=True)


def scheduler_command(tls_dir: Path, address: str) -> list[str]:
    """The documented command (docs/cluster.md): it runs Dask with this checkout on its path, in the foreground."""
    return [sys.executable, str(PROJECT_ROOT / "run_bench.py"), "cluster", "scheduler", "--host", address,
            "--port", str(SCHEDULER_PORT), "--tls", str(tls_dir)]


def worker_command(tls_dir: Path, scheduler: str, resource: str) -> list[str]:
    """The documented command for a worker offering resource ("server" or "client")."""
    return [sys.executable, str(PROJECT_ROOT / "run_bench.py"), "cluster", "worker", scheduler, "--role", resource,
            "--tls", str(tls_dir)]


def wait_for_workers(lab: Lab, host: str, tls_dir: Path, scheduler: str, count: int, timeout_s: float = 60.0) -> None:
    """Until the scheduler lists count workers (asked from host's namespace, over TLS)."""
    script = ("import sys,time\nfrom distributed import Client\nfrom distributed.security import Security\n"
              f"s=Security(tls_ca_file={str(tls_dir / 'ca.pem')!r},tls_client_cert={str(tls_dir / 'client.pem')!r},"
              f"tls_client_key={str(tls_dir / 'client-key.pem')!r},require_encryption=True)\n"
              f"c=Client({scheduler!r},security=s,timeout=20)\n"
              f"c.wait_for_workers({count},timeout={timeout_s})\nc.close()\n")
    done = subprocess.run(["ip", "netns", "exec", lab.hosts[host].netns, sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=timeout_s + 30, cwd=PROJECT_ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"the cluster did not come up: {done.stderr.strip()[-500:]}")


def wait_until(condition, timeout_s: float, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval_s)
    return condition()


@contextmanager
def dask_cluster(workers: list[tuple[str, str, str]]) -> Iterator[tuple[Lab, str, Path]]:
    """A lab with h0 (the scheduler, and the place to run the orchestrator) and one Dask worker per (host,
    resource, name), made with the cluster's certificates and started with the documented commands (name: its
    log's); yields the lab, the scheduler's address and the TLS folder. Everything is removed afterwards."""
    from pingpong.harness.cluster.connection import make_certificates
    with tempfile.TemporaryDirectory(prefix="pingpong-lab-") as folder:
        tls = Path(folder) / "tls"
        make_certificates(tls)
        lab = Lab()
        try:
            for host in dict.fromkeys(["h0", *(host for host, _, _ in workers)]):
                lab.add_host(host)
            scheduler = f"tls://{lab.hosts['h0'].address}:{SCHEDULER_PORT}"
            lab.run("h0", scheduler_command(tls, lab.hosts["h0"].address), Path(folder) / "scheduler.log")
            for host, resource, name in workers:
                lab.run(host, worker_command(tls, scheduler, resource), Path(folder) / f"{name}.log")
            wait_for_workers(lab, "h0", tls, scheduler, len(workers))
            yield lab, scheduler, tls
        finally:
            lab.close()


def run_in(lab: Lab, host: str, argv: list[str]) -> subprocess.CompletedProcess:
    """argv in host's namespace from this checkout (stdout captured; stderr passes through), to its end."""
    return subprocess.run(["ip", "netns", "exec", lab.hosts[host].netns, *argv], cwd=PROJECT_ROOT,
                          stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
