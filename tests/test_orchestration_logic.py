"""Orchestration logic without sockets: cell planning, the leak check, pairs per process (rounds: test_rounds)."""

from pingpong.harness.settings import catalog
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import Implementation

SETTINGS = CellSettings(duration_s=1, warmup_s=0, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=1, stall_timeout_s=1, pin=False)


def implementation(role, name, protocol="websocket", compression=("default", "off", "on")):
    return Implementation(name=name, role=role, runtime="python", protocol=protocol, command=("{python}",),
                          requires=(), loops=("auto",), compression=compression)


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
    from pingpong.harness.settings.cell import pairs_per_process

    assert pairs_per_process(1, 1) == [1]
    assert pairs_per_process(10, 3) == [4, 3, 3]
    assert pairs_per_process(2, 5) == [1, 1]  # never a process without a pair
    assert sum(pairs_per_process(100, 7)) == 100


def test_node_sides_get_the_jit_warmup_and_others_keep_theirs():
    """A Node.js client warms up at least jit_warmup_s; the first client of a Node.js server process that much
    longer; a Python pair keeps its warmup, first client or not."""
    from dataclasses import replace

    from pingpong.harness.measure.attempt_plan import with_jit_warmup

    settings = replace(SETTINGS, warmup_s=0.2, jit_warmup_s=0.5)
    assert with_jit_warmup(settings, "python", "python", 1).warmup_s == 0.2
    assert with_jit_warmup(settings, "node", "python", 2).warmup_s == 0.5
    assert with_jit_warmup(settings, "python", "node", 1).warmup_s == 0.7
    assert with_jit_warmup(settings, "python", "node", 2).warmup_s == 0.2
    assert with_jit_warmup(settings, "node", "node", 1).warmup_s == 1.0
    assert with_jit_warmup(settings, "bun", "bun", 1).warmup_s == 0.2
    assert with_jit_warmup(replace(settings, jit_warmup_s=0.0), "node", "node", 1).warmup_s == 0.2


def test_the_roundtrips_a_tracer_saw_are_the_windows_share_of_received_bytes_after_its_attach():
    """A window whose first half of the bytes came before strace attached: the traced roundtrips are half the
    window's, whatever the mean rate says; a missing reading or an empty window gives no share."""
    from types import SimpleNamespace

    from pingpong.harness.commands.diagnose_profiles import attached_roundtrips
    from pingpong.harness.measure.window import window_share

    assert window_share(1000, 5000, 9000) == 0.5
    assert window_share(1000, 1000, 9000) == 1.0 and window_share(1000, 9000, 9000) == 0.0
    assert window_share(None, 5000, 9000) is None and window_share(1000, 1000, 1000) is None
    attempt = SimpleNamespace(roundtrips=800, roundtrips_per_s=1600.0)  # a 0.5 s window
    # attached for the last 0.4 s, but those made only a quarter of the roundtrips (strace slowed them)
    assert attached_roundtrips(attempt, {"window_share": 0.25, "traced_wall_s": 0.4}, "traced_wall_s") == 200
    assert attached_roundtrips(attempt, {"window_share": None, "traced_wall_s": 0.4}, "traced_wall_s") == 640
