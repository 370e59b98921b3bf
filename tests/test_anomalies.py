"""Anomaly detection as pure functions: the log-space model, its outlier removal, and the signal rules."""

import pytest

from pingpong.harness.analysis.anomalies import annotate, fit_log_factors, model_outliers, rule_flags
from pingpong.harness.analysis.stats import summarize
from pingpong.harness.analysis.summary import CellSummary, SideCpu

SERVERS = {"s1": 3000.0, "s2": 5000.0, "s3": 8000.0, "s4": 12000.0}
CLIENTS = {"c1": 0.5, "c2": 0.8, "c3": 1.0, "c4": 1.4}


def product_matrix(noise=None):
    """rate = server factor × client factor, optionally times a per-cell multiplier."""
    noise = noise or {}
    return {(s, c): sf * cf * noise.get((s, c), 1.0) for s, sf in SERVERS.items() for c, cf in CLIENTS.items()}


def test_fit_recovers_a_product_matrix_exactly():
    """On an exact server × client product the fitted factors reproduce every cell."""
    rates = product_matrix()
    server_factor, client_factor = fit_log_factors(rates)
    import math
    for (s, c), rate in rates.items():
        assert math.exp(server_factor[s] + client_factor[c]) == pytest.approx(rate, rel=1e-6)


def test_one_bad_cell_is_flagged_and_no_other():
    """A single cell at 1/10 of its product is the only outlier, with its expectation close to the product."""
    mild = {("s1", "c2"): 1.2, ("s3", "c4"): 0.85, ("s2", "c1"): 1.1}  # ordinary noise elsewhere
    rates = product_matrix({**mild, ("s2", "c3"): 0.1})
    verdicts = model_outliers(rates)
    assert [cell for cell, v in verdicts.items() if v["outlier"]] == [("s2", "c3")]
    assert verdicts[("s2", "c3")]["expected"] == pytest.approx(5000.0, rel=0.15)
    assert verdicts[("s2", "c3")]["ratio"] < 1 / 3


def test_a_healthy_matrix_with_noise_has_no_outlier():
    """Noise of ±30% is not an anomaly."""
    rates = product_matrix({("s1", "c1"): 1.3, ("s4", "c4"): 0.7, ("s2", "c3"): 0.75, ("s3", "c2"): 1.25})
    assert not any(v["outlier"] for v in model_outliers(rates).values())


def test_the_published_table_flags_its_two_slow_cells():
    """Lemire's table: two slow cells in one column hide each other from a one-at-a-time test, not from this one."""
    published = {("sanic", "websockets"): 3700, ("sanic", "ws"): 5200, ("blacksheep", "websockets"): 3000,
                 ("blacksheep", "ws"): 200, ("aiohttp", "websockets"): 3600, ("aiohttp", "ws"): 270,
                 ("node", "websockets"): 6000, ("node", "ws"): 19000}
    outliers = {cell for cell, v in model_outliers(published).items() if v["outlier"]}
    assert outliers == {("blacksheep", "ws"), ("aiohttp", "ws")}


def test_a_cell_alone_in_its_row_is_not_judged():
    """Without another cell in its row, a cell has no expectation and cannot be an outlier."""
    rates = product_matrix()
    rates[("lonely", "c1")] = 1.0
    assert ("lonely", "c1") not in model_outliers(rates)


HEALTHY = {"segments_per_message": 1.0, "delayed_acks_per_roundtrip": 0.0, "retransmits_per_roundtrip": 0.0,
           "compression_negotiated": None, "server_tcp_nodelay": True, "client_tcp_nodelay": True,
           "server_cpu_utilization": 0.9, "client_cpu_utilization": 0.6,
           "server_minor_faults_per_roundtrip": 0.01, "client_minor_faults_per_roundtrip": 0.0}


def signals(status="ok", rate=None, **figures) -> CellSummary:
    """A cell summary with these figures, named as in the results file (e.g. "server_cpu_utilization")."""
    server_cpu, client_cpu = (SideCpu(utilization=figures.pop(f"{side}_cpu_utilization", None),
                                      minor_faults_per_roundtrip=figures.pop(f"{side}_minor_faults_per_roundtrip",
                                                                             None))
                              for side in ("server", "client"))
    return CellSummary(status=status, roundtrips_per_s=summarize([rate]) if rate is not None else None,
                       server_cpu=server_cpu, client_cpu=client_cpu, **figures)


