"""Servers under abuse: does a well-behaved pair keep its ping-pong going while a rogue client misbehaves?

`python run_bench.py abuse [--servers a,b]` starts each server, runs every abuse against it in turn while a pair
in another room plays ping-pong, and prints a Markdown table (JSON with --json). Each abuse is bounded in time and
bytes, and only ever talks to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import struct
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from websockets.sync.client import connect

from pingpong.harness.measure import probe
from pingpong.harness.settings.manifest import load_manifest, resolve_command
from pingpong.harness.system import processes

ROOT = Path(__file__).resolve().parents[3]  # the checkout: pingpong/harness/commands/abuse.py
PHASE_S = 1.0  # the pair is counted for this long before and after each abuse
FLOOD_S = 2.0
FLOOD_MAX_BYTES = 64 * 2**20
FLOOD_FRAME_BYTES = 64 * 1024
UNDISTURBED_SHARE = 0.5  # at half of 'before' or more, a phase counts as undisturbed (informational only)


def handshake(port: int, path: str) -> socket.socket:
    """A raw TCP connection that has completed a WebSocket opening handshake (no library in the way)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    response = b""
    while b"\r\n\r\n" not in response:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("connection closed during the handshake")
        response += chunk
    if not response.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(f"handshake refused: {response.splitlines()[0]!r}")
    return sock


def frame_header(opcode: int, length: int, masked: bool = True, fin: bool = True) -> bytes:
    first = (0x80 if fin else 0) | opcode
    mask_bit = 0x80 if masked else 0
    if length < 126:
        header = struct.pack("!BB", first, mask_bit | length)
    elif length < 2**16:
        header = struct.pack("!BBH", first, mask_bit | 126, length)
    else:
        header = struct.pack("!BBQ", first, mask_bit | 127, length)
    return header + (b"\x00\x00\x00\x00" if masked else b"")  # a zero mask leaves the payload as is


