"""glibc malloc's state in every process the suite starts, settled before anything runs (docs/methodology.md).

glibc serves a request above its *dynamic mmap threshold* (128 KiB at start) with mmap, and raises the threshold the
first time a mapped block larger than it is freed whole; it returns a free heap top above the *trim threshold* to the
kernel (mallopt(3)). asyncio's selector transports read with `sock.recv(256 KiB)` and shrink each buffer to what
arrived, so until something raises the threshold every read costs mmap + mremap + munmap and two page faults.
Whether and when something does depends on the timing of a process's first moments (and later on what else it
frees: a growing array, a deflate window), so fresh processes of the same program fell into a fast or a slow mode,
1.6-1.8x apart in CPU per roundtrip, for their whole life.

"settled" takes the thresholds out of the process's hands: GLIBC_TUNABLES fixes both (glibc's manual, "Memory
Allocation Tunables"; a fixed threshold also turns the dynamic one off), for any glibc program in whatever runtime,
whatever its read size. The orchestrator puts them in the environment of every process it starts
(tunables_environment); a Python program started by hand with settled asked for re-executes itself once with them
(settle), since glibc reads its tunables only when a process starts. "as-is" leaves the allocator as the process
finds it.
"""

from __future__ import annotations

import os
import sys

from pingpong.contract import DEFAULT_MALLOC, GLIBC_TUNABLES_ENV, MALLOC_ENV, MALLOC_MODES, SETTLED_MALLOC_TUNABLES


def others_tunables(tunables: str | None) -> list[str]:
    """The entries of GLIBC_TUNABLES that are not ours (a user's own), in their order."""
    ours = {entry.split("=", 1)[0] for entry in SETTLED_MALLOC_TUNABLES}
    return [entry for entry in (tunables or "").split(":") if entry and entry.split("=", 1)[0] not in ours]


def with_settled_tunables(tunables: str | None) -> str:
    """GLIBC_TUNABLES with the settled thresholds: any other tunable kept, our two replacing any earlier value."""
    return ":".join([*others_tunables(tunables), *SETTLED_MALLOC_TUNABLES])


def is_settled(tunables: str | None) -> bool:
    """Whether GLIBC_TUNABLES holds the settled thresholds."""
    present = set((tunables or "").split(":"))
    return all(entry in present for entry in SETTLED_MALLOC_TUNABLES)


def tunables_environment(mode: str, environ: dict[str, str]) -> dict[str, str]:
    """The environment a process is started with for this malloc mode: settled adds the tunables; as-is removes
    ours (a user's own GLIBC_TUNABLES stays)."""
    environment = dict(environ)
    environment.pop(GLIBC_TUNABLES_ENV, None)
    tunables = (with_settled_tunables(environ.get(GLIBC_TUNABLES_ENV)) if mode == "settled"
                else ":".join(others_tunables(environ.get(GLIBC_TUNABLES_ENV))))
    if tunables:
        environment[GLIBC_TUNABLES_ENV] = tunables
    return environment


def settle(environ=os.environ) -> str:
    """The mode PINGPONG_MALLOC asks for (default settled), in force: a settled process started without the tunables
    (by hand) re-executes itself once with them, before anything else happens. Returns the mode, for the report."""
    mode = environ.get(MALLOC_ENV) or DEFAULT_MALLOC
    if mode not in MALLOC_MODES:
        sys.exit(f"{MALLOC_ENV}={mode!r}: expected one of {', '.join(MALLOC_MODES)}")
    if mode == "settled" and not is_settled(environ.get(GLIBC_TUNABLES_ENV)) and environ is os.environ:
        if sys.argv[0] in ("", "-"):  # a program read from standard input cannot be started again
            print("glibc's malloc tunables are not in force (a program read from standard input is not started "
                  "again with them): running as-is", file=sys.stderr)
            return "as-is"
        sys.stdout.flush()
        sys.stderr.flush()
        os.environ[GLIBC_TUNABLES_ENV] = with_settled_tunables(os.environ.get(GLIBC_TUNABLES_ENV))
        os.execv(sys.executable, [sys.executable, *own_arguments()])
    return mode


def own_arguments() -> list[str]:
    """The interpreter's arguments this process was started with: sys.orig_argv's (Python >= 3.10), else, on 3.9
    and PyPy 3.9, as -m MODULE or the script, then sys.argv's."""
    if hasattr(sys, "orig_argv"):
        return sys.orig_argv[1:]
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    return (["-m", spec.name] if spec is not None else [sys.argv[0]]) + sys.argv[1:]