def test_healthy_signals_raise_no_flag():
    assert rule_flags(signals(**HEALTHY), payload_size=4) == []


@pytest.mark.parametrize("change, words", [
    ({"segments_per_message": 3.0}, "3.00 TCP segments per message"),
    ({"delayed_acks_per_roundtrip": 2.0}, "2.00 delayed ACKs per roundtrip"),
    ({"retransmits_per_roundtrip": 0.5}, "retransmissions"),
    ({"compression_negotiated": "permessage-deflate"}, "permessage-deflate negotiated for 4-byte messages"),
    ({"server_tcp_nodelay": False}, "TCP_NODELAY off on the server's sockets"),
    ({"server_cpu_utilization": 0.02, "client_cpu_utilization": 0.03}, "both sides mostly wait"),
    ({"client_minor_faults_per_roundtrip": 4.0}, "4.0 page faults per roundtrip on the client side"),
])
def test_each_rule_fires_on_its_signal_alone(change, words):
    flags = rule_flags(signals(**{**HEALTHY, **change}), payload_size=4)
    assert len(flags) == 1 and words in flags[0]


def test_compression_on_large_messages_is_not_flagged():
    """Deflate can pay off for big messages: the rule is about small ones only."""
    assert rule_flags(signals(**{**HEALTHY, "compression_negotiated": "permessage-deflate"}), payload_size=65536) == []


def test_large_messages_may_take_several_segments():
    """A 64 KiB message is split by the MSS and draws pure ACKs: 3 segments per message is normal there."""
    assert rule_flags(signals(**{**HEALTHY, "segments_per_message": 3.0}), payload_size=65536) == []
    assert rule_flags(signals(**{**HEALTHY, "segments_per_message": 3.0}), payload_size=16) != []


def test_annotate_adds_flags_and_expectations_to_measured_cells_only():
    rates = product_matrix({("s2", "c3"): 0.1})
    summaries = {cell: signals(rate=rate, **HEALTHY) for cell, rate in rates.items()}
    summaries[("s9", "c9")] = CellSummary(status="skipped", reason="unavailable")
    summaries = annotate(summaries, payload_size=4)
    assert summaries[("s2", "c3")].flags[0].startswith("10.0× slower than its server and client predict")
    assert summaries[("s1", "c1")].flags == ()
    assert summaries[("s1", "c1")].expected_roundtrips_per_s == pytest.approx(1500, rel=0.01)
    assert summaries[("s9", "c9")].flags is None and "flags" not in summaries[("s9", "c9")].to_json()


def test_handshake_workload_skips_the_long_lived_connection_rules():
    """Segments, delayed ACKs and a half-open connection's TCP_NODELAY say nothing about handshakes."""
    odd = signals(**{**HEALTHY, "segments_per_message": 5.0, "delayed_acks_per_roundtrip": 1.0,
                     "client_tcp_nodelay": False})
    assert rule_flags(odd, payload_size=4, workload="handshake") == []
    assert len(rule_flags(odd, payload_size=4, workload="pingpong")) == 3


def test_an_open_loop_cell_is_odd_only_when_it_saturates_at_the_offered_rate():
    """Every open-loop cell answers its offered rate, so the rate model judges nothing there; a cell that answers
    within its latency threshold is not odd whatever its page faults at that rate; one that saturates is, and says
    why. The same figures in a closed loop flag the slow cell and the faults."""
    rates = product_matrix({("s2", "c3"): 0.1})
    answering = {"open_loop": {"saturated": False, "saturated_because": None}}
    saturated = {"open_loop": {"saturated": True, "saturated_because": "p99 12.1 ms > 10 ms"}}
    faulty = {**HEALTHY, "server_cpu_utilization": 0.1, "client_cpu_utilization": 0.1,
              "server_minor_faults_per_roundtrip": 4.0}
    summaries = {cell: signals(rate=rate, workload=saturated if cell == ("s1", "c1") else answering, **faulty)
                 for cell, rate in rates.items()}
    open_loop = annotate(summaries, payload_size=4, workload="open-loop")
    assert open_loop[("s1", "c1")].flags == ("saturated at the offered rate: p99 12.1 ms > 10 ms",)
    assert all(summary.flags == () for cell, summary in open_loop.items() if cell != ("s1", "c1"))
    closed = annotate(summaries, payload_size=4, workload="pingpong")
    assert closed[("s2", "c3")].flags[0].startswith("10.0× slower")
    assert any("page faults per roundtrip on the server side" in flag for flag in closed[("s1", "c2")].flags)


