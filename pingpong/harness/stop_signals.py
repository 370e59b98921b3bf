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


def sigint_ignored() -> bool:
    """True when SIGINT's disposition is 'ignore' (inherited from the parent, and so kept)."""
    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def stopping_signals() -> tuple[signal.Signals, ...]:
    """The signals that stop a run in this process: SIGTERM, and SIGINT unless it is ignored."""
    return (signal.SIGTERM,) if sigint_ignored() else (signal.SIGINT, signal.SIGTERM)


def _raise_interrupt(signal_number, frame):
    raise KeyboardInterrupt


@contextmanager
def sigterm_raises_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises KeyboardInterrupt, as Ctrl-C does: one path stops a run cleanly."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
