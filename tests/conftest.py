"""Shared fixtures: the manifest, servers started for a test, and a check that no process outlives its test."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from pingpong import probe, processes
from pingpong.manifest import load_manifest, resolve_command

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


def processes_started_since(since: float) -> list[psutil.Process]:
    """Processes started after `since` from this checkout (by their working directory), other than pytest."""
    found = []
    for process in psutil.process_iter(["pid", "create_time", "cwd", "status"]):
        info = process.info
        if info["pid"] == os.getpid() or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if info["create_time"] and info["create_time"] >= since and info["cwd"] and Path(info["cwd"]) == ROOT:
            found.append(process)
    return found


@pytest.fixture(autouse=True)
def no_process_left_behind():
    """After every test, no process the test started (directly or not) may still be running."""
    started = time.time() - 0.1
    yield
    deadline = time.monotonic() + 5
    leftovers = processes_started_since(started)
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.05)
        leftovers = processes_started_since(started)
    for process in leftovers:  # kill so one leak does not cascade into later tests, then fail
        try:
            process.kill()
        except psutil.Error:
            pass
    assert not leftovers, f"processes left running: {[(p.pid, p.cmdline()) for p in leftovers]}"


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
