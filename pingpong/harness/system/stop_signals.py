"""Which signals stop run_bench.py: SIGTERM always; SIGINT (Ctrl-C) unless it was started with SIGINT ignored.

A command that a non-interactive shell starts in the background (`command &` in a script, nohup, many job runners)
inherits SIGINT ignored, so that a Ctrl-C typed at the terminal reaches only the foreground job. run_bench.py keeps
that convention, as Python does by itself: started so, it goes on ignoring SIGINT, and SIGTERM (`kill PID`) still
stops it cleanly (partial results saved, every child stopped, exit code 130). Started normally, both signals stop
it the same way.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator

EXIT_INTERRUPTED = 130  # 128 + SIGINT: the code a shell gives a command that Ctrl-C ended


def sigint_ignored() -> bool:
    """True when SIGINT's disposition is 'ignore' (inherited from the parent, and so kept), or its stand-in."""
    return signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, _keep_ignoring)


def _keep_ignoring(signal_number, frame) -> None:
    """SIGINT ignored by a handler that does nothing: unlike SIG_IGN, a handled signal is reset to its default at
    exec, so a child is started without code of its own between fork and exec (processes.start)."""


def stopping_signals() -> tuple[signal.Signals, ...]:
    """The signals that stop a run in this process: SIGTERM, and SIGINT unless it is ignored."""
    return (signal.SIGTERM,) if sigint_ignored() else (signal.SIGINT, signal.SIGTERM)


_stop_requests: list[int] = []  # signals received and not yet acted on by a run's handler


def _request_stop(signal_number, frame):
    _stop_requests.append(signal_number)
    raise KeyboardInterrupt


def note_stop_request(signal_number: int) -> None:
    """Remember a stopping signal that a handler of its own received (one that defers the interrupt)."""
    _stop_requests.append(signal_number)


def stop_requested() -> bool:
    """True when a stopping signal came and no handler has yet acted on it (see raise_if_stop_requested)."""
    return bool(_stop_requests)


def raise_if_stop_requested() -> None:
    """Raise KeyboardInterrupt again for a stop request whose first KeyboardInterrupt may have been lost.

    Python prints and drops an exception raised where it cannot propagate: an at-fork hook (subprocess runs them
    when a child is started with preexec_fn; logging registers one), a __del__, a weakref callback. A Ctrl-C that
    lands there would otherwise be forgotten and the run would go on to the end (seen in CI). The request is
    remembered until the handler that saves the run clears it, so the run stops at its next checkpoint.
    """
    if _stop_requests:
        raise KeyboardInterrupt


def clear_stop_requests() -> None:
    """The run's handler has acted on every stop request so far."""
    _stop_requests.clear()


@contextmanager
def stop_signals_raise_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM, and SIGINT unless it is ignored, raise KeyboardInterrupt and are remembered
    as a stop request: one path stops a run cleanly, and a lost KeyboardInterrupt is raised again at a checkpoint."""
    ignoring_sigint = sigint_ignored()
    previous = {number: signal.signal(number, _request_stop) for number in stopping_signals()}
    if ignoring_sigint:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _keep_ignoring)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
