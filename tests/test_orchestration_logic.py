"""Orchestration logic without sockets: repeat interleaving and cell planning (run_attempt replaced by a fake)."""

from pathlib import Path

from pingpong.harness import catalog, matrix, results_files
from pingpong.harness.manifest import Implementation
from pingpong.harness.results import Attempt, Cell, RunResult
from pingpong.harness.runner import CellSettings

SETTINGS = CellSettings(duration_s=1, warmup_s=0, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=1, stall_timeout_s=1, pin=False)


def implementation(role, name, protocol="websocket", compression=("default", "off", "on")):
    return Implementation(name=name, role=role, runtime="python", protocol=protocol, command=("{python}",),
                          requires=(), loops=("auto",), compression=compression)


def test_repeats_are_interleaved_round_robin(tmp_path, monkeypatch):
    """All cells get repeat 1 before any cell gets repeat 2."""
    order = []

    def fake_attempt(server, client, settings, repeat, project_root):
        order.append((repeat, server.name, client.name))
        return Attempt(repeat=repeat, status="ok", reason=None, started_at="t", roundtrips=10, elapsed_s=1.0,
                       roundtrips_per_s=10.0)

    monkeypatch.setattr(matrix, "run_attempt", fake_attempt)
    servers = [implementation("server", "s1"), implementation("server", "s2")]
    clients = [implementation("client", "c1")]
    run = RunResult(started_at="2026-01-01T00:00:00+00:00", command_line=[], environment={},
                    configuration={"repeat": 3, "duration_s": 1, "warmup_s": 0, "loop": "auto",
                                   "compression": "default", "payload_size": 4, "payload_kind": "text-ascii"},
                    implementations={}, cells=[Cell("s1", "c1"), Cell("s2", "c1")])
    paths = results_files.ResultPaths.for_run(tmp_path, run.started_at)
    matrix.measure_matrix(run, SETTINGS, servers, clients, 3, paths)
    assert order == [(r, s, "c1") for r in (1, 2, 3) for s in ("s1", "s2")]
    assert paths.json.exists() and paths.latest_markdown.exists()


def test_incompatible_pairs_are_skipped_with_a_reason():
    server = implementation("server", "s", compression=("default", "off"))
    on = CellSettings(**{**SETTINGS.__dict__, "compression": "on"})
    assert "does not support --compression on" in catalog.skip_reason(server, implementation("client", "c"), on)
    raw = implementation("client", "raw", protocol="raw-tcp")
    assert catalog.skip_reason(server, raw, SETTINGS) == "server speaks websocket, client speaks raw-tcp"
    assert catalog.skip_reason(server, implementation("client", "c"), SETTINGS) is None


def test_leak_check_sees_only_processes_the_test_started():
    """The no-process-left check finds a child carrying this test's token and ignores one started without it."""
    import os
    import subprocess
    import sys

    from tests.conftest import TEST_TOKEN_ENV, processes_carrying

    token = os.environ[TEST_TOKEN_ENV]
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    foreign_env = {k: v for k, v in os.environ.items() if k != TEST_TOKEN_ENV}
    foreign = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=foreign_env)
    try:
        found = {p.pid for p in processes_carrying(token)}
        assert ours.pid in found and foreign.pid not in found
    finally:
        for process in (ours, foreign):
            process.kill()
            process.wait()


def test_pairs_are_spread_evenly_over_client_processes():
    from pingpong.harness.runner import pairs_per_process

    assert pairs_per_process(1, 1) == [1]
    assert pairs_per_process(10, 3) == [4, 3, 3]
    assert pairs_per_process(2, 5) == [1, 1]  # never a process without a pair
    assert sum(pairs_per_process(100, 7)) == 100
