"""--cluster: the pure rules, the refusals, and real hosts on this machine (network namespaces joined by veth links
to a bridge, a Dask scheduler with mutual TLS and one worker per host), as docs/cluster.md runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest

from benchmarks import netns_lab
from pingpong.harness.cluster import figures as cluster_figures
from pingpong.harness.cluster.commands import QUIET_DASK
from pingpong.harness.cluster.connection import LOST_CHECK_S, Host, make_certificates
from pingpong.harness.cluster.measurer import spread_shares
from pingpong.harness.measure.attempt_plan import ClientShare
from pingpong.harness.system import broker
from tests.conftest import QUICK_RELAY_CHECK, TEST_TOKEN_ENV, processes_carrying
from tests.test_docs import as_argv, documented_commands

ROOT = Path(__file__).resolve().parent.parent


def run_bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run_bench.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


# -- pure rules

def test_only_tls_or_loopback_tcp_schedulers_are_accepted_without_insecure():
    assert cluster_figures.address_problem("tls://10.0.0.5:8786", insecure=False) is None
    assert cluster_figures.address_problem("tcp://127.0.0.1:8786", insecure=False) is None
    refused = cluster_figures.address_problem("tcp://10.0.0.5:8786", insecure=False)
    assert refused and "--insecure" in refused and "tls://" in refused
    assert cluster_figures.address_problem("tcp://10.0.0.5:8786", insecure=True) is None
    assert "expected tls://HOST:PORT" in cluster_figures.address_problem("http://10.0.0.5:8786", insecure=True)
    assert "expected tls://HOST:PORT" in cluster_figures.address_problem("tls://10.0.0.5", insecure=False)


def test_fingerprint_mismatches_name_each_difference():
    here = {"commit": "abc", "local_changes": None, "python": "3.11.7", "node": "v20.20.2",
            "python_packages": {"websockets": "17.4", "sanic": "25.12.1"}, "npm_packages": {"ws": "8.18.0"}}
    assert cluster_figures.fingerprint_mismatches(here, dict(here)) == []
    other = dict(here, commit="def", python_packages={"websockets": "16.0", "sanic": "25.12.1"},
                 npm_packages={})
    assert cluster_figures.fingerprint_mismatches(here, other) == [
        "commit def (here abc)", "websockets 16.0 (here 17.4)", "ws None (here 8.18.0)"]


def test_clock_offset_takes_the_exchange_with_the_shortest_round_trip():
    # remote clock 1000 ns ahead; the second exchange is the tightest
    exchanges = [(0, 1600, 400), (10_000, 11_050, 10_100), (20_000, 21_900, 21_000)]
    assert cluster_figures.clock_offset(*exchanges[1]) == (1000, 50)
    assert cluster_figures.best_offset(exchanges) == {"offset_ns": 1000, "uncertainty_ns": 50, "exchanges": 3}
    assert cluster_figures.translate(5_000, from_offset_ns=1000, to_offset_ns=-200) == 3_800


def test_server_window_interpolates_cpu_and_counters_at_the_window_edges():
    samples = [(0, 0.0, {"Tcp.OutSegs": 0}), (100, 1.0, {"Tcp.OutSegs": 1000}), (200, 3.0, {"Tcp.OutSegs": 1400})]
    window = cluster_figures.server_window(samples, 50, 150)
    assert window["cpu_s"] == pytest.approx(1.5)  # 0.5 at 50, 2.0 at 150
    assert window["tcp_counters"] == {"Tcp.OutSegs": 700}  # 500 at 50, 1200 at 150
    assert window["covered"] is True
    clipped = cluster_figures.server_window(samples, 150, 400)
    assert clipped["covered"] is False and clipped["cpu_s"] == pytest.approx(1.0)
    assert cluster_figures.server_window(samples[:1], 0, 10)["cpu_s"] is None


class PendingForever:
    """An actor call whose answer never comes (its worker was killed and Dask waits for the agent's task)."""

    def result(self, timeout=None):
        time.sleep(timeout)
        raise TimeoutError


def test_a_call_fails_as_soon_as_the_scheduler_has_lost_the_agents_worker():
    agent = type("Agent", (), {"renew": lambda self: PendingForever()})()
    actor_task = type("Future", (), {"status": "finished"})()
    host = Host("tls://10.0.0.3:4000", "client", agent, {}, actor_task)
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        host.call("renew", timeout=0.3)  # the worker is still there: the call's own timeout
    assert 0.3 <= time.monotonic() - began < 1.0
    actor_task.status = "lost"
    began = time.monotonic()
    with pytest.raises(OSError, match="10.0.0.3:4000 was lost"):
        host.call("renew", timeout=60)
    assert time.monotonic() - began < 2 * LOST_CHECK_S + 0.2


def test_counters_of_several_hosts_add_up_and_shares_spread_round_robin():
    assert cluster_figures.summed_counters({"a": 1, "b": 2}, None, {"a": 10, "b": 20}) == {"a": 11, "b": 22}
    assert cluster_figures.summed_counters(None, None) is None
    shares = [ClientShare(pairs=1) for _ in range(5)]
    assert spread_shares(shares, 2, "pingpong") == [[0, 2, 4], [1, 3]]
    assert spread_shares(shares, 2, "broadcast") == [[0, 1, 2, 3, 4], []]


# -- refusals in one line, before anything runs

def one_error_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("run_bench.py: error: "), done.stderr
    return lines[0]


def test_a_plain_tcp_scheduler_on_a_network_address_is_refused(tmp_path):
    line = one_error_line(run_bench("--cluster", "tcp://10.231.99.1:8786", "--results-dir", str(tmp_path)))
    assert "--insecure" in line


def test_an_unreachable_scheduler_is_refused_within_the_timeout(tmp_path):
    make_certificates(tmp_path / "tls")
    began = time.monotonic()
    line = one_error_line(run_bench("--cluster", "tls://127.0.0.1:9", "--cluster-tls", str(tmp_path / "tls"),
                                    "--cluster-timeout", "3", "--results-dir", str(tmp_path)))
    assert "cannot connect within 3 s" in line
    assert time.monotonic() - began < 30


def test_missing_tls_files_are_named(tmp_path):
    line = one_error_line(run_bench("--cluster", "tls://127.0.0.1:9", "--results-dir", str(tmp_path)))
    assert "--cluster-tls" in line
    line = one_error_line(run_bench("--cluster", "tls://127.0.0.1:9", "--cluster-tls", str(tmp_path),
                                    "--results-dir", str(tmp_path)))
    assert "missing" in line and "ca.pem" in line


def test_a_lease_of_no_time_is_refused(tmp_path):
    line = one_error_line(run_bench("--cluster", "tls://127.0.0.1:9", "--cluster-lease", "0",
                                    "--results-dir", str(tmp_path)))
    assert "--cluster-lease must be > 0 seconds, got 0" in line


@pytest.mark.parametrize("args, words", [
    (["cluster"], "required: PROCESS"),
    (["cluster", "scheduler", "--host", "127.0.0.1", "--tls", "{empty}"], "missing {empty}/ca.pem"),
    (["cluster", "worker", "tls://127.0.0.1:8786", "--role", "server", "--tls", "{empty}"], "worker-key.pem"),
    (["cluster", "worker", "tls://127.0.0.1:8786", "--role", "both", "--tls", "{tls}"], "invalid choice: 'both'"),
    (["cluster", "worker", "tcp://10.0.0.1:8786", "--role", "client", "--tls", "{tls}"], "as tls://ADDR:PORT"),
    (["cluster", "worker", "tls://10.0.0.1", "--role", "client", "--tls", "{tls}"], "as tls://ADDR:PORT"),
    (["cluster", "scheduler", "--host", "10.0.0.1:8786", "--tls", "{tls}"], "is not an IP address or a host name"),
    (["cluster", "scheduler", "--host", "192.0.2.1", "--tls", "{tls}"], "cannot listen on 192.0.2.1:8786 here"),
    (["cluster", "scheduler", "--host", "127.0.0.1", "--port", "0", "--tls", "{tls}"], "not a port number"),
])
def test_the_cluster_commands_refuse_bad_input_in_one_line(tmp_path, args, words):
    make_certificates(tmp_path / "tls")
    (tmp_path / "empty").mkdir()
    folders = {"tls": str(tmp_path / "tls"), "empty": str(tmp_path / "empty")}
    line = one_error_line(run_bench(*(arg.format(**folders) for arg in args), timeout=60))
    assert words.format(**folders) in line


def test_the_local_mode_imports_no_dask():
    code = ("import sys\nfrom pingpong.harness.commands import cli, run\n"
            "from pingpong.harness.measure import engine, local\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# -- real hosts: namespaces, veth links, a TLS scheduler and one worker per host

UNAVAILABLE = netns_lab.available()
# The runs below count (segments, sockets, publishes, processes), they compare no rates: Node.js sides get no extra
# warmup for its compiler, and no figure is drawn (matplotlib's second a run)
COUNTING = ["--jit-warmup", "0", "--no-figures", *QUICK_RELAY_CHECK]
# the lease of the runs killed with -9: the agents end what they started after it (the default, 10 s, is for real
# links; renewals come every second)
LEASE_S = 3
needs_namespaces = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no network namespaces here: {UNAVAILABLE}")


class ClusterLab:
    """h0 (the orchestrator and the scheduler), a server host and two client hosts, started with the documented
    commands (`run_bench.py cluster scheduler|worker`), which put the checkout on Dask's path themselves."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.tls = folder / "tls"
        make_certificates(self.tls)
        self.token = uuid.uuid4().hex  # carried by every process the lab starts, and by whatever they start
        self.env = {TEST_TOKEN_ENV: self.token}
        self.lab = netns_lab.Lab()
        for host in ("h0", "server", "client", "client2"):
            self.lab.add_host(host)
        self.scheduler = f"tls://{self.lab.hosts['h0'].address}:{netns_lab.SCHEDULER_PORT}"
        self.lab.run("h0", netns_lab.scheduler_command(self.tls, self.lab.hosts["h0"].address),
                     folder / "scheduler.log", self.env)
        self.workers = {host: self.lab.run(host, netns_lab.worker_command(self.tls, self.scheduler, host.rstrip("2")),
                                           folder / f"{host}-host.log", self.env)
                        for host in ("server", "client", "client2")}
        netns_lab.wait_for_workers(self.lab, "h0", self.tls, self.scheduler, 3)

    def start_worker_from(self, host: str, checkout: Path, name: str) -> subprocess.Popen:
        """A client worker started by hand from another checkout (made from the last commit, which may not have the
        cluster commands yet): Dask's own command, with that checkout on its path."""
        argv = [sys.executable, "-m", "distributed.cli.dask_worker", self.scheduler, "--resources", "client=1",
                "--nworkers", "1", "--name", name, "--no-dashboard", "--tls-ca-file", str(self.tls / "ca.pem"),
                "--tls-cert", str(self.tls / "worker.pem"), "--tls-key", str(self.tls / "worker-key.pem")]
        return self.lab.run(host, argv, self.folder / f"{name}.log", dict(self.env, PYTHONPATH=str(checkout)),
                            cwd=checkout)

    def bench(self, *args: str) -> list[str]:
        """run_bench.py on h0, against the cluster."""
        return ["ip", "netns", "exec", self.lab.hosts["h0"].netns, sys.executable, "run_bench.py",
                "--cluster", self.scheduler, "--cluster-tls", str(self.tls), *args]

    def cluster_pids(self) -> dict[str, set[int]]:
        return {host: self.lab.pids(host) for host in ("server", "client", "client2")}

    def worker_process(self, role: str) -> psutil.Process:
        """The worker process its nanny spawned (what a lost host looks like: that process dies); the nanny is the
        child of the documented command."""
        command = psutil.Process(self.workers[role].pid)
        return next(p for p in command.children(recursive=True) if "spawn_main" in " ".join(p.cmdline()))

    def close(self) -> None:
        self.lab.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if UNAVAILABLE is not None:
        pytest.skip(f"no network namespaces here: {UNAVAILABLE}")
    lab = ClusterLab(tmp_path_factory.mktemp("cluster"))
    try:
        yield lab
    finally:
        lab.close()
        assert netns_lab.wait_until(lambda: not processes_carrying(lab.token), 10), \
            [p.cmdline() for p in processes_carrying(lab.token)]


def load(results: Path) -> dict:
    return json.loads((results / "latest.json").read_text())


def settled(cluster: ClusterLab, baseline: dict[str, set[int]], timeout_s: float) -> dict[str, set[int]]:
    """Wait until every host's processes are the cluster's own again; what is left beyond them."""
    def extra() -> dict[str, set[int]]:
        return {host: pids - baseline[host] for host, pids in cluster.cluster_pids().items() if pids - baseline[host]}
    netns_lab.wait_until(lambda: not extra(), timeout_s, 0.2)
    return extra()


def described(pids: dict[str, set[int]]) -> list:
    found = []
    for pid in (p for group in pids.values() for p in group):
        try:
            found.append(psutil.Process(pid).cmdline())
        except psutil.Error:
            pass
    return found


@needs_namespaces
def test_a_two_by_two_matrix_runs_across_hosts_with_each_side_counted_on_its_own_host(cluster, tmp_path):
    baseline = cluster.cluster_pids()
    host_folders = set(Path(tempfile.gettempdir()).glob("pingpong-host-*"))
    done = subprocess.run(cluster.bench("--servers", "sanic,node-ws", "--clients", "websockets,node-ws",
                                        "--repeat", "2", "--duration", "0.3", "--warmup", "0.1", *COUNTING,
                                        "--results-dir", str(tmp_path), "--format", "json"),
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    run = load(tmp_path)
    topology = run["topology"]
    assert topology["scheduler"] == cluster.scheduler
    assert {host["role"] for host in topology["hosts"]} == {"server", "client"}
    assert len(topology["links"]) == 2  # from each client host to the server host
    for link in topology["links"]:
        assert link["interface"] == "eth0" and link["mtu"] == 1500 and link["loopback"] is False
        assert link["same_network"] is False
    assert topology["floor"]["p50_us"] > 0 and topology["floor"]["roundtrips_per_s"] > 0
    cells = [cell for cell in run["cells"] if not cell["skipped"]]
    assert len(cells) == 4
    server_address = cluster.lab.hosts["server"].address
    for cell in cells:
        assert [a["status"] for a in cell["attempts"]] == ["ok", "ok"], cell["attempts"][0]["reason"]
        for attempt in cell["attempts"]:
            placement = attempt["placement"]
            assert placement["server_host"].startswith(f"tls://{server_address}:")
            assert placement["client_hosts"][0].startswith(f"tls://{cluster.lab.hosts['client'].address}:")
            assert placement["same_network"] is False and placement["server_window_covered"] is True
            roundtrips = attempt["roundtrips"]
            # each host's own counters: the server sends two messages per roundtrip (to B, then to A), and so do
            # the two clients together; one shared host would count both sides (about four per roundtrip), a host
            # whose counters were lost none. Each host reads its counters at the window's edges as it sees them,
            # interpolated between its samples: three tests at a time, a client host read 390 for 217 (2026-11-28)
            # and 53 for 40 (2026-11-29), so the edges' error of up to 20 segments is allowed both ways
            for side in ("server", "client"):
                segments = placement["tcp_counters"][side]["Tcp.OutSegs"]
                assert 1.5 * roundtrips - 20 <= segments <= 3.0 * roundtrips + 20, (side, segments, roundtrips)
            assert attempt["tcp_counters"]["Tcp.OutSegs"] == sum(
                placement["tcp_counters"][side]["Tcp.OutSegs"] for side in ("server", "client"))
            # None: a side's processes had all exited before its host read the window's end (a late watcher)
            assert attempt["server_cpu_s"] is not None and attempt["server_cpu_s"] > 0, attempt["server_cpu_s"]
            assert attempt["client_cpu_s"] is not None and attempt["client_cpu_s"] > 0, attempt["client_cpu_s"]
            # the client host reads its clients' scheduling at the window's edges; the server's host does not
            assert attempt["client_scheduling"]["voluntary_switches"] >= roundtrips
            assert attempt["server_scheduling"] is None
            assert attempt["sockets"]["server"]["sockets"] == 2 and attempt["sockets"]["client"]["sockets"] == 2
            # the payloads came back verified by the driver (a wrong byte fails the attempt)
            assert attempt["client_report"]["roundtrips"] == roundtrips
    assert not settled(cluster, baseline, 15)
    # each host's agent removed its folder when the run closed it (and an agent that starts removes those of
    # agents whose worker was killed); the worker closes it as the run ends, which a loaded host may see a moment
    # later (seen once two tests at a time)
    deadline = time.monotonic() + 10
    while set(Path(tempfile.gettempdir()).glob("pingpong-host-*")) - host_folders and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not set(Path(tempfile.gettempdir()).glob("pingpong-host-*")) - host_folders


@needs_namespaces
def test_client_processes_and_pairs_are_shared_by_the_client_hosts(cluster, tmp_path):
    done = subprocess.run(cluster.bench("--servers", "node-ws", "--clients", "node-ws", "--repeat", "1",
                                        "--pairs", "4", "--client-processes", "2", "--duration", "0.3",
                                        "--warmup", "0.1", *COUNTING, "--results-dir", str(tmp_path),
                                        "--format", "md"),
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Cluster {cluster.scheduler}: servers on tls://{cluster.lab.hosts['server'].address}:" in done.stdout
    assert "link eth0 (MTU 1500)" in done.stdout
    (attempt,) = [a for cell in load(tmp_path)["cells"] if not cell["skipped"] for a in cell["attempts"]]
    assert attempt["status"] == "ok", attempt["reason"]
    placement = attempt["placement"]
    hosts = {host.split("://")[1].rsplit(":", 1)[0] for host in placement["client_hosts"]}
    assert hosts == {cluster.lab.hosts["client"].address, cluster.lab.hosts["client2"].address}
    report = attempt["client_report"]
    assert report["client_processes"] == 2 and [p["pairs"] for p in report["per_process"]] == [2, 2]
    assert attempt["roundtrips"] == sum(p["roundtrips"] for p in report["per_process"])
    # both client hosts' counters, added up: two messages per roundtrip from the clients, whichever host (one host's
    # alone would be half of it). Each host reads its counters at the window's edges as it sees them (above), so
    # each of the 4 pairs may have a roundtrip's two messages counted on one side of an edge and not the other: 4
    # pairs x 2 edges x 2 messages (a loaded host once ran 10 roundtrips in the window, and sent 14 segments)
    segments = placement["tcp_counters"]["client"]["Tcp.OutSegs"]
    assert 1.5 * attempt["roundtrips"] - 16 <= segments <= 3.0 * attempt["roundtrips"] + 40


@needs_namespaces
def test_a_multi_process_server_runs_with_its_broker_on_the_server_host(cluster, tmp_path):
    """--workers 2 on a cluster: the server host's agent starts the Redis broker beside the server, reads its
    PUBLISH count and CPU over the window (interpolated from its samples) and the workers' counts; each of the four
    pairs, spread over two client hosts, has its roundtrips, latency and placement; nothing is left on any host."""
    if broker.unavailable_reason():
        pytest.skip(broker.unavailable_reason())
    baseline = cluster.cluster_pids()
    done = subprocess.run(cluster.bench("--servers", "node-ws-cluster", "--clients", "node-ws", "--workers", "2",
                                        "--pairs", "4", "--client-processes", "2", "--repeat", "1",
                                        "--duration", "1", "--warmup", "0.3", *COUNTING,
                                        "--results-dir", str(tmp_path), "--format", "json"),
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    (attempt,) = [a for cell in load(tmp_path)["cells"] if not cell["skipped"] for a in cell["attempts"]]
    assert attempt["status"] == "ok", attempt["reason"]
    workers = attempt["workers"]
    assert workers["count"] == 2 and workers["reported"] == 2 and len(workers["per_worker"]) == 2
    window = workers["broker"]["window"]
    pairs = workers["pairs"]
    assert len(pairs) == 4 and sum(pair["roundtrips"] for pair in pairs) == attempt["roundtrips"]
    assert all(pair["placement"] in ("local", "split") and pair["p50_ns"] > 0 for pair in pairs), pairs
    # only a split pair's messages are published, two per roundtrip of its; a local pair's never
    split = sum(pair["roundtrips"] for pair in pairs if pair["placement"] == "split")
    expected = 2 * split / attempt["roundtrips"]
    assert expected - 0.2 <= window["publishes_per_roundtrip"] <= expected + 0.2, (window, pairs)
    assert workers["published"] >= 2 * split and workers["local_pair_publishes"] == 0, workers
    assert not split or window["cpu_us_per_publish"] > 0
    assert not settled(cluster, baseline, 15)  # the broker and both workers too


@needs_namespaces
def test_a_worker_lost_mid_run_fails_its_attempt_and_the_run_completes(cluster, tmp_path):
    baseline = cluster.cluster_pids()
    worker_before = cluster.worker_process("client").pid
    # a client lives 0.7 s and more (warmup, window, its start and report); it is seen within 0.1 s of its start
    run = subprocess.Popen(cluster.bench("--servers", "node-ws", "--clients", "websockets,node-ws", "--repeat", "3",
                                         "--duration", "0.5", "--warmup", "0.2", *COUNTING,
                                         "--results-dir", str(tmp_path), "--format", "json"),
                           cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # a client process of a cell (not the floor's) is running on the client host: lose its worker then
        drivers = lambda: [p for p in cluster.lab.pids("client") - baseline["client"]  # noqa: E731
                           if is_websocket_client(safe_cmdline(p))]
        assert netns_lab.wait_until(lambda: bool(drivers()), 60, 0.05)
        os.kill(worker_before, signal.SIGKILL)
        _, stderr = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 1, stderr[-3000:]  # a cell failed; the run finished and saved
    attempts = [a for cell in load(tmp_path)["cells"] for a in cell["attempts"]]
    assert len(attempts) == 6
    lost = [a for a in attempts if a["status"] != "ok"]
    assert lost and all(a["reason"].startswith("cluster: ") for a in lost[:1]), [a["reason"] for a in lost]
    # the attempts after it ran on the other client host or on the restarted worker
    assert sum(a["status"] == "ok" for a in attempts) >= 4, ([(a["status"], a["reason"]) for a in attempts],
                                                             stderr[-3000:])
    netns_lab.wait_for_workers(cluster.lab, "h0", cluster.tls, cluster.scheduler, 3)
    # nothing the run started is left: only the cluster's own processes (the worker came back under its nanny)
    left = {host: pids - baseline[host] for host, pids in cluster.cluster_pids().items()}
    new_worker = cluster.worker_process("client").pid
    left["client"] -= {new_worker, *(p.pid for p in psutil.Process(new_worker).children(recursive=True))}
    assert not any(left.values()), described(left)


def is_websocket_client(cmdline: list[str]) -> bool:
    """A WebSocket client driver (a measured cell's), not the raw-TCP floor's."""
    return any(part.startswith("clients.") or part.endswith("ws_client.js") for part in cmdline)


def safe_cmdline(pid: int) -> list[str]:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


@needs_namespaces
@pytest.mark.parametrize("options", [("--servers", "sanic"), ("--servers", "node-ws-cluster", "--workers", "2")],
                         ids=["sanic", "workers-with-broker"])
def test_kill_9_of_the_orchestrator_leaves_no_process_on_any_host(cluster, tmp_path, options):
    """Killed mid-run, with a server on the server host (sanic, or two node:cluster workers and their Redis broker)
    and a client on a client host: the agents' lease runs out and they end everything they started."""
    if "--workers" in options and broker.unavailable_reason():
        pytest.skip(broker.unavailable_reason())
    netns_lab.wait_for_workers(cluster.lab, "h0", cluster.tls, cluster.scheduler, 3)
    baseline = cluster.cluster_pids()
    run = subprocess.Popen(cluster.bench(*options, "--clients", "websockets", "--repeat", "5", "--duration", "2",
                                         "--cluster-lease", str(LEASE_S), "--results-dir", str(tmp_path)),
                           cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = lambda: {host: pids - baseline[host] for host, pids in cluster.cluster_pids().items()}  # noqa
        # the server (sanic with its worker processes; or the primary, its workers and redis-server) on the server
        # host and a client on the client host
        assert netns_lab.wait_until(lambda: started()["server"] and any(
            is_websocket_client(safe_cmdline(p)) for p in started()["client"]), 60, 0.05)
        assert len(started()["server"]) >= 2
        if "--workers" in options:
            assert any(broker.REDIS_SERVER in " ".join(safe_cmdline(p)) for p in started()["server"]), \
                described(started())
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    left = settled(cluster, baseline, 30)  # the agents' lease (LEASE_S) runs out and they end what they started
    assert not left, described(left)


@needs_namespaces
def test_every_hosts_dask_process_runs_with_its_monitors_quieted(cluster):
    """The worker process Dask's nanny spawned on each host (and so the agent beside the measured processes) has
    the profiler off and the slower timers of QUIET_DASK, as the cluster commands set them."""
    for role in ("server", "client"):
        environment = cluster.worker_process(role).environ()
        assert {name: environment.get(name) for name in QUIET_DASK} == QUIET_DASK, role


@needs_namespaces
def test_a_mismatched_worker_and_a_stranger_certificate_are_refused(cluster, tmp_path):
    stranger = tmp_path / "stranger-tls"
    make_certificates(stranger)
    done = subprocess.run(["ip", "netns", "exec", cluster.lab.hosts["h0"].netns, sys.executable, "run_bench.py",
                           "--cluster", cluster.scheduler, "--cluster-tls", str(stranger), "--cluster-timeout", "5",
                           "--results-dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "cannot connect within 5 s" in one_error_line(done)
    # a worker from a checkout of another commit joins the cluster: the run is refused, naming it
    if not (ROOT / ".git").exists():
        pytest.skip("no git checkout to make another commit from")
    other = tmp_path / "other-checkout"
    subprocess.run(["git", "clone", "--quiet", "--shared", str(ROOT), str(other)], check=True)
    subprocess.run(["git", "-C", str(other), "-c", "user.name=test", "-c", "user.email=test@localhost", "commit",
                    "--quiet", "--allow-empty", "-m", "another commit"], check=True)
    stray = cluster.start_worker_from("client", other, "stray-host")
    try:
        netns_lab.wait_for_workers(cluster.lab, "h0", cluster.tls, cluster.scheduler, 4)
        done = subprocess.run(cluster.bench("--servers", "node-ws", "--clients", "node-ws", "--repeat", "1",
                                            "--results-dir", str(tmp_path)),
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        line = one_error_line(done)
        assert "differs from this checkout" in line and "commit" in line
    finally:
        cluster.lab.stop(stray, grace_s=0)  # no agent was ever placed on it: nothing to close gracefully
        cluster.lab.processes.remove(stray)


@needs_namespaces
def test_the_documented_commands_run_a_cluster(tmp_path):
    """docs/cluster.md's blocks as written, each on its host of a lab of its own, from an empty folder (nothing is
    imported from the current folder): the certificates, the scheduler, a server and a client worker, and the run.
    Only the lab's address stands for 10.0.0.1, and a short run of one cell for [any other options]. The run exits 0
    with its results, and SIGTERM stops each command with its Dask process."""
    (certificates,) = documented_commands("docs/cluster.md", "run_bench.py cluster-certs cluster-tls")
    (scheduler,) = documented_commands("docs/cluster.md", "run_bench.py cluster scheduler")
    workers = documented_commands("docs/cluster.md", "run_bench.py cluster worker")
    (run,) = documented_commands("docs/cluster.md", "run_bench.py --cluster tls://")
    token = uuid.uuid4().hex
    env = {TEST_TOKEN_ENV: token, "PYTHONPATH": ""}  # the commands put the checkout on Dask's path themselves
    lab = netns_lab.Lab(tag=f"pp{os.getpid() % 100000}d")
    started: dict[str, subprocess.Popen] = {}
    try:
        for host in ("h0", "server", "client"):
            lab.add_host(host)
        address = {"10.0.0.1": lab.hosts["h0"].address}
        done = subprocess.run(as_argv(certificates), cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        started["scheduler"] = lab.run("h0", as_argv(scheduler, address), tmp_path / "scheduler.log", env,
                                       cwd=tmp_path)
        for command in workers:
            role = "server" if "--role server" in command else "client"
            started[role] = lab.run(role, as_argv(command, address), tmp_path / f"{role}.log", env, cwd=tmp_path)
        assert set(started) == {"scheduler", "server", "client"}, workers
        options = ("--servers node-ws --clients node-ws --repeat 1 --duration 0.5 --warmup 0.2 --jit-warmup 0 "
                   "--no-figures --results-dir results")
        argv = as_argv(run, {**address, "[any other options]": options})
        scheduler_address = next(word for word in argv if word.startswith("tls://"))
        netns_lab.wait_for_workers(lab, "h0", tmp_path / "cluster-tls", scheduler_address, 2)
        done = subprocess.run(["ip", "netns", "exec", lab.hosts["h0"].netns, *argv], cwd=tmp_path,
                              capture_output=True, text=True, timeout=240, env={**os.environ, **env})
        logs = {name: (tmp_path / f"{name}.log").read_text()[-1500:] for name in started}
        assert done.returncode == 0, (done.stderr[-3000:], logs)
        results = load(tmp_path / "results")
        assert results["topology"]["scheduler"] == scheduler_address
        (attempt,) = [a for cell in results["cells"] if not cell["skipped"] for a in cell["attempts"]]
        assert attempt["status"] == "ok", attempt["reason"]
        assert attempt["placement"]["server_host"].startswith(f"tls://{lab.hosts['server'].address}:")
        assert attempt["placement"]["client_hosts"][0].startswith(f"tls://{lab.hosts['client'].address}:")
        for process in started.values():
            process.send_signal(signal.SIGTERM)  # the command alone: it stops its Dask process and reaps it
        codes = {name: process.wait(30) for name, process in started.items()}
        logs = {name: (tmp_path / f"{name}.log").read_text()[-1500:] for name in started}
        assert codes == {"scheduler": 130, "server": 130, "client": 130}, logs
        assert netns_lab.wait_until(lambda: not processes_carrying(token), 10), \
            [p.cmdline() for p in processes_carrying(token)]  # before the lab ends what is left in its namespaces
    finally:
        lab.close()
    assert netns_lab.wait_until(lambda: not processes_carrying(token), 10), \
        [p.cmdline() for p in processes_carrying(token)]


def test_only_an_unretrieved_timeout_is_dropped_from_asyncios_log():
    """The filter a cluster connection puts on asyncio's logger drops its "never retrieved" record for a
    TimeoutError, and keeps the same record for any other exception and every other record."""
    import logging

    from pingpong.harness.cluster.connection import UnretrievedTimeouts

    def record(message: str, exception: BaseException | None) -> logging.LogRecord:
        info = (type(exception), exception, None) if exception else None
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message, None, info)

    never = "Future exception was never retrieved\nfuture: <Future finished exception=TimeoutError('Timeout')>"
    assert not UnretrievedTimeouts().filter(record(never, TimeoutError("Timeout")))
    assert UnretrievedTimeouts().filter(record(never, ConnectionError("reset")))
    assert UnretrievedTimeouts().filter(record("Task was destroyed but it is pending!", TimeoutError("Timeout")))
