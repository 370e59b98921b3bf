"""Shared fixtures: the manifest, servers started for a test, and a check that no process outlives its test."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import psutil
import pytest

from pingpong.harness import probe, processes
from pingpong.harness.manifest import load_manifest, resolve_command

ROOT = Path(__file__).resolve().parent.parent
IMPLEMENTATIONS = load_manifest(ROOT / "manifest.toml")
SERVERS = [i for i in IMPLEMENTATIONS if i.role == "server"]
CLIENTS = [i for i in IMPLEMENTATIONS if i.role == "client"]
WEBSOCKET_SERVERS = [s for s in SERVERS if s.protocol == "websocket"]
RAW_TCP_SERVERS = [s for s in SERVERS if s.protocol == "raw-tcp"]
COMPATIBLE_PAIRS = [(s, c) for s in SERVERS for c in CLIENTS if s.protocol == c.protocol]
TEST_IMPLEMENTATIONS = load_manifest(ROOT / "tests" / "manifest.toml")


def url_scheme(implementation) -> str:
    return "tcp" if implementation.protocol == "raw-tcp" else "ws"


def by_name(role: str, name: str):
    for implementation in IMPLEMENTATIONS + TEST_IMPLEMENTATIONS:
        if implementation.role == role and implementation.name == name:
            return implementation
    raise KeyError(name)


TEST_TOKEN_ENV = "PINGPONG_TEST_TOKEN"


def processes_carrying(token: str) -> list[psutil.Process]:
    """Live processes whose environment carries this test's token: exactly those the test started, at any depth.

    Every child inherits the token (the harness passes os.environ on), so grandchildren reparented to init are
    found too, and processes the test did not start (a developer's shell, other tests' runs) never are.
    """
    marker = f"{TEST_TOKEN_ENV}={token}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as environ:
                if marker not in environ.read().split(b"\0"):
                    continue
            process = psutil.Process(int(entry.name))
            if process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (OSError, psutil.Error):
            continue
    return found


@pytest.fixture(autouse=True)
def no_process_left_behind(monkeypatch):
    """After every test, no process the test started (directly or not) may still be running."""
    token = uuid.uuid4().hex
    monkeypatch.setenv(TEST_TOKEN_ENV, token)
    yield
    deadline = time.monotonic() + 5
    leftovers = processes_carrying(token)
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.05)
        leftovers = processes_carrying(token)
    described = [(p.pid, p.cmdline()) for p in leftovers]
    for process in leftovers:  # they carry this test's token: started by it, so ours to end
        try:
            process.kill()
        except psutil.Error:
            pass
    assert not leftovers, f"processes left running: {described}"


@pytest.fixture
def start_server(tmp_path):
    """Start a server implementation on a free port; yields a function returning its ws:// base URL."""
    started: list[processes.ManagedProcess] = []

    def start(implementation, *extra: str) -> str:
        port = processes.free_port()
        argv = resolve_command(implementation, ROOT) + ["--host", "127.0.0.1", "--port", str(port), *extra]
        process = processes.start(f"{implementation.name}-{port}", argv, ROOT, tmp_path)
        started.append(process)
        base_url = f"{url_scheme(implementation)}://127.0.0.1:{port}"
        probe.wait_until_ready(base_url, process, timeout_s=20)
        return base_url

    yield start
    for process in started:
        processes.stop(process)
        assert processes.group_members(process.pid) == [], f"{process.name}: group members left after stop"
