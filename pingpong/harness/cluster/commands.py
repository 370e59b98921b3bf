"""`run_bench.py cluster scheduler|worker`: a cluster's Dask processes, started the way a --cluster run needs them.

Each command checks its input (one line and exit 2 when it cannot work), then runs the Dask process as a child in
the foreground until Ctrl-C or SIGTERM, which it forwards to the child before reaping it:

- the child imports the suite's `pingpong` package from this checkout (PYTHONPATH names it), as the scheduler must
  to deserialize the suite's actor and the worker to run it, whichever folder the command is started from;
- mutual TLS with the files `run_bench.py cluster-certs DIR` writes, and the tls protocol only;
- a worker offers its role as a resource (server=1 or client=1) and runs one worker process under a nanny (which
  restarts it if it dies), with no dashboard;
- Dask's own monitors quieted (QUIET_DASK): its profiler off, its other timers at 1-5 s.

The child runs in a session of its own: a Ctrl-C at the terminal reaches only this process, which stops the child
with SIGTERM and then SIGKILLs whatever is left of the child's process group. If this process is killed outright,
the guardian (guardian.py) ends that group. Dask is imported only by the child.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from pingpong.harness.settings.catalog import PROJECT_ROOT
from pingpong.harness.settings.usage import UsageError
from pingpong.harness.system import guardian, processes

DEFAULT_PORT = 8786
ROLES = ("server", "client")
WORKER_THREADS = 4  # the agent's calls and the lease renewals run side by side
STOP_GRACE_S = 8.0  # after SIGTERM, before the child's group is killed (a nanny closes its worker in 1-3 s)
# Dask's own monitors, quieted on every host of a cluster: in the worker's process they ran a sampling profiler every
# 10 ms and an event-loop tick every 20 ms, the memory monitor every 100 ms and the system monitor every 500 ms,
# beside the servers and clients measured on that host. Idle, a test lab's scheduler and three workers (each under
# its nanny) took about a tenth of the CPU with these that they took with Dask's defaults. No run reads them: the
# agent's calls are actor calls on one host each (nothing to steal), and the run's progress is its own. A setting the
# user exported (DASK_...) wins over these.
QUIET_DASK = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__GIL__ENABLED": "False",
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
    "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False",
}
HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
DESCRIPTION = ("Start a cluster's Dask scheduler, or a worker on a host, for run_bench.py --cluster "
               "(docs/cluster.md). Each runs in the foreground until Ctrl-C or SIGTERM.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_subparsers(dest="cluster_command", metavar="PROCESS", required=True)
    scheduler = which.add_parser(
        "scheduler", help="the cluster's scheduler, on a host every worker and the orchestrator reach",
        description="Run the cluster's Dask scheduler with mutual TLS, until Ctrl-C or SIGTERM.")
    scheduler.add_argument("--host", required=True, metavar="ADDR",
                           help="the address to listen on: one of this host's, that the other hosts reach")
    scheduler.add_argument("--port", type=port_number, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    scheduler.add_argument("--tls", type=Path, required=True, metavar="DIR",
                           help="the folder with ca.pem, scheduler.pem and scheduler-key.pem (cluster-certs)")
    worker = which.add_parser(
        "worker", help="a worker on a host that runs servers (--role server) or clients (--role client)",
        description="Run one Dask worker (under its nanny) with mutual TLS, offering the role's resource, until "
                    "Ctrl-C or SIGTERM.")
    worker.add_argument("scheduler", metavar="tls://ADDR:PORT", help="the scheduler's address")
    worker.add_argument("--role", required=True, choices=ROLES,
                        help="server: this host runs the servers (resource server=1); client: the clients (client=1)")
    worker.add_argument("--tls", type=Path, required=True, metavar="DIR",
                        help="the folder with ca.pem, worker.pem and worker-key.pem (cluster-certs)")
    worker.add_argument("--host", metavar="ADDR",
                        help="the address to listen on (default: the one that routes to the scheduler)")


def port_number(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return port


def run(options: argparse.Namespace) -> int:
    if options.cluster_command == "scheduler":
        argv, what = scheduler_command(options.host, options.port, options.tls)
    else:
        argv, what = worker_command(options.scheduler, options.role, options.tls, options.host)
    return supervise(argv, what)


def scheduler_command(host: str, port: int, tls: Path) -> tuple[list[str], str]:
    """The scheduler's command line, once its input is checked (UsageError: why not)."""
    files = tls_files(tls, "scheduler")
    check_listen_address("--host", host, port)
    argv = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--protocol", "tls", "--host", host,
            "--port", str(port), "--no-dashboard", *files]
    return argv, f"scheduler tls://{bracketed(host)}:{port}"


