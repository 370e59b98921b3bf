"""The host sentinel (native/host_sentinel.c: two C processes passing one byte over a socketpair), one per CPU, asked
for one slice at a time: how fast the host runs that CPU right now.

On this shared VM each vCPU now and then runs the same work about 1.5x slower for a stretch of milliseconds to
seconds, independently of the other vCPU (docs/methodology.md, "The host's two speeds"). The in-window pace
(measure/pacer.py) times slices of these sentinels inside every measured window; benchmarks/host_modes.py,
benchmarks/window_pace.py and benchmarks/per_cpu_keeping.py use them too. The sentinels are started once per CPU and
run until the run ends (close_all) or this process does: each exits at the end of its stdin, its child with it, and
the guardian ends its process group if this process is killed.
"""

from __future__ import annotations

import atexit
import os
import select
import subprocess
from pathlib import Path

from pingpong.harness.system import guardian

SENTINEL = Path(__file__).resolve().parents[3] / "build" / "host_sentinel"
SLICE_ROUNDTRIPS = 1000  # about 5 ms here in the fast mode
WARMING_ROUNDTRIPS = 200  # first, not kept: the CPU may have been idle, its caches cold
MAX_GROUPS = 16  # process groups one slice may stop (native/host_sentinel.c)
ANSWER_TIMEOUT_S = 10.0  # a sentinel that does not answer a slice within this is ended (its user says why)
PREEMPT_REFUSED_EXIT = 3  # native/host_sentinel.c --preempt: the real-time class was refused


class PreemptRefused(OSError):
    """The system refused the sentinel the real-time class (no CAP_SYS_NICE, no RLIMIT_RTPRIO)."""


preempt_refused: str | None = None  # why, once refused in this process: not asked again