@pytest.mark.parametrize("runtime,malloc,named", [
    ("python", "as-is", "a Python side with --malloc as-is"), ("python", "settled", "a Python side: glibc"),
    ("node", "settled", "a Node.js side: V8's heap"), ("bun", None, "a Bun side: JavaScriptCore's heap"),
    ("native", None, "a compiled side")])
def test_a_page_fault_flag_names_the_side_and_its_runtime(runtime, malloc, named):
    """The reason names the side that faults and what its own runtime does, not another runtime's cause."""
    odd = signals(**{**HEALTHY, "client_minor_faults_per_roundtrip": 4.0})
    flags = rule_flags(odd, payload_size=4, runtimes={"server": "python", "client": runtime}, malloc=malloc)
    assert flags == [f"4.0 page faults per roundtrip on the client side: it maps fresh memory for messages "
                     f"({named}" + flags[0].split(named, 1)[1]]
    if runtime != "python":
        assert "Python" not in flags[0] and "malloc" not in flags[0]


@pytest.mark.parametrize("faults", [0.6, 0.9, 1.7])
def test_a_garbage_collectors_faults_per_roundtrip_are_not_a_buffer_mapped_per_message(faults):
    """A Node.js client's heap took 0.2-1.7 faults per roundtrip in the malloc sweep and 0.6-0.9 in a healthy
    node-ws pair on a slow host, in both halves of the window's interior; a side that maps each message's buffer
    takes 4 (a Python side as-is). Only the second is flagged, whatever the host's speed."""
    collected = signals(**{**HEALTHY, "client_minor_faults_per_roundtrip": faults})
    assert rule_flags(collected, payload_size=4, runtimes={"server": "node", "client": "node"}) == []
    mapped = signals(**{**HEALTHY, "client_minor_faults_per_roundtrip": 4.0})
    assert rule_flags(mapped, payload_size=4, runtimes={"server": "node", "client": "python"}, malloc="as-is")


def test_every_flag_the_rules_write_has_a_cause_to_group_by():
    """Each rule's flag maps to its own short cause (a terminal groups cells by it)."""
    from pingpong.harness.analysis.anomalies import CAUSES, flag_cause

    odd = signals(**{**HEALTHY, "segments_per_message": 5.0, "delayed_acks_per_roundtrip": 1.0,
                     "retransmits_per_roundtrip": 1.0, "compression_negotiated": "permessage-deflate",
                     "client_tcp_nodelay": False, "server_minor_faults_per_roundtrip": 4.0,
                     "client_minor_faults_per_roundtrip": 4.0, "server_cpu_utilization": 0.1,
                     "client_cpu_utilization": 0.1})
    flags = rule_flags(odd, payload_size=4)
    causes = [flag_cause(flag) for flag in flags]
    assert len(flags) == 8 and len(set(causes)) == 8
    assert set(causes) <= {cause for _, cause in CAUSES}
    model_flag = "3.2× slower than its server and client predict (1 against 3)"
    assert flag_cause(model_flag) == "slow for this pair (the model)"


def test_page_faults_a_window_pays_once_raise_no_flag():
    """4 faults per roundtrip over the whole window, none in its interior (a client's report built at the window's
    end, a heap that grew once): the side maps no memory per message, and is not flagged; its interior is."""
    from dataclasses import replace
    odd = signals(**{**HEALTHY, "client_minor_faults_per_roundtrip": 4.0})
    once = replace(odd, client_cpu=replace(odd.client_cpu, interior_faults_per_roundtrip=0.0))
    assert rule_flags(once, payload_size=4) == []
    per_message = replace(odd, client_cpu=replace(odd.client_cpu, minor_faults_per_roundtrip=0.05,
                                                  interior_faults_per_roundtrip=3.0))
    assert "3.0 page faults per roundtrip on the client side" in rule_flags(per_message, payload_size=4)[0]
