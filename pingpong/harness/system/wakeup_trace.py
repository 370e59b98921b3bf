"""Which CPU woke each of a side's threads over the measured window, and how often they moved: the kernel's
sched_wakeup and sched_migrate_task events for the sides' threads, caught in a tracefs instance of our own.

A wakeup is the kernel making a blocked thread runnable. sched_waking is written on the CPU where the waker runs;
sched_wakeup names the CPU chosen for the woken thread (target_cpu), and is written there when the wakeup was queued
to that CPU by an interrupt. When the waker's CPU and the chosen one differ the wakeup crossed CPUs, which on this
VM costs an interrupt to the other vCPU and often its return from halt (the host's wakeup figure). A serial
ping-pong with its sides on two CPUs crosses 4 times a roundtrip; a thread pool's hand-offs (Node.js's zlib) cross
too when the pool's threads run on another CPU than the loop, which only an unpinned side allows.

PINGPONG_COUNT_WAKEUPS=1 turns it on (off by default: each event costs the woken side about a microsecond, and a
wakeup is two events: aiohttp × ws with its ~50 events a roundtrip ran 0.90× of its rate uncounted,
benchmarks/wakeup_counting.py).
It needs root and tracefs at /sys/kernel/tracing (it mounts it there when it is not, as root may). The instance
is named after our pid and removed when the window ends, and by `remove_stale` for instances whose process is gone.
Threads started inside the window are not counted (as the scheduling readings leave them out).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pingpong.contract import COUNT_WAKEUPS_ENV

ENV = COUNT_WAKEUPS_ENV
TRACEFS = Path("/sys/kernel/tracing")
INSTANCE_PREFIX = "pingpong-"
EVENTS = ("sched/sched_waking", "sched/sched_wakeup", "sched/sched_migrate_task")
BUFFER_KB_PER_CPU = 8192  # 0.1-0.2 s windows: up to about 30 wakeups a roundtrip at 20,000 roundtrips/s fit
# "<comm>-<tid> [<cpu>] <flags> <timestamp>: <event>: <fields>"; comm may hold spaces and dashes
EVENT_LINE = re.compile(r"\[(?P<cpu>\d+)\]\s+\S+\s+[\d.]+: "
                        r"(?P<event>sched_waking|sched_wakeup|sched_migrate_task): (?P<fields>.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")


def wanted() -> bool:
    """Whether the windows count wakeups (PINGPONG_COUNT_WAKEUPS=1, a measurement switch: "1" or nothing)."""
    return os.environ.get(ENV) == "1"


@dataclass(frozen=True)
class WakeupCounts:
    """One side's threads over the window: woken, woken from another CPU, moved to another CPU."""

    wakeups: int
    cross_cpu_wakeups: int
    migrations: int


def count(trace_text: str, tids_by_side: dict[str, set[int]]) -> dict[str, WakeupCounts]:
    """Each side's counts from an instance's trace text: an event counts for the side whose thread it names (the
    woken or moved thread, its pid field). A wakeup crossed CPUs when the CPU its sched_waking was written on (the
    waker's) is not its sched_wakeup's target_cpu; a wakeup whose waking the trace did not hold is counted, not
    judged as crossing; pure."""
    totals = {side: [0, 0, 0] for side in tids_by_side}
    side_of = {tid: side for side, tids in tids_by_side.items() for tid in tids}
    waker_cpu: dict[int, int] = {}
    for line in trace_text.splitlines():
        found = EVENT_LINE.search(line)
        if found is None:
            continue
        fields = dict(FIELD.findall(found["fields"]))
        tid = int(fields.get("pid", -1))
        side = side_of.get(tid)
        if side is None:
            continue
        if found["event"] == "sched_waking":
            waker_cpu[tid] = int(found["cpu"])
        elif found["event"] == "sched_wakeup":
            totals[side][0] += 1
            waker = waker_cpu.pop(tid, None)
            totals[side][1] += waker is not None and int(fields["target_cpu"]) != waker
        else:
            totals[side][2] += int(fields["orig_cpu"]) != int(fields["dest_cpu"])
    return {side: WakeupCounts(*figures) for side, figures in totals.items()}


