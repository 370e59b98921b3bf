"""--cluster: servers and clients on other hosts (the Dask connection is connection.py, each host's agent
host_agent.py). ClusterMeasurer is the engine's Measurer there, so rounds, shuffling, precision and the results are the
same as in a local run: only where the processes run changes. Its attempts use the same plan (measure/attempt_plan.py)
and the same judge (measure/judge.py) as this machine's, on the typed records the agents send back.

Dask is imported only by connection.py, and these modules only with --cluster."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pingpong.harness.analysis.workers import attempt_workers_record
from pingpong.harness.cluster import figures as cluster_figures
from pingpong.harness.cluster.connection import (CALL_TIMEOUT_S, READY_PROBE_INTERVAL_S, Cluster, ClusterError, Host,
                                                 same_host)
from pingpong.harness.measure import judge
from pingpong.harness.measure.attempt_plan import (ROOM_PROBE_TIMEOUT_S, ClientShare, barrier_limit_s, client_limit_s,
                                                   client_shares, pair_rooms, process_name, room_path,
                                                   room_probe_path, with_jit_warmup)
from pingpong.harness.measure.boundary import ClientRun, Outcome, ServerFacts, Turn, WindowSamples, attempt_from, failed
from pingpong.harness.results.records import Attempt
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.system import kernel_signals, scheduling

GONE_EXIT_CODE = -9  # a server whose host is gone: the guardian there ended it


@dataclass
class RemoteServer:
    """A server started on a server host for a round of clients: the engine's ServerHandle for a cluster."""

    host: Host | None  # None: it could not be started
    pid: int
    base_url: str
    port: int
    cpus: list[int] | None
    runtime: str | None = None  # the server implementation's runtime
    ready_after_s: float | None = None
    problem: Outcome | None = None
    clients_started: int = 0
    room_probes: int = 0
    server_info: dict[str, Any] | None = None
    known_exit_code: int | None = None  # once it has been seen exited (or its host gone)
    final_stderr_tail: str | None = None  # once it has been stopped
    # --workers: its worker processes, whether they write their counts (the manifest's "workers" feature), the
    # broker its host started for it (N > 1: its record), and the workers' final counts once it has been stopped
    workers: int = 1
    worker_stats: bool = False
    broker: dict[str, Any] | None = None
    final_worker_counts: list[dict[str, Any]] | None = None

    def exit_code(self) -> int | None:
        if self.known_exit_code is None:
            if self.host is None:
                self.known_exit_code = GONE_EXIT_CODE
                return self.known_exit_code
            try:
                self.known_exit_code = self.host.call("server_status", self.pid, timeout=10)["returncode"]
            except Exception:  # its host is gone, and the server with it (the guardian there ended it)
                self.known_exit_code = GONE_EXIT_CODE
        return self.known_exit_code

    def alive(self) -> bool:
        return self.exit_code() is None

    def stderr_tail(self) -> str:
        if self.final_stderr_tail is not None:
            return self.final_stderr_tail
        try:
            return self.host.call("server_status", self.pid, timeout=10)["stderr_tail"]
        except Exception as exc:
            return f"(its host is unreachable: {type(exc).__name__})"

    def facts(self) -> ServerFacts:
        return ServerFacts(ready_after_s=self.ready_after_s, info=self.server_info)

    def turn(self, repeat: int, started_at: str) -> Turn:
        return Turn(repeat=repeat, started_at=started_at, port=self.port, server_pid=self.pid,
                    server_cpus=self.cpus, client_cpus=None)


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
            return RemoteServer(None, 0, "", 0, None, server.runtime, known_exit_code=GONE_EXIT_CODE,
                                problem=failed("error", cluster_reason(exc)))
        started = RemoteServer(host, launched["pid"], launched["base_url"], launched["port"], launched["cpus"],
                               server.runtime, workers=launched.get("workers", 1),
                               worker_stats=bool(launched.get("worker_stats")), broker=launched.get("broker"))
        try:
            started.problem = self._check(started, settings)
        except Exception as exc:
            self._stale = True
            started.problem = failed("error", cluster_reason(exc))
        return started

    def _check(self, started: RemoteServer, settings: CellSettings) -> Outcome | None:
        """Readiness and verification from a client host, over the real path; the port's owner on the server's."""
        prober = self.client_hosts(started.host)[0]
        began = time.monotonic()
        last = "no attempt made"
        while True:
            code = started.exit_code()
            if code is not None:
                return failed("not-ready", f"server exited with code {code} before accepting a connection from "
                                           f"{prober.address}")
            last = prober.call("handshake", started.base_url, "/__readiness_probe__", 2.0)
            if last is None:
                break
            if time.monotonic() - began >= settings.ready_timeout_s:
                return failed("not-ready", f"no handshake from {prober.address} within "
                                           f"{settings.ready_timeout_s:g} s (last attempt: {last})")
            time.sleep(READY_PROBE_INTERVAL_S)
        started.ready_after_s = round(time.monotonic() - began, 4)
        if started.worker_stats:  # every worker serving (the first handshake shows only one: measure/server.py)
            problem = started.host.call("wait_for_workers", started.pid, settings.ready_timeout_s,
                                        timeout=CALL_TIMEOUT_S + settings.ready_timeout_s)
            if problem:
                return failed("not-ready", problem)
        conflict = started.host.call("port_check", started.pid, started.port)
        if conflict:
            return failed("port-conflict", conflict)
        problem = prober.call("verify_relay", started.base_url, settings.relay_silence_s)
        if problem:
            return failed("verification-failed", problem, ServerFacts(ready_after_s=started.ready_after_s))
        started.server_info = started.host.call("server_info", started.pid)
        return None

    def stop(self, started: RemoteServer) -> int | None:
        if started.host is None:
            return GONE_EXIT_CODE
        try:
            stopped = started.host.call("stop_server", started.pid)
        except Exception as exc:
            self._stale = True
            started.final_stderr_tail = cluster_reason(exc)
            return GONE_EXIT_CODE
        started.final_stderr_tail = stopped["stderr_tail"]
        started.final_worker_counts = stopped.get("worker_counts") or []
        return stopped["exit_code"]

    def fresh_attempt(self, server: Implementation, client: Implementation, settings: CellSettings,
                      round_number: int) -> Attempt:
        """An attempt on a server started for it; a multi-process server's attempt records its workers and broker
        as a local one does (analysis/workers.attempt_workers_record), read on the server's host."""
        started = self.start(server, settings, Path("."))
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            outcome = self._outcome(started, client, settings, round_number)
        finally:
            code = self.stop(started)
        attempt = attempt_from(started.turn(round_number, started_at), outcome, code)
        if not started.worker_stats or started.final_worker_counts is None:
            return attempt
        rooms = (pair_rooms(settings, round_number, max(1, started.clients_started))
                 if settings.workload == "pingpong" and settings.rate is None else None)
        return replace(attempt, workers=attempt_workers_record(started.workers, started.broker,
                                                               started.final_worker_counts, outcome, rooms))

    def attempt_on(self, started: RemoteServer, client: Implementation, settings: CellSettings,
                   round_number: int) -> Attempt:
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return attempt_from(started.turn(round_number, started_at),
                            self._outcome(started, client, settings, round_number))

    def _outcome(self, started: RemoteServer, client: Implementation, settings: CellSettings,
                 round_number: int) -> Outcome:
        try:
            self._ensure_agents()  # a client host lost in the previous attempt: its replacement, or the others
            return started.problem or self._measure(started, client, settings, round_number,
                                                    self.client_hosts(started.host))
        except Exception as exc:  # a lost worker, a timed-out call: this attempt fails, the run goes on
            self._stale = True
            return failed("error", cluster_reason(exc))

    def _measure(self, started: RemoteServer, client: Implementation, settings: CellSettings, repeat: int,
                 client_hosts: list[Host]) -> Outcome:
        server_host = started.host
        prober = client_hosts[0]
        code = started.exit_code()
        if code is not None:
            return failed("server-crashed", f"the server exited with code {code} before this attempt")
        started.room_probes += 1
        problem = prober.call("handshake", started.base_url, room_probe_path(started.room_probes),
                              ROOM_PROBE_TIMEOUT_S)
        if problem:
            return failed("not-ready", f"room probe before the client (from {prober.address}): {problem}")
        started.clients_started += 1
        number = started.clients_started
        settings = with_jit_warmup(settings, client.runtime, started.runtime, number)
        shares = client_shares(settings)
        placement = spread_shares(shares, len(client_hosts), settings.workload)
        used = [(host, indexes) for host, indexes in zip(client_hosts, placement) if indexes]
        attempt_id = f"attempt-{uuid.uuid4().hex[:12]}"
        server = started.facts()
        server_host.call("begin_sampling", started.pid)
        began_hosts: list[Host] = []
        try:
            with ThreadPoolExecutor(len(used)) as pool:
                futures = []
                for host, indexes in used:
                    rooms = [room_path(repeat, number, index, len(shares), settings.workload) for index in indexes]
                    names = [process_name(index, len(shares), number) for index in indexes]
                    began_hosts.append(host)
                    futures.append(pool.submit(host.call, "start_clients", attempt_id, client, settings,
                                               started.base_url, rooms, [shares[i] for i in indexes], names,
                                               timeout=CALL_TIMEOUT_S + barrier_limit_s(settings)))
                ready = [future.result() for future in futures]
            failures = [(host, indexes, answer) for (host, indexes), answer in zip(used, ready) if answer]
            if failures:
                return self._not_started(started, settings, failures, server)
            offsets = self.cluster.clock_offsets([server_host] + [host for host, _ in used])
            go_at = {host.address: host.call("go", attempt_id) for host, _ in used}
            server_sockets = server_host.call("server_sockets", started.pid, started.port)
            limit_s = client_limit_s(settings)
            with ThreadPoolExecutor(len(used)) as pool:
                finished = list(pool.map(lambda pair: pair[0].call("finish_clients", attempt_id, limit_s,
                                                                   timeout=limit_s + CALL_TIMEOUT_S), used))
            began_hosts = []
        finally:
            for host in began_hosts:
                try:
                    host.call("abandon_clients", attempt_id, timeout=15)
                except Exception:
                    pass
            sampled = server_host.call("end_sampling", started.pid)
        return self._judge(started, settings, shares, used, finished, sampled, offsets, go_at, server_sockets, server)

    def _not_started(self, started: RemoteServer, settings: CellSettings,
                     failures: list[tuple[Host, list[int], dict[str, Any]]], server: ServerFacts) -> Outcome:
        """The first host whose clients did not all get ready for the go: the same outcome as on this machine."""
        host, indexes, answer = failures[0]
        where = f" on {host.address}"
        if "timeout" in answer:
            timeout = answer["timeout"]
            return judge.barrier_timed_out(timeout["ready"], timeout["processes"], barrier_limit_s(settings),
                                           timeout["tails"], None, server, where)
        ended = ClientRun.from_dict(answer["ended"])
        return judge.ended_before_release(replace(ended, index=indexes[ended.index]), started.exit_code(), None,
                                          server, where)

    def _judge(self, started: RemoteServer, settings: CellSettings, shares: list[ClientShare],
               used: list[tuple[Host, list[int]]], finished: list[dict[str, Any]], sampled: dict[str, Any],
               offsets: dict[str, dict[str, int]], go_at: dict[str, int], server_sockets: dict[str, Any],
               server: ServerFacts) -> Outcome:
        # the processes in share order, as a local run lists them; one that never ended counts as killed
        runs: dict[int, ClientRun] = {}
        for (host, indexes), answer in zip(used, finished):
            for run in map(ClientRun.from_dict, answer["processes"]):
                runs[indexes[run.index]] = replace(run, index=indexes[run.index], exit_code=(
                    GONE_EXIT_CODE if run.exit_code is None else run.exit_code))
        ordered = [runs[index] for index in sorted(runs)]
        timed_out = [(host, indexes[answer["timed_out"]]) for (host, indexes), answer in zip(used, finished)
                     if answer["timed_out"] is not None]
        if timed_out:
            host, index = timed_out[0]
            return judge.client_timed_out(runs[index], len(shares), client_limit_s(settings), None, server,
                                          f" on {host.address}")
        windows = [WindowSamples.from_dict(answer["window"]) for answer in finished]
        joined, placement = join_windows(windows, [host for host, _ in used], sampled, offsets, started.host,
                                         server_sockets)
        placement["go_wall_ns"] = go_at
        outcome = judge.judge_attempt(ordered, started.exit_code(), joined, settings, server)
        return replace(outcome, placement=placement)


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


