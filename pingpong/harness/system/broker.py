"""The Redis broker that joins a multi-worker server's rooms across its processes (--workers N > 1): Debian's
redis-server, started for the server it serves, on a unix socket in that server's work folder (no port to race
for, nothing reachable from the network), with persistence off; probed with PING until it answers, never slept
for; its version, its CPU time and its own count of PUBLISH calls read at the measured window's edges; stopped and
reaped like any server process (processes.start puts it in a process group of its own and tells the guardian, so a
Ctrl-C or a kill -9 of the orchestrator leaves no redis-server behind).

The orchestrator speaks to it in RESP over the socket with two commands (PING, INFO commandstats): no client
library in the orchestrator; the servers use the official clients (redis-py, node-redis).
"""

from __future__ import annotations

import functools
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from pingpong.harness.system import cpu, processes, work_dirs

REDIS_SERVER = "redis-server"
READY_TIMEOUT_S = 10.0
PROBE_INTERVAL_S = 0.005
REPLY_TIMEOUT_S = 2.0
INSTALL_HINT = "apt-get install redis-server"


@functools.cache
def redis_server_path() -> str | None:
    return shutil.which(REDIS_SERVER)


def unavailable_reason() -> str | None:
    """Why no broker can be started here (one line), or None."""
    if redis_server_path() is None:
        return f"{REDIS_SERVER} not found on PATH ({INSTALL_HINT})"
    return None


@functools.cache
def redis_version() -> str | None:
    """The version redis-server reports ('7.0.15'), from `redis-server --version`."""
    path = redis_server_path()
    if path is None:
        return None
    try:
        output = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for word in output.split():
        if word.startswith("v="):
            return word[2:]
    return output.strip() or None


class BrokerNotReady(Exception):
    pass


def command(socket_path: str, *words: str, timeout_s: float = REPLY_TIMEOUT_S) -> bytes:
    """Send one command in RESP on a connection of its own and return its reply's payload (a simple or a bulk
    string); raise on an error."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(timeout_s)
        connection.connect(socket_path)
        return exchange(connection, *words)


def exchange(connection: socket.socket, *words: str) -> bytes:
    """One command and its reply's payload on an open connection (system/broker.py's two commands only: their
    replies are a simple or a bulk string)."""
    request = f"*{len(words)}\r\n".encode() + b"".join(
        f"${len(word.encode())}\r\n".encode() + word.encode() + b"\r\n" for word in words)
    connection.sendall(request)
    reply = b""
    while b"\r\n" not in reply:
        chunk = connection.recv(65536)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        reply += chunk
    header, _, rest = reply.partition(b"\r\n")
    if header.startswith(b"+"):
        return header[1:]
    if header.startswith(b"-"):
        raise ConnectionError(header[1:].decode(errors="replace"))
    if not header.startswith(b"$"):
        raise ConnectionError(f"unexpected reply {header[:40]!r}")
    length = int(header[1:])
    while len(rest) < length + 2:
        chunk = connection.recv(65536)
        if not chunk:
            raise ConnectionError("the broker closed the connection mid-reply")
        rest += chunk
    return rest[:length]


def parse_command_stat(commandstats: bytes, command_name: str, field_name: str) -> int:
    """A field of one command's line in an `INFO commandstats` reply (`cmdstat_publish:calls=3,usec=40,...`): 0
    before the command's first call."""
    for line in commandstats.decode(errors="replace").splitlines():
        if line.startswith(f"cmdstat_{command_name}:"):
            for field in line.split(":", 1)[1].split(","):
                name, _, value = field.partition("=")
                if name == field_name:
                    return int(value)
    return 0


def parse_publish_calls(commandstats: bytes) -> int:
    """calls of cmdstat_publish in an `INFO commandstats` reply (0 before the first PUBLISH)."""
    return parse_command_stat(commandstats, "publish", "calls")


@dataclass(frozen=True)
class BrokerSample:
    """The broker at one edge of a window: its PUBLISH calls so far and its CPU time (ns), and the µs it has spent
    running INFO (its own count): the readings' cost, which window_figures leaves out of its CPU."""

    publish_calls: int
    cpu_ns: int
    info_us: int = 0

    @property
    def cpu_ns_beyond_readings(self) -> int:
        return self.cpu_ns - 1000 * self.info_us