def _close_abruptly(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, no FIN
    sock.close()


def abuse_disconnect_mid_frame(port: int) -> None:
    sock = handshake(port, "/rogue")
    sock.sendall(frame_header(0x1, 1000) + b"x" * 10)
    _close_abruptly(sock)


def abuse_bad_opcode(port: int) -> None:
    with handshake(port, "/rogue") as sock:
        sock.sendall(frame_header(0x3, 4) + b"oops")
        _drain(sock, 1.0)


def abuse_unmasked_frame(port: int) -> None:
    with handshake(port, "/rogue") as sock:
        sock.sendall(frame_header(0x1, 5, masked=False) + b"hello")
        _drain(sock, 1.0)


def abuse_oversized_length(port: int) -> None:
    with handshake(port, "/rogue") as sock:
        sock.sendall(frame_header(0x2, 2**63 - 1) + b"\x00" * 1024)
        _drain(sock, 1.0)


def abuse_flood_without_reading(port: int, seconds: float = FLOOD_S) -> None:
    """Two rogue members of one room; one sends 64 KiB frames as fast as it can for `seconds`, neither ever reads."""
    sender, silent = handshake(port, "/rogue-flood"), handshake(port, "/rogue-flood")
    frame = frame_header(0x2, FLOOD_FRAME_BYTES) + b"\xab" * FLOOD_FRAME_BYTES
    sender.settimeout(0.2)
    sent = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and sent < FLOOD_MAX_BYTES:
            try:
                sent += sender.send(frame)
            except socket.timeout:
                continue  # the server stopped reading from us: keep the pressure on until the deadline
            except OSError:
                break
    finally:
        _close_abruptly(sender)
        _close_abruptly(silent)
    print(f"sent {sent / 2**20:.1f} MiB in {seconds:g} s")


def _drain(sock: socket.socket, seconds: float) -> None:
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass


ABUSES = {
    "disconnect-mid-frame": abuse_disconnect_mid_frame,
    "bad-opcode": abuse_bad_opcode,
    "unmasked-frame": abuse_unmasked_frame,
    "oversized-length": abuse_oversized_length,
    "flood-without-reading": abuse_flood_without_reading,
}


class WellBehavedPair:
    """A ping-pong pair in its own room, run in a thread; records the time of every completed roundtrip."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.times: list[float] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "WellBehavedPair":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        try:
            with connect(f"{self.base_url}/well-behaved", compression=None, ping_interval=None) as a, \
                    connect(f"{self.base_url}/well-behaved", compression=None, ping_interval=None) as b:
                while not self._stop.is_set():
                    a.send("ping")
                    if b.recv(timeout=5) != "ping":
                        raise RuntimeError("B received something other than the ping")
                    b.send("pong")
                    if a.recv(timeout=5) != "pong":
                        raise RuntimeError("A received something other than the pong")
                    self.times.append(time.monotonic())
        except Exception as exc:
            if not self._stop.is_set():
                self.error = f"{type(exc).__name__}: {exc}"

    def count_between(self, start: float, end: float) -> int:
        return sum(start <= t < end for t in self.times)


@dataclass(frozen=True)
class AbuseOutcome:
    server: str
    abuse: str
    before_per_s: float
    during_per_s: float
    after_per_s: float
    server_alive: bool
    abuse_error: str | None
    pair_error: str | None
    abuse_detail: str | None = None  # what the rogue reported, e.g. how much it flooded

    @property
    def verdict(self) -> str:
        """server died | pair broken | stalled (0 during) | slowed (< half during) | slow after | unaffected.

        Only the first two mean the server did not survive. The others compare rates of 1-second phases, which a
        noisy machine moves by itself, so they describe what was seen rather than judge it.
        """
        if not self.server_alive:
            return "server died"
        if self.pair_error or self.after_per_s == 0:
            return "pair broken"
        if self.during_per_s == 0:
            return "stalled"
        if self.during_per_s < UNDISTURBED_SHARE * self.before_per_s:
            return "slowed"
        if self.after_per_s < UNDISTURBED_SHARE * self.before_per_s:
            return "slow after"
        return "unaffected"

    @property
    def survived(self) -> bool:
        """The server kept serving: it is alive, and the other room's pair kept its ping-pong going after."""
        return self.verdict not in ("server died", "pair broken")


def run_abuse(server_name: str, base_url: str, server_process: processes.ManagedProcess, abuse: str,
              work_dir: Path, phase_s: float = PHASE_S, flood_s: float = FLOOD_S) -> AbuseOutcome:
    """Count the pair's roundtrips for phase_s before, during (at least phase_s from the abuse's start), after.

    The rogue runs in a process of its own, so it shares no interpreter lock with the pair it is judged by.
    """
    port = int(base_url.rsplit(":", 1)[1])
    with WellBehavedPair(base_url) as pair:
        deadline = time.monotonic() + 10
        while not pair.times and pair.error is None and time.monotonic() < deadline:
            time.sleep(0.01)  # until the pair's first roundtrip
        before_start = time.monotonic()
        time.sleep(phase_s)
        during_start = time.monotonic()
        rogue = processes.start(f"rogue-{abuse}", [sys.executable, "-m", "pingpong.harness.commands.abuse", "--rogue", abuse,
                                                   "--port", str(port), "--flood", str(flood_s)], ROOT, work_dir)
        abuse_error = None
        try:
            code = rogue.popen.wait(flood_s + 15)
            if code != 0:
                abuse_error = rogue.stderr_tail(1) or f"rogue exited with code {code}"
        except Exception as exc:
            abuse_error = f"rogue did not finish: {type(exc).__name__}"
        finally:
            processes.stop(rogue)
        remaining = during_start + phase_s - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)
        during_end = time.monotonic()
        time.sleep(phase_s)
        after_end = time.monotonic()
    return AbuseOutcome(
        server=server_name, abuse=abuse,
        before_per_s=pair.count_between(before_start, during_start) / (during_start - before_start),
        during_per_s=pair.count_between(during_start, during_end) / (during_end - during_start),
        after_per_s=pair.count_between(during_end, after_end) / (after_end - during_end),
        server_alive=server_process.popen.poll() is None, abuse_error=abuse_error, pair_error=pair.error,
        abuse_detail=rogue.stdout_text().strip() or None)