def join_windows(windows: list[WindowSamples], hosts: list[Host], sampled: dict[str, Any],
                 offsets: dict[str, dict[str, int]], server_host: Host,
                 server_sockets: dict[str, Any]) -> tuple[WindowSamples, dict[str, Any]]:
    """The attempt's window from every client host's, and the server's figures over it."""
    starts = [cluster_figures.translate(w.start_wall_ns, offsets[h.address]["offset_ns"], 0)
              for w, h in zip(windows, hosts) if w.start_wall_ns is not None]
    ends = [cluster_figures.translate(w.end_wall_ns, offsets[h.address]["offset_ns"], 0)
            for w, h in zip(windows, hosts) if w.end_wall_ns is not None]
    server_offset = offsets[server_host.address]["offset_ns"]
    figures = {"cpu_s": None, "tcp_counters": None, "covered": False}
    broker = None
    if starts and ends and sampled["samples"]:
        start, end = max(starts), min(ends)
        figures = cluster_figures.server_window(sampled["samples"], start + server_offset, end + server_offset)
        broker = cluster_figures.broker_window(sampled.get("broker_samples") or [], start + server_offset,
                                               end + server_offset)
    client_counters = [w.tcp_counters for w in windows]
    shared = all(same_host(server_host.identity, h.identity) for h in hosts)
    client_cpu = [w.client_cpu_s for w in windows]
    client_sockets = [(w.sockets or {}).get("client") for w in windows]
    client_sockets = [reading for reading in client_sockets if reading]
    sockets = {"server": server_sockets,
               "client": kernel_signals.merge_socket_readings(client_sockets,
                                                              any(r.get("forced") for r in client_sockets))}
    joined = WindowSamples(
        cpu_source=windows[0].cpu_source,
        server_cpu_s=figures["cpu_s"],
        client_cpu_s=sum(client_cpu) if None not in client_cpu else None,
        client_minor_faults=(None if any(w.client_minor_faults is None for w in windows)
                             else sum(w.client_minor_faults for w in windows)),
        # each client host's own reading, added up; the server's host samples its CPU every 20 ms without them
        client_scheduling=scheduling.combined([w.client_scheduling for w in windows]),
        spread=windows[0].spread if len(windows) == 1 else None,
        wall_s=(min(ends) - max(starts)) / 1e9 if starts and ends else None,
        server_peak_rss_bytes=sampled.get("peak_rss_bytes"),
        broker=broker,
        # one host's counters when every side shares its network; else every side's added up, as one host would see
        tcp_counters=client_counters[0] if shared else cluster_figures.summed_counters(figures["tcp_counters"],
                                                                                      *client_counters),
        sockets=sockets,
        sampling_s=max((w.sampling_s or 0) for w in windows))
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
