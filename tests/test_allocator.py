"""glibc malloc's state in the Python programs (pingpong/kit/allocator.py): what "settled" changes, on this machine.

asyncio reads with recv(256 KiB); CPython shrinks each read's buffer to what arrived. These tests read small
messages exactly that way in a fresh interpreter and count its minor page faults: as-is, every read maps and unmaps
its buffer (page faults on each); settled, the buffers come from the heap.
"""

import json
import os
import platform
import subprocess
import sys

import pytest

from pingpong.contract import MALLOC_ENV
from pingpong.kit import allocator
from tests.conftest import ROOT

READS = 2000

# A fresh interpreter: settle (or not) as the kit does, then READS small messages read with asyncio's recv size.
READER = f"""
import json, resource, socket
from pingpong.kit import allocator
mode = allocator.settle()
size = allocator.asyncio_read_size()
a, b = socket.socketpair()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range({READS}):
    a.send(b"abcdef")
    assert b.recv(size) == b"abcdef"
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
print(json.dumps({{"mode": mode, "faults": after - before, "size": size}}))
"""

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the dynamic mmap threshold is glibc's")


def read_in_fresh_interpreter(mode: str | None) -> dict:
    environment = {key: value for key, value in os.environ.items() if key != MALLOC_ENV}
    if mode is not None:
        environment[MALLOC_ENV] = mode
    completed = subprocess.run([sys.executable, "-c", READER], cwd=ROOT, env=environment, capture_output=True,
                               text=True, timeout=60, check=True)
    return json.loads(completed.stdout)


@glibc_only
def test_as_is_every_read_of_asyncio_size_faults_and_settled_none_does():
    """The mechanism behind the bimodal Python cells, and its cure: as-is, at least one fault per read; settled,
    almost none (a few for the heap's own growth)."""
    as_is = read_in_fresh_interpreter("as-is")
    settled = read_in_fresh_interpreter("settled")
    assert as_is["mode"] == "as-is" and settled["mode"] == "settled"
    assert as_is["size"] == 256 * 1024
    assert as_is["faults"] >= READS, as_is
    assert settled["faults"] < READS / 20, settled


@glibc_only
def test_settled_is_the_default():
    assert read_in_fresh_interpreter(None)["mode"] == "settled"


def test_an_unknown_mode_stops_the_program_with_one_line():
    with pytest.raises(SystemExit) as stopped:
        allocator.settle({MALLOC_ENV: "warm"})
    assert str(stopped.value) == f"{MALLOC_ENV}='warm': expected one of settled, as-is"


def test_the_read_size_is_asyncios():
    from asyncio.selector_events import _SelectorTransport

    assert allocator.asyncio_read_size() == _SelectorTransport.max_size
