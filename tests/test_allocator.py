"""glibc malloc's state in the suite's processes (pingpong/kit/allocator.py): what "settled" changes, on this machine.

asyncio reads with recv(256 KiB); CPython shrinks each read's buffer to what arrived. These tests read small
messages exactly that way in a fresh interpreter and count its minor page faults: as-is, every read maps and unmaps
its buffer (page faults on each); settled (glibc's thresholds fixed by GLIBC_TUNABLES), the buffers come from the heap,
whatever the read size.
"""

import glob
import json
import os
import platform
import shutil
import subprocess
import sys

import pytest

from pingpong.contract import GLIBC_TUNABLES_ENV, MALLOC_ENV, SETTLED_MALLOC_TUNABLES
from pingpong.harness.measure.attempt_plan import process_environment
from pingpong.harness.settings.cell import CellSettings
from pingpong.kit import allocator
from tests.conftest import ROOT

READS = 2000

# A fresh interpreter: settle (or not) as the kit does, then READS small messages read with a given recv size.
READER = """
import json, os, resource, socket, sys
from pingpong.kit import allocator
mode = allocator.settle()
size = int(sys.argv[1])
a, b = socket.socketpair()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range({reads}):
    a.send(b"abcdef")
    assert b.recv(size) == b"abcdef"
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
print(json.dumps({{"mode": mode, "faults": after - before, "tunables": os.environ.get("GLIBC_TUNABLES")}}))
""".format(reads=READS)

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the tunables are glibc's")


def read_in_fresh_interpreter(mode: str | None, size: int = 256 * 1024, tunables: str | None = None) -> dict:
    environment = {key: value for key, value in os.environ.items() if key not in (MALLOC_ENV, GLIBC_TUNABLES_ENV)}
    if mode is not None:
        environment[MALLOC_ENV] = mode
    if tunables is not None:
        environment[GLIBC_TUNABLES_ENV] = tunables
    completed = subprocess.run([sys.executable, "-c", READER, str(size)], cwd=ROOT, env=environment,
                               capture_output=True, text=True, timeout=60, check=True)
    return json.loads(completed.stdout)


@glibc_only
def test_as_is_every_read_of_asyncio_size_faults_and_settled_none_does():
    """The mechanism behind the bimodal Python cells, and its cure: as-is, at least one fault per read; settled,
    almost none. Started by hand without the tunables, the settled program re-executes itself with them."""
    as_is = read_in_fresh_interpreter("as-is")
    settled = read_in_fresh_interpreter("settled")
    assert as_is["mode"] == "as-is" and settled["mode"] == "settled"
    assert as_is["faults"] >= READS, as_is
    assert settled["faults"] < READS / 20, settled
    assert allocator.is_settled(settled["tunables"])


def other_interpreters() -> list[str]:
    """CPython 3.12 and later found here (on PATH, or pyenv's), each one that starts."""
    found = [path for name in ("python3.12", "python3.13") if (path := shutil.which(name))]
    found += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    working = {}
    for path in found:
        try:
            version = subprocess.run([path, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                                     text=True, timeout=30).stdout.strip()
        except OSError:
            continue
        if version and version not in working:
            working[version] = path
    return list(working.values())


OTHER_INTERPRETERS = other_interpreters()


@glibc_only
@pytest.mark.skipif(not OTHER_INTERPRETERS, reason="no python3.12 or python3.13 on PATH")
@pytest.mark.parametrize("interpreter", OTHER_INTERPRETERS)
def test_settled_holds_on_other_interpreter_versions(interpreter):
    """The tunables do not depend on CPython's version or its read path: as-is faults, settled does not."""
    for mode, check in (("as-is", lambda faults: faults >= READS), ("settled", lambda faults: faults < READS / 20)):
        environment = {key: value for key, value in os.environ.items() if key not in (MALLOC_ENV, GLIBC_TUNABLES_ENV)}
        completed = subprocess.run([interpreter, "-c", READER, str(256 * 1024)], cwd=ROOT, capture_output=True,
                                   text=True, timeout=60, check=True,
                                   env={**environment, MALLOC_ENV: mode, "PYTHONPATH": str(ROOT)})
        result = json.loads(completed.stdout)
        assert result["mode"] == mode and check(result["faults"]), (interpreter, result)


def test_a_program_read_from_standard_input_says_it_runs_as_is():
    """It cannot be started again with the tunables: it says so in one line and reports as-is, never settled."""
    environment = {key: value for key, value in os.environ.items() if key not in (MALLOC_ENV, GLIBC_TUNABLES_ENV)}
    completed = subprocess.run([sys.executable, "-"], input="from pingpong.kit import allocator\n"
                               "print(allocator.settle())\n", cwd=ROOT, env=environment, capture_output=True,
                               text=True, timeout=60)
    assert completed.stdout.strip() == "as-is"
    assert "tunables are not in force" in completed.stderr and len(completed.stderr.strip().splitlines()) == 1


@glibc_only
@pytest.mark.parametrize("size", [64 * 1024, 1024 * 1024, 3 * 1024 * 1024])
def test_settled_does_not_depend_on_the_read_size(size):
    """The thresholds are fixed above any read buffer: a runtime reading 1 or 3 MiB at a time is settled too."""
    assert read_in_fresh_interpreter("settled", size)["faults"] < READS / 20


@glibc_only
def test_settled_is_the_default_and_keeps_a_users_own_tunables():
    result = read_in_fresh_interpreter(None, tunables="glibc.malloc.arena_max=2")
    assert result["mode"] == "settled"
    assert result["tunables"].split(":") == ["glibc.malloc.arena_max=2", *SETTLED_MALLOC_TUNABLES]


def test_an_unknown_mode_stops_the_program_with_one_line():
    with pytest.raises(SystemExit) as stopped:
        allocator.settle({MALLOC_ENV: "warm"})
    assert str(stopped.value) == f"{MALLOC_ENV}='warm': expected one of settled, as-is"


def test_every_process_the_suite_starts_gets_the_tunables_when_settled_and_ours_go_when_as_is(monkeypatch):
    """process_environment is what every server and client (any runtime) is started with."""
    monkeypatch.setenv(GLIBC_TUNABLES_ENV, "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=1")
    settings = CellSettings(duration_s=1, warmup_s=1, loop="auto", compression="default", payload_size=4,
                            payload_kind="text-ascii", ready_timeout_s=1, stall_timeout_s=1, pin=False)
    settled = process_environment(settings)
    assert settled[MALLOC_ENV] == "settled"
    assert settled[GLIBC_TUNABLES_ENV].split(":") == ["glibc.malloc.arena_max=2", *SETTLED_MALLOC_TUNABLES]
    as_is = process_environment(CellSettings(**{**settings.__dict__, "malloc": "as-is"}))
    assert as_is[MALLOC_ENV] == "as-is"
    assert as_is[GLIBC_TUNABLES_ENV] == "glibc.malloc.arena_max=2"


def test_settled_tunables_replace_earlier_values_of_ours():
    assert allocator.with_settled_tunables("glibc.malloc.trim_threshold=5") == ":".join(SETTLED_MALLOC_TUNABLES)
    assert allocator.with_settled_tunables(None) == ":".join(SETTLED_MALLOC_TUNABLES)
    assert not allocator.is_settled("glibc.malloc.mmap_threshold=4194304")
