"""Servers under abuse: does a well-behaved pair keep its ping-pong going while a rogue client misbehaves?

`python run_bench.py abuse [--servers a,b]` starts each server, runs every abuse against it in turn while a pair
in another room plays ping-pong, and prints a Markdown table (JSON with --json). Each abuse is bounded in time and
bytes, and only ever talks to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from websockets.sync.client import connect

from pingpong.harness.commands.abuse_rogue import ABUSES, FLOOD_MAX_BYTES, FLOOD_S
from pingpong.harness.measure import probe
from pingpong.harness.settings.manifest import load_manifest, resolve_command
from pingpong.harness.system import processes, work_dirs

ROOT = Path(__file__).resolve().parents[3]  # the checkout: pingpong/harness/commands/abuse.py
PHASE_S = 1.0  # the pair is counted for this long before and after each abuse
UNDISTURBED_SHARE = 0.5  # at half of 'before' or more, a phase counts as undisturbed (informational only)


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
        rogue = processes.start(f"rogue-{abuse}", [sys.executable, "-m", "pingpong.harness.commands.abuse_rogue", abuse,
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
    with work_dirs.temporary("pingpong-abuse-") as work:
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