@dataclass
class Broker:
    """A running redis-server: its process (stopped with processes.stop), its socket and its version."""

    process: processes.ManagedProcess
    socket_path: Path
    version: str | None
    ready_after_s: float | None = None
    # the connection sample() reads on, kept open: measured here, a reading on a connection of its own cost the
    # broker 17 µs of CPU, one on this connection 10 µs, of which INFO's own usec count (left out of its CPU) has 5
    _reader: socket.socket | None = None

    @property
    def url(self) -> str:
        """What the servers get as --broker."""
        return f"unix://{self.socket_path}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def publish_calls(self) -> int:
        return parse_publish_calls(command(str(self.socket_path), "INFO", "commandstats"))

    def sample(self) -> BrokerSample | None:
        """Its PUBLISH calls and CPU time now; None when it cannot be read (it has exited)."""
        try:
            if self._reader is None:
                self._reader = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._reader.settimeout(REPLY_TIMEOUT_S)
                self._reader.connect(str(self.socket_path))
            stats = exchange(self._reader, "INFO", "commandstats")
        except OSError:
            self._close_reader()
            return None
        cpu_ns = sum(cpu.sample([self.process.pid]).values())
        return BrokerSample(parse_publish_calls(stats), cpu_ns, parse_command_stat(stats, "info", "usec"))

    def record(self) -> dict[str, object]:
        return {"program": REDIS_SERVER, "version": self.version, "socket": "unix",
                "ready_after_s": self.ready_after_s, "pid": self.process.pid}

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def stop(self) -> int | None:
        """Stop and reap it (its process group), remove its socket's folder; its exit code."""
        self._close_reader()
        try:
            return processes.stop(self.process)
        finally:
            shutil.rmtree(self.socket_path.parent, ignore_errors=True)


def start_broker(work_dir: Path, cpus: set[int] | None = None,
                 ready_timeout_s: float = READY_TIMEOUT_S) -> Broker:
    """Start redis-server on a unix socket, persistence off (no TCP port: --port 0), and wait until it answers PING.
    Its output goes to work_dir; its socket to a short folder of its own (a socket's path has at most 107 bytes).

    Raises BrokerNotReady (with its stderr's tail) when it does not within ready_timeout_s; it is stopped then.
    """
    path = redis_server_path()
    if path is None:
        raise BrokerNotReady(unavailable_reason())
    socket_path = work_dirs.make("pingpong-broker-") / "redis.sock"
    argv = [path, "--port", "0", "--unixsocket", str(socket_path), "--unixsocketperm", "700",
            "--save", "", "--appendonly", "no", "--dir", str(socket_path.parent), "--daemonize", "no",
            "--loglevel", "warning", "--logfile", ""]
    began = time.monotonic()
    try:
        process = processes.start("broker", argv, work_dir, work_dir, cpus=cpus)
    except BaseException:
        shutil.rmtree(socket_path.parent, ignore_errors=True)
        raise
    broker = Broker(process, socket_path, redis_version())
    try:
        while True:
            try:
                if command(str(socket_path), "PING", timeout_s=0.5) == b"PONG":
                    break
            except OSError:
                pass
            if process.popen.poll() is not None:
                raise BrokerNotReady(f"{REDIS_SERVER} exited with code {process.popen.returncode}: "
                                     f"{process.stderr_tail(5)}")
            if time.monotonic() - began > ready_timeout_s:
                raise BrokerNotReady(f"{REDIS_SERVER} did not answer PING within {ready_timeout_s:g} s: "
                                     f"{process.stderr_tail(5)}")
            time.sleep(PROBE_INTERVAL_S)
    except BaseException:
        with processes.interrupts_deferred():
            broker.stop()
        raise
    broker.ready_after_s = round(time.monotonic() - began, 4)
    return broker


def window_figures(before: BrokerSample | None, after: BrokerSample | None) -> dict[str, object] | None:
    """What the broker did over a window: PUBLISH calls, CPU seconds (beyond the time it spent answering the INFO
    readings: 0 or one of them here, one every 20 ms on a cluster's server host), CPU µs per published message."""
    if before is None or after is None:
        return None
    return publish_figures(after.publish_calls - before.publish_calls,
                           (after.cpu_ns_beyond_readings - before.cpu_ns_beyond_readings) / 1e9,
                           (after.cpu_ns - before.cpu_ns) / 1e9)


def publish_figures(publishes: int, cpu_beyond_readings_s: float, cpu_with_readings_s: float | None) -> dict:
    """A window's broker figures from its PUBLISH calls and CPU seconds, without and with the INFO readings. Pure.

    INFO's usec count is the broker's wall time in the command: on a loaded host a reading preempted midway counts
    more than the CPU it took, and the readings' time can exceed the whole CPU (-1,285 µs a publish, three tests at
    once, 2026-11-29). Then the CPU is given with the readings in it, an upper bound, and said so."""
    included = cpu_beyond_readings_s < 0 and cpu_with_readings_s is not None
    cpu_s = cpu_with_readings_s if included else cpu_beyond_readings_s
    return {"publishes": publishes, "cpu_s": round(cpu_s, 6),
            "cpu_us_per_publish": round(cpu_s * 1e6 / publishes, 3) if publishes else None,
            "cpu_includes_readings": included}