def event_filter(tids: set[int]) -> str:
    """The instance's filter on the woken (or moved) thread; pure."""
    return " || ".join(f"pid == {tid}" for tid in sorted(tids))


def threads_of(pids: list[int]) -> set[int]:
    """The thread ids of the given processes now; one that exited meanwhile is left out."""
    tids: set[int] = set()
    for pid in pids:
        try:
            tids.update(int(tid) for tid in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return tids


def available() -> str | None:
    """None when an instance can be made here, else why not (one line)."""
    if os.geteuid() != 0:
        return "counting wakeups needs root (tracefs)"
    if not (TRACEFS / "instances").is_dir():
        done = subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True, text=True,
                              timeout=10)
        if done.returncode != 0 or not (TRACEFS / "instances").is_dir():
            return f"tracefs is not mounted at {TRACEFS} and mounting it failed: {done.stderr.strip()[:120]}"
    return None


def remove_stale() -> None:
    """Remove our instances whose process is gone (one killed before its window ended)."""
    try:
        names = os.listdir(TRACEFS / "instances")
    except OSError:
        return
    for name in names:
        if name.startswith(INSTANCE_PREFIX):
            owner = name[len(INSTANCE_PREFIX):].split("-")[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                try:
                    os.rmdir(TRACEFS / "instances" / name)
                except OSError:
                    pass


class WakeupTrace:
    """An instance made before the window (prepare: its buffers take milliseconds to allocate), tracing the sides'
    threads' wakeups and moves from start() to stop(), which cost a few writes each."""

    _made = 0

    def __init__(self) -> None:
        WakeupTrace._made += 1
        self.path = TRACEFS / "instances" / f"{INSTANCE_PREFIX}{os.getpid()}-{WakeupTrace._made}"
        self.tids_by_side: dict[str, set[int]] = {}
        self.error: str | None = None
        self.started = False

    def prepare(self) -> None:
        """Make the instance with its buffers, its events off; on failure, error says why."""
        try:
            os.mkdir(self.path)
            (self.path / "tracing_on").write_text("0")
            (self.path / "buffer_size_kb").write_text(str(BUFFER_KB_PER_CPU))
        except OSError as exc:
            self.error = f"wakeup trace: {exc}"
            self._remove()

    def start(self, tids_by_side: dict[str, set[int]]) -> None:
        """Filter the events to the sides' threads and turn them on."""
        if self.error is not None:
            return
        self.tids_by_side = tids_by_side
        tids = set().union(*tids_by_side.values())
        try:
            if not tids:
                raise OSError("no thread to trace")
            for event in EVENTS:
                (self.path / "events" / event / "filter").write_text(event_filter(tids))
                (self.path / "events" / event / "enable").write_text("1")
            (self.path / "tracing_on").write_text("1")
            self.started = True
        except OSError as exc:
            self.error = f"wakeup trace: {exc}"
            self._remove()

    def halt(self) -> None:
        """Turn the events off (one write, at the window's end; stop() counts them later)."""
        if self.error is None and self.started:
            try:
                (self.path / "tracing_on").write_text("0")
            except OSError as exc:
                self.error = f"wakeup trace: {exc}"

    def stop(self) -> dict[str, WakeupCounts] | None:
        """Turn the instance off, count its events and remove it; None if it did not start or lost events."""
        try:
            if self.error is not None or not self.started:
                return None
            (self.path / "tracing_on").write_text("0")
            text = (self.path / "trace").read_text(errors="replace")
            lost = sum(int(value) for stats in (self.path / "per_cpu").glob("cpu*/stats")
                       for value in re.findall(r"^overrun: (\d+)", stats.read_text(), re.M))
            if lost:
                self.error = f"wakeup trace: {lost} events lost (buffer full)"
                return None
            return count(text, self.tids_by_side)
        except OSError as exc:
            self.error = f"wakeup trace: {exc}"
            return None
        finally:
            self.started = False  # counted once; a second stop (the watcher's last word) finds nothing to do
            self._remove()

    def _remove(self) -> None:
        try:
            if self.path.exists():
                (self.path / "tracing_on").write_text("0")
                for event in EVENTS:
                    (self.path / "events" / event / "enable").write_text("0")
                os.rmdir(self.path)
        except OSError:
            pass
