"""Compiled programs built on their first use (pingpong/harness/settings/native_build.py): which entries need their
build command run, the commands run at once under a lock, and a real run that names a program nobody built yet
building it first and measuring it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from pingpong.harness.settings.manifest import load_manifest
from pingpong.harness.settings.native_build import build_on_first_use, builds_needed, missing_files
from tests.conftest import QUICK_RELAY_CHECK, ROOT

ENTRY = """
[[client]]
name = "{name}"
runtime = "native"
protocol = "{protocol}"
command = ["{{root}}/build/{binary}"]
requires = ["file:build/{binary}"]
build = {build}
loops = ["auto"]
compression = ["default"]
"""


def entry(name: str, binary: str, build: list[str], protocol: str = "websocket") -> str:
    return ENTRY.format(name=name, binary=binary, build=json.dumps(build), protocol=protocol)


def manifest(tmp_path, *entries: str):
    path = tmp_path / "m.toml"
    path.write_text("".join(entries))
    return load_manifest(path)


def test_an_entry_needs_its_build_only_while_a_file_is_missing_and_no_note_says_why(tmp_path):
    (tmp_path / "build").mkdir()
    first, second, third = manifest(tmp_path, entry("a", "a_client", ["sh", "build_a.sh"]),
                                    entry("b", "b_client", ["sh", "build_b.sh"]),
                                    entry("c", "c_client", ["sh", "build_a.sh"]))
    assert missing_files(first, tmp_path) == ["build/a_client"]
    # distinct commands, in order: two entries with one command build once
    assert builds_needed([first, second, third], tmp_path) == [("sh", "build_a.sh"), ("sh", "build_b.sh")]
    (tmp_path / "build" / "a_client").write_bytes(b"")
    (tmp_path / "build" / "b_client.unavailable").write_text("cargo not found on PATH\n")
    assert builds_needed([first, second, third], tmp_path) == [("sh", "build_a.sh")]  # c still misses its file
    (tmp_path / "build" / "c_client").write_bytes(b"")
    assert builds_needed([first, second, third], tmp_path) == []
    without = load_manifest(ROOT / "manifest.toml")
    assert not any(i.build for i in without if i.name.startswith("raw-tcp")), "npm ci builds the C floors"


def test_the_commands_run_at_once_from_the_project_root_with_their_output_on_stderr(tmp_path, capsys):
    """Two builds that each wait for the other's mark finish only if they run at once; each writes its file; what
    they print goes to stderr; a second call finds nothing to build and runs nothing."""
    both = ('touch build/{own}.started; i=0; while [ ! -e build/{other}.started ] && [ $i -lt 200 ]; do sleep 0.05; '
            'i=$((i+1)); done; [ -e build/{other}.started ] && echo "{own} built" && cp /bin/true build/{own}')
    entries = manifest(tmp_path, entry("a", "a_client", ["sh", "-c", both.format(own="a_client", other="b_client")]),
                       entry("b", "b_client", ["sh", "-c", both.format(own="b_client", other="a_client")]))
    ran = build_on_first_use(entries, tmp_path)
    assert len(ran) == 2
    assert (tmp_path / "build" / "a_client").exists() and (tmp_path / "build" / "b_client").exists()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "a_client built" in captured.err and "b_client built" in captured.err
    assert "a, b: not built yet, built now, on first use" in captured.err
    assert build_on_first_use(entries, tmp_path) == []


def test_a_build_that_fails_leaves_its_note_and_the_entry_unavailable_with_it(tmp_path, capsys):
    from pingpong.harness.settings.manifest import check_availability
    note = "printf 'gcc not found on PATH\\n' > build/a_client.unavailable; exit 1"
    (failing,) = manifest(tmp_path, entry("a", "a_client", ["sh", "-c", note]))
    assert build_on_first_use([failing], tmp_path) == [("sh", "-c", note)]
    assert "still not built: a" in capsys.readouterr().err
    assert check_availability(failing, tmp_path).reason == (
        "'build/a_client' could not be built here: gcc not found on PATH; once that is fixed, the next run that names "
        f"it builds it again (sh -c {note})")
    assert build_on_first_use([failing], tmp_path) == []  # its note says why: not tried again on every run
    # ... until the system's packages change after it (an apt-get install): then once more
    packages = tmp_path / "dpkg-status"
    packages.write_text("")
    note_file = tmp_path / "build" / "a_client.unavailable"
    os.utime(packages, (note_file.stat().st_mtime - 60,) * 2)
    assert builds_needed([failing], tmp_path, packages) == []
    os.utime(packages, (note_file.stat().st_mtime + 60,) * 2)
    assert builds_needed([failing], tmp_path, packages) == [("sh", "-c", note)]


def test_a_build_past_its_time_is_stopped_said_and_left_not_built_without_a_traceback(tmp_path, capsys):
    """A build that outlives its timeout: stopped (its process and the child it started gone), one line on stderr,
    no exception, the entry still not built, and the next call tries again."""
    hang = "sleep 60 & echo $! > build/a_child.pid; wait"
    (hanging,) = manifest(tmp_path, entry("a", "a_client", ["sh", "-c", hang]))
    (tmp_path / "build").mkdir(exist_ok=True)
    started = time.monotonic()
    assert build_on_first_use([hanging], tmp_path, timeout_s=1.0) == [("sh", "-c", hang)]
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert "stopped after 1 s, unfinished: the runs that need it will try again" in err
    assert "still not built: a" in err
    child = int((tmp_path / "build" / "a_child.pid").read_text())
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    assert builds_needed([hanging], tmp_path) == [("sh", "-c", hang)]


def test_a_run_naming_a_program_nobody_built_builds_it_first_and_measures_it(tmp_path):
    """A real run with an entry whose program is missing: the run builds it (here, a copy of the C floor's client
    under a new name), then measures it against the C floor's server, and a second run builds nothing."""
    binary = f"first-use-{uuid.uuid4().hex[:8]}"
    path = ROOT / "build" / binary
    (tmp_path / "m.toml").write_text(entry("first-use", binary, ["cp", "build/raw_tcp_client", f"build/{binary}"],
                                           protocol="raw-tcp"))
    command = [sys.executable, "run_bench.py", "--manifest", "manifest.toml", "--manifest", str(tmp_path / "m.toml"),
               "--servers", "raw-tcp-c", "--clients", "first-use", "--repeat", "1", "--duration", "0.3",
               "--warmup", "0.1", "--jit-warmup", "0", *QUICK_RELAY_CHECK, "--no-figures", "--format", "json"]
    try:
        first = subprocess.run([*command, "--results-dir", str(tmp_path / "a")], cwd=ROOT, capture_output=True,
                               text=True, timeout=300)
        assert first.returncode == 0, first.stderr
        assert f"first-use: not built yet, built now, on first use (kept for later runs and clones): cp " \
               f"build/raw_tcp_client build/{binary}" in first.stderr
        (cell,) = json.loads(first.stdout)["cells"]
        assert cell["status"] == "ok" and cell["attempts"][0]["roundtrips"] > 0
        second = subprocess.run([*command, "--results-dir", str(tmp_path / "b")], cwd=ROOT, capture_output=True,
                                text=True, timeout=300)
        assert second.returncode == 0 and "on first use" not in second.stderr
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.parametrize("arguments,message", [
    (["websocket", "java"], "native/build.sh websocket: unknown set 'java' (go, rust or cpp)"),
    (["go"], "usage: sh native/build.sh [websocket [go] [rust] [cpp]]"),
])
def test_the_build_script_refuses_what_it_does_not_build_in_one_line(arguments, message):
    completed = subprocess.run(["sh", "native/build.sh", *arguments], cwd=ROOT, capture_output=True, text=True,
                               timeout=60)
    assert completed.returncode == 2 and completed.stderr.strip() == message and completed.stdout == ""