class Sentinel:
    """The sentinel's two processes on one CPU, asked for one slice at a time (benchmarks/host_modes.py uses it too).
    It exits at the end of its stdin, so it ends with this process however this one ends, its child with it."""

    def __init__(self, cpu: int, preempt: bool = False):
        """preempt: both processes in the real-time class (native/host_sentinel.c --preempt), so that a slice takes
        the CPU from whatever else runs there at once, and a slice with groups stops no one."""
        self.preempt = preempt
        previous = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})  # this thread only, while it starts the sentinel: both its processes inherit it
        try:
            self.process = subprocess.Popen([str(SENTINEL), *(["--preempt"] if preempt else [])],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, text=True, process_group=0)
        finally:
            os.sched_setaffinity(0, previous)
        guardian.started(self.process.pid)  # a group of its own, ended by the guardian if this process is killed

    def slice_total_ns(self, roundtrips: int) -> int:
        """ns for this many roundtrips, timed by the sentinel itself."""
        self.ask(roundtrips)
        return self.answer()[0]

    def ask(self, roundtrips: int, groups: tuple[int, ...] = ()) -> None:
        """Start a slice of this many roundtrips (answer() reads its time); with groups, the sentinel stops those
        process groups first and continues them after (MAX_GROUPS at most); a preempting sentinel does not stop
        them (they cannot run on its CPU while it runs) and only continues them after, so that their clients count
        the pause. The in-window pace asks every CPU's sentinel first, so that they run at once."""
        if len(groups) > MAX_GROUPS:
            raise ValueError(f"a slice stops at most {MAX_GROUPS} process groups, not {len(groups)}")
        try:
            self.process.stdin.write(" ".join(map(str, (roundtrips, *groups))) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:  # it has exited: say why as answer() would
            self._ended()

    def _ended(self):
        """Raise what the sentinel's exit means: PreemptRefused for the real-time class refused, else OSError."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        if self.preempt and code == PREEMPT_REFUSED_EXIT:
            raise PreemptRefused("the system refused the host sentinel the real-time class (SCHED_FIFO: it needs "
                                 "CAP_SYS_NICE or an RLIMIT_RTPRIO of 1)")
        raise OSError(f"the host sentinel exited (code {code})")

    def check_real_time(self) -> None:
        """Raise PreemptRefused unless a preempting sentinel runs in the real-time class (a build from before
        --preempt ignores the option and would run as an ordinary process beside the cell)."""
        try:
            policy = os.sched_getscheduler(self.process.pid)
        except OSError as exc:
            raise OSError(f"the host sentinel's class could not be read: {exc}") from None
        if policy != os.SCHED_FIFO:
            raise PreemptRefused(f"{SENTINEL.name} ran as an ordinary process though asked for the real-time class: "
                                 f"it was built before --preempt (sh native/build.sh builds it again)")

    def answer(self) -> tuple[int, int | None]:
        """(ns of the slice asked for, ns the groups it stopped were paused, or None without groups), timed by the
        sentinel itself."""
        if not select.select([self.process.stdout], [], [], ANSWER_TIMEOUT_S)[0]:
            raise OSError(f"the host sentinel did not answer within {ANSWER_TIMEOUT_S:g} s")
        line = self.process.stdout.readline()
        if not line:
            self._ended()
        fields = [int(field) for field in line.split()]
        return fields[0], fields[1] if len(fields) > 1 else None

    def slice_ns(self, roundtrips: int) -> float:
        """ns a roundtrip over a slice of this many."""
        return self.slice_total_ns(roundtrips) / roundtrips

    def close(self) -> None:
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        guardian.reaped(self.process.pid)


def real_time_granted(cpu: int) -> bool | None:
    """Whether a preempting sentinel runs in the real-time class here (one started on cpu for a slice to see, unless
    a refusal is remembered; a refusal seen here is remembered too); None without a built sentinel, or when the
    probe itself failed."""
    global preempt_refused
    if not SENTINEL.exists():
        return None
    if preempt_refused is not None:
        return False
    try:
        probe = Sentinel(cpu, preempt=True)
    except OSError:
        return None
    try:
        probe.slice_ns(1)
        probe.check_real_time()
        return True
    except PreemptRefused as exc:
        preempt_refused = str(exc)
        return False
    except (OSError, ValueError):
        return None
    finally:
        probe.close()


_sentinels: dict[tuple[int, bool], Sentinel] = {}
_closed_at_exit = False  # whether close_all is registered to run at this process's exit


def sentinel_on(cpu: int, preempt: bool = False) -> Sentinel:
    """This run's sentinel on cpu (a preempting one with preempt), started (and warmed) at its first use. Raises
    PreemptRefused for preempt where the system refuses it (then and at every later call in this process)."""
    global preempt_refused, _closed_at_exit
    if preempt and preempt_refused:
        raise PreemptRefused(preempt_refused)
    sentinel = _sentinels.get((cpu, preempt))
    if sentinel is None:
        sentinel = Sentinel(cpu, preempt)
        try:
            sentinel.slice_ns(WARMING_ROUNDTRIPS)
            if preempt:
                sentinel.check_real_time()
        except PreemptRefused as exc:
            sentinel.close()
            preempt_refused = str(exc)
            raise
        except (OSError, ValueError):
            sentinel.close()  # not kept: an answer it still owes would be read as the next slice's
            raise
        if not _closed_at_exit:
            # Every sentinel ends with the process that started it, whoever forgets close_all(): the benchmarks
            # that measure attempts left theirs to the guardian ("ended process groups" at exit: window_spread,
            # 2026-11-29). Registered once a sentinel runs, so after the guardian's own exit handler, and atexit
            # runs the later first.
            atexit.register(close_all)
            _closed_at_exit = True
        _sentinels[(cpu, preempt)] = sentinel
    return sentinel


def discard(cpu: int) -> None:
    """End cpu's sentinels after a failure: the next use starts a new one."""
    for key in [key for key in _sentinels if key[0] == cpu]:
        _sentinels.pop(key).close()


def close_all() -> None:
    """End every sentinel of this process (each exits at the end of its stdin)."""
    while _sentinels:
        _sentinels.popitem()[1].close()