def abuse_server(implementation, abuses: list[str] | None = None, phase_s: float = PHASE_S,
                 flood_s: float = FLOOD_S) -> list[AbuseOutcome]:
    """Start one server and run the abuses against it, each with a fresh well-behaved pair counted phase_s a phase
    (the flood lasting flood_s)."""
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="pingpong-abuse-") as work:
        port = processes.free_port()
        server = processes.start("server", resolve_command(implementation, ROOT) + ["--port", str(port)], ROOT,
                                 Path(work))
        try:
            base_url = f"ws://127.0.0.1:{port}"
            probe.wait_until_ready(base_url, server, 20)
            for abuse in abuses or list(ABUSES):
                outcomes.append(run_abuse(implementation.name, base_url, server, abuse, Path(work), phase_s, flood_s))
                if server.popen.poll() is not None:
                    break
        finally:
            processes.stop(server)
    return outcomes


def render_table(outcomes: list[AbuseOutcome]) -> str:
    servers = list(dict.fromkeys(o.server for o in outcomes))
    lines = ["| server | " + " | ".join(ABUSES) + " |", "|---|" + "---|" * len(ABUSES)]
    for server in servers:
        cells = []
        for abuse in ABUSES:
            outcome = next((o for o in outcomes if o.server == server and o.abuse == abuse), None)
            cells.append("not run" if outcome is None else
                         f"{outcome.verdict}: {outcome.before_per_s:,.0f} → {outcome.during_per_s:,.0f} → "
                         f"{outcome.after_per_s:,.0f}/s")
        lines.append(f"| {server} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


DESCRIPTION = __doc__.splitlines()[0]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--servers", help="comma-separated server names (default: every server)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    parser.add_argument("--phase", type=float, default=PHASE_S, metavar="SECONDS",
                        help=f"how long the pair is counted before, during and after each abuse (default {PHASE_S:g})")
    parser.add_argument("--flood", type=float, default=FLOOD_S, metavar="SECONDS",
                        help=f"how long the flooding rogue sends (default {FLOOD_S:g}, at most "
                             f"{FLOOD_MAX_BYTES // 2**20} MiB)")


def main() -> int:
    """A rogue's own process (python -m pingpong.harness.commands.abuse --rogue ABUSE --port P), or the abuse run itself."""
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    add_arguments(parser)
    parser.add_argument("--rogue", choices=list(ABUSES), help=argparse.SUPPRESS)  # the rogue's own process
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rogue:  # the flood alone has a length
        if args.rogue == "flood-without-reading":
            abuse_flood_without_reading(args.port, args.flood)
        else:
            ABUSES[args.rogue](args.port)
        return 0
    return run(args)


def run(args: argparse.Namespace) -> int:
    """`run_bench.py abuse`: every abuse against every chosen WebSocket server, then the table (or JSON).

    A server that never gets ready is reported on stderr and the others go on; the exit code is then 1.
    """
    servers = [i for i in load_manifest(ROOT / "manifest.toml") if i.role == "server" and i.protocol == "websocket"]
    if not args.phase > 0:
        print(f"abuse: --phase must be > 0 seconds, got {args.phase:g}", file=sys.stderr)
        return 2
    if not args.flood > 0:
        print(f"abuse: --flood must be > 0 seconds, got {args.flood:g}", file=sys.stderr)
        return 2
    if args.servers:
        wanted = args.servers.split(",")
        unknown = [name for name in wanted if name not in {s.name for s in servers}]
        if unknown:
            print(f"abuse: unknown or non-WebSocket server {', '.join(unknown)}; valid: "
                  f"{', '.join(s.name for s in servers)}", file=sys.stderr)
            return 2
        servers = [s for s in servers if s.name in wanted]
    outcomes, not_ready = [], []
    for server in servers:
        print(f"abusing {server.name} ...", file=sys.stderr, flush=True)
        try:
            outcomes += abuse_server(server, phase_s=args.phase, flood_s=args.flood)
        except probe.NotReady as exc:
            not_ready.append(server.name)
            print(f"abuse: {server.name} not measured: {exc}", file=sys.stderr, flush=True)
    print(json.dumps([asdict(o) | {"verdict": o.verdict} for o in outcomes], indent=1) if args.json
          else render_table(outcomes))
    return 1 if not_ready else 0


if __name__ == "__main__":
    sys.exit(main())