def test_outside_ci_a_test_needing_a_program_that_could_not_be_built_skips_saying_why():
    """A test whose parameters name an unbuilt program, or that tests/conftest.py lists as needing one, skips with
    the program's reason; one that needs none, or only built ones, runs."""
    from types import SimpleNamespace

    from tests.conftest import native_skip
    unbuilt = {"cpp-websocketpp": "'build/cpp_ws_client' could not be built here: a header is missing"}

    def item(path: str, name: str, **params):
        return SimpleNamespace(path=Path(path), originalname=name, name=name,
                               callspec=SimpleNamespace(params=params) if params else None)

    assert native_skip(item("test_drivers.py", "t", client="cpp-websocketpp"), unbuilt) == (
        "cpp-websocketpp: 'build/cpp_ws_client' could not be built here: a header is missing")
    assert native_skip(item("test_drivers.py", "t", client="websockets"), unbuilt) is None
    assert native_skip(item("test_native_websocket.py", "anything"), unbuilt).startswith("cpp-websocketpp: ")
    threads = "test_a_threads_servers_room_reaches_its_members_on_every_thread_and_its_own_only"
    assert native_skip(item("test_room_placement.py", threads), unbuilt).startswith("cpp-websocketpp: ")
    assert native_skip(item("test_room_placement.py", threads), {"go-gorilla": "no go"}) is None
    assert native_skip(item("test_rooms.py", "t"), unbuilt) is None
