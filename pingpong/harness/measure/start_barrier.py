"""The start barrier of several client processes, and how well their measured windows coincided.

Each client process gets the read end of a pipe of its own (GO_FD_ENV). Once it has opened its connections it
writes READY_EVENT on the events pipe and blocks on its go pipe. When the last one is ready, GO_LINE goes down
every go pipe at once, so all of them start their warmup, and then their window, at the same moment. Closing the
pipes without it (abort) makes every client still waiting fail at once, with a reason saying so.
"""

from __future__ import annotations

import os
import threading
from typing import Callable

from pingpong.contract import GO_LINE


class StartBarrier:
    """The go pipes of `count` client processes; arrived() is called once per READY_EVENT (from any thread)."""

    def __init__(self, count: int, before_go: "Callable[[], None] | None" = None) -> None:
        self.before_go = before_go  # runs once all are ready, just before the go (e.g. sampling the server idle)
        pipes = [os.pipe() for _ in range(count)]
        self.read_fds = [read_fd for read_fd, _ in pipes]  # one per client: passed to it, then closed here
        self._write_fds = [write_fd for _, write_fd in pipes]
        self.count = count
        self.ready = 0  # READY_EVENTs seen so far
        self.released = threading.Event()  # set once the go has been written
        self._closed = False
        self._lock = threading.Lock()

    def arrived(self) -> None:
        """One more client is ready; the last one releases them all, unless the barrier was aborted."""
        with self._lock:
            self.ready += 1
            if self.ready < self.count or self._closed:
                return
            if self.before_go is not None:
                try:
                    self.before_go()
                except Exception:  # a sampling problem must not hold the clients back
                    pass
            for write_fd in self._write_fds:
                try:
                    os.write(write_fd, f"{GO_LINE}\n".encode())
                except OSError:  # that client has already exited: it is judged by its own report
                    pass
            self._close()
            self.released.set()

    def abort(self) -> bool:
        """Close the go pipes without a go (nothing if released already). True when it was released."""
        with self._lock:
            self._close()
            return self.released.is_set()

    def close_read_ends(self) -> None:
        """The clients hold their read ends; the orchestrator's copies are closed once they have started."""
        for read_fd in self.read_fds:
            try:
                os.close(read_fd)
            except OSError:
                pass
        self.read_fds = []

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            for write_fd in self._write_fds:
                os.close(write_fd)


def window_spread(ready_at: list[float], starts_at: list[float], ends_at: list[float],
                  processes: int) -> dict[str, float | int | None]:
    """How far apart several client processes became ready, opened and closed their windows (seconds).

    The times are when each event reached the orchestrator's reading thread (its monotonic clock), so a spread
    also holds that thread's scheduling delays; None where not every process reported the event.
    """
    def spread(times: list[float]) -> float | None:
        return round(max(times) - min(times), 6) if len(times) == processes else None

    return {"processes": processes, "ready_spread_s": spread(ready_at), "start_spread_s": spread(starts_at),
            "end_spread_s": spread(ends_at)}