def worker_command(scheduler: str, role: str, tls: Path, host: str | None) -> tuple[list[str], str]:
    """A worker's command line, once its input is checked (UsageError: why not)."""
    if role not in ROLES:
        raise UsageError(f"--role {role!r}: expected server or client")
    parts = urlsplit(scheduler)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "tls" or not parts.hostname or not port or parts.path or address_problem(parts.hostname):
        raise UsageError(f"{scheduler!r}: expected the scheduler's address as tls://ADDR:PORT")
    files = tls_files(tls, "worker")
    if host is not None:
        check_listen_address("--host", host, 0)
    argv = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--protocol", "tls",
            "--resources", f"{role}=1", "--nworkers", "1", "--nthreads", str(WORKER_THREADS), "--no-dashboard",
            *(["--host", host] if host else []), *files]
    return argv, f"{role} worker for {scheduler}"


def tls_files(folder: Path, role: str) -> list[str]:
    """Dask's TLS options for role, from the files cluster-certs wrote (absolute: the child may run elsewhere)."""
    paths = [folder / "ca.pem", folder / f"{role}.pem", folder / f"{role}-key.pem"]
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        raise UsageError(f"--tls {folder}: missing {', '.join(missing)} (run_bench.py cluster-certs {folder} makes "
                         f"them; docs/cluster.md)")
    ca, certificate, key = (str(path.resolve()) for path in paths)
    return ["--tls-ca-file", ca, "--tls-cert", certificate, "--tls-key", key]


def address_problem(host: str) -> str | None:
    """Why host is not an IP address or a host name, or None."""
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if re.fullmatch(r"[0-9.]+", host) or not HOSTNAME.fullmatch(host) or len(host) > 253:
        return f"{host!r} is not an IP address or a host name"
    return None


def check_listen_address(option: str, host: str, port: int) -> None:
    """Refuse an address this host cannot listen on (not one of its own, a port in use), before Dask says it in
    a traceback."""
    problem = address_problem(host)
    if problem:
        raise UsageError(f"{option} {problem}")
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UsageError(f"{option} {host}: cannot resolve it ({exc.strerror})") from None
    family, kind, protocol, _, address = found[0]
    with socket.socket(family, kind, protocol) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            where = f"{bracketed(host)}:{port}" if port else host
            raise UsageError(f"{option} {host}: cannot listen on {where} here ({exc.strerror})") from None


def bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def checkout_on_path(existing: str | None) -> str:
    """PYTHONPATH with this checkout first: the Dask process (and the guardian) import the suite from it."""
    parts = [part for part in (existing or "").split(os.pathsep) if part and part != str(PROJECT_ROOT)]
    return os.pathsep.join([str(PROJECT_ROOT), *parts])


def supervise(argv: list[str], what: str) -> int:
    """Run argv in a session of its own until it exits, or until a stopping signal here: then SIGTERM it, wait,
    SIGKILL what is left of its group and reap it. The child's exit code (128 + N for signal N), or
    KeyboardInterrupt (exit code 130 from run_bench.py) when stopped."""
    os.environ["PYTHONPATH"] = checkout_on_path(os.environ.get("PYTHONPATH"))  # the child's, and the guardian's
    for name, value in QUIET_DASK.items():
        os.environ.setdefault(name, value)
    child: subprocess.Popen | None = None
    try:
        with processes.interrupts_deferred():  # a signal now would leave a child nobody knows of
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
            guardian.started(child.pid)  # ends the child's group if this process is killed outright
        print(f"run_bench.py cluster: {what} (dask, PID {child.pid}); Ctrl-C or SIGTERM stops it",
              file=sys.stderr, flush=True)
        code = child.wait()
    finally:
        if child is not None:
            with processes.interrupts_deferred():
                stop(child)
    if code != 0:
        print(f"run_bench.py cluster: the {what} exited with code {code}", file=sys.stderr)
    return code if code >= 0 else 128 - code


def stop(child: subprocess.Popen) -> None:
    """SIGTERM the child (Dask closes its worker or scheduler), then SIGKILL its group's rest; reap it."""
    if child.poll() is None:
        try:
            child.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            processes.wait(child, STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            print(f"run_bench.py cluster: PID {child.pid} still running {STOP_GRACE_S:g} s after SIGTERM: killing "
                  f"its process group", file=sys.stderr, flush=True)
    processes.kill_group(child.pid)
    try:
        processes.wait(child, processes.STOP_GRACE_S)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        return
    if processes.group_gone(child.pid) or not processes.group_members(child.pid):
        guardian.reaped(child.pid)
