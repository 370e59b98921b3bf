"""Every server with every client, for a short real run through the orchestrator's attempt runner.

One server per implementation serves all its clients here (started and verified as a run does, each client in a
room of its own): the servers' lifecycle is tested elsewhere, and their clean stop when this module ends.
"""

import pytest

from pingpong.harness.measure.local import run_attempt_on
from pingpong.harness.results.histograms import latency_summary, merge
from pingpong.harness.settings.cell import CellSettings
from tests.conftest import CLIENTS, COMPATIBLE_PAIRS, QUICK_RELAY_SILENCE_S, ROOT, SERVERS

# A window of 0.05 s holds a hundred verified roundtrips or more even on a busy machine (cpprestsdk's, the slowest
# pair here, take about 0.3 ms each): these tests count them and check the reports, they measure no rate (223 tests:
# with 0.5 s after 0.2 s of warmup this file took 191 s, with 0.1 s after 0.05 s 66 s).
SHORT = CellSettings(duration_s=0.05, warmup_s=0.02, loop="auto", compression="default", payload_size=4,
                     payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=True,
                     relay_silence_s=QUICK_RELAY_SILENCE_S)


@pytest.mark.parametrize("server,client", COMPATIBLE_PAIRS, ids=[f"{s.name}-x-{c.name}" for s, c in COMPATIBLE_PAIRS])
def test_pair_completes_verified_roundtrips(server, client, shared_servers):
    """The pair passes relay verification, completes roundtrips with zero errors, and reports per the contract."""
    attempt = run_attempt_on(shared_servers.get(server, SHORT), client, SHORT, repeat=1, project_root=ROOT)
    assert attempt.status == "ok", attempt.reason
    report = attempt.client_report
    assert report["errors"] == 0 and report["error"] is None
    assert attempt.roundtrips >= 1 and attempt.roundtrips == report["roundtrips"]
    # The window ends at the first roundtrip completed after the deadline: at least the duration, and less than
    # duration + stall timeout (one roundtrip may be slow on a busy machine, none may stall).
    assert SHORT.duration_s <= attempt.elapsed_s < SHORT.duration_s + SHORT.stall_timeout_s
    assert report["payload"] == {"kind": "text-ascii", "size": 4}
    assert [c["name"] for c in report["connections"]] == ["A", "B"]
    assert all(c["family"] == "ipv4" for c in report["connections"])
    assert report["runtime"]["version"]
    assert (report["libraries"] or client.protocol == "raw-tcp"  # the floors have none: the protocol's is RFC 6455
            or "protocol-floor" in client.sets), "a WebSocket client must name its library versions"
    assert latency_summary(merge([attempt.latency_histogram]))["count"] == attempt.roundtrips
    assert attempt.server_info["implementation"] == server.name
    assert attempt.server_cpu_s is not None and attempt.client_cpu_s is not None
    # The server's clean exit on SIGTERM is asserted when the module's shared servers are stopped (conftest).


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: f"client-{c.name}")
@pytest.mark.parametrize("kind,size", [("binary", 1000), ("text-utf8", 37)])
def test_clients_verify_other_payload_kinds(client, kind, size, shared_servers):
    """Binary and multi-byte text payloads of odd sizes relay byte-exact through a server."""
    server = next(s for s in SERVERS if s.name == ("websockets" if client.protocol == "websocket" else "raw-tcp-c"))
    settings = CellSettings(**{**SHORT.__dict__, "payload_kind": kind, "payload_size": size})
    attempt = run_attempt_on(shared_servers.get(server, settings), client, settings, repeat=1, project_root=ROOT)
    assert attempt.status == "ok", attempt.reason
    assert attempt.client_report["payload"] == {"kind": kind, "size": size}


def test_every_server_and_client_has_a_partner():
    """Each implementation is exercised: it appears in at least one compatible pair."""
    assert {s.name for s, _ in COMPATIBLE_PAIRS} == {s.name for s in SERVERS}
    assert {c.name for _, c in COMPATIBLE_PAIRS} == {c.name for c in CLIENTS}
