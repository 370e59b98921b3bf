"""Pure logic of the workloads beyond one closed-loop pair: joining broadcast timestamps, open-loop saturation, the
memory-per-connection fit, how a cell's work is spread over client processes, and the options that shape them."""

import os
import socket
import subprocess

import pytest

from pingpong.harness.analysis import workload_figures
from pingpong.harness.measure.attempt_plan import ClientShare, client_command, client_shares
from pingpong.harness.report import workloads as workload_report
from pingpong.harness.results import histograms
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import load_manifest
from pingpong.harness.system import cpu, listeners


def sender(send_ns, first_ns, last_ns, window_first=1, window_count=2, receivers=2, elapsed_s=0.5):
    return {"roundtrips": window_count, "elapsed_s": elapsed_s, "roundtrips_per_s": window_count / elapsed_s,
            "latency": {"unit": "ns", "recorded": True, "hdr_histogram": None},
            "broadcast": {"role": "sender", "receivers": receivers, "ack_processes": 1, "send_ns": send_ns,
                          "window_first": window_first, "window_count": window_count,
                          "first_ns": first_ns, "last_ns": last_ns}}


def receivers_part(first_ns, last_ns, receivers=3):
    return {"roundtrips": len(first_ns), "elapsed_s": 0.5, "roundtrips_per_s": 1.0,
            "broadcast": {"role": "receivers", "receivers": receivers, "first_ns": first_ns, "last_ns": last_ns}}


def test_broadcast_joins_first_and_last_receivers_across_processes_over_the_window_only():
    send = [1000, 2000, 3000]
    report, figures = workload_figures.broadcast([
        sender(send, first_ns=[1100, 2100, 3300], last_ns=[1200, 2400, 3400]),
        receivers_part(first_ns=[1150, 2050, 3200], last_ns=[1300, 2900, 3250]),
    ])
    broadcast = figures["broadcast"]
    assert broadcast["receivers"] == 5 and broadcast["messages"] == 2 and broadcast["deliveries"] == 10
    assert report["roundtrips"] == 10 and report["roundtrips_per_s"] == pytest.approx(20.0)
    first = histograms.merge([broadcast["latency_first_histogram"]])
    last = histograms.merge([broadcast["latency_last_histogram"]])
    # window = messages 1 and 2: first receivers at 2050 and 3200, last at 2900 and 3400
    assert first.get_total_count() == 2 and last.get_total_count() == 2
    assert first.get_min_value() == pytest.approx(50, abs=1) and first.get_max_value() == pytest.approx(200, abs=1)
    assert last.get_min_value() == pytest.approx(400, abs=1) and last.get_max_value() == pytest.approx(900, abs=1)
    assert "send_ns" not in report["broadcast"] and "first_ns" not in report["per_process"][1]


def test_broadcast_fails_when_a_receivers_process_missed_a_message():
    with pytest.raises(workload_figures.WorkloadError, match="client process 1's receivers report 2 messages, "
                                                             "the sender sent 3"):
        workload_figures.broadcast([sender([1, 2, 3], [2, 3, 4], [2, 3, 4]), receivers_part([2, 3], [2, 3])])


def test_broadcast_fails_when_the_roles_are_wrong_or_the_window_is_outside_the_messages():
    with pytest.raises(workload_figures.WorkloadError, match="role sender"):
        workload_figures.broadcast([receivers_part([1], [1])])
    with pytest.raises(workload_figures.WorkloadError, match="not within"):
        workload_figures.broadcast([sender([1, 2], [2, 3], [2, 3], window_first=1, window_count=5)])


@pytest.mark.parametrize("p99_ns, share, saturated", [(2e6, 1.0, False), (20e6, 1.0, True), (2e6, 0.9, True),
                                                      (None, None, False)])
def test_saturation_rule(p99_ns, share, saturated):
    verdict = workload_figures.saturation(p99_ns, share, saturation_p99_ms=10)
    assert verdict["saturated"] is saturated
    assert (verdict["saturated_because"] is None) is (not saturated)


def test_open_loop_figures_sum_over_processes_and_weigh_the_mean_lag_by_messages_sent():
    reports = [{"roundtrips_per_s": 99, "open_loop": {"offered_per_s": 100, "achieved_per_s": 99, "sent": 100, "answered": 100,
                              "answered_in_window": 98, "send_lag_max_ns": 50, "send_lag_mean_ns": 10}},
               {"roundtrips_per_s": 97, "open_loop": {"offered_per_s": 100, "achieved_per_s": 97, "sent": 300, "answered": 300,
                              "answered_in_window": 290, "send_lag_max_ns": 80, "send_lag_mean_ns": 30}}]
    figures = workload_figures.open_loop(reports, rate_per_pair=50)
    assert figures["offered_per_s"] == 200 and figures["achieved_per_s"] == 196 and figures["sent"] == 400
    assert figures["send_lag_max_ns"] == 80 and figures["send_lag_mean_ns"] == pytest.approx(25)


def test_least_squares_slope_and_memory_fit_per_round():
    assert workload_report.least_squares_slope([(0, 10), (10, 30), (20, 50)]) == pytest.approx(2)
    assert workload_report.least_squares_slope([(5, 1), (5, 2)]) is None
    entries = [{"idle_connections": n, "idle_memory_by_round": {
        str(r): {"pss_bytes": 1000 + n * (4000 + 100 * r), "rss_bytes": 2000 + n * 5000, "established": n + 2}
        for r in range(1, 7)}} for n in (0, 100, 200)]
    fit = workload_report.memory_fit(entries)
    assert fit["rounds"] == 6 and fit["largest_held"] == 200
    assert 4100 <= fit["bytes_per_connection"] <= 4600
    assert fit["interval_low"] == pytest.approx(4100) and fit["interval_high"] == pytest.approx(4600)
    assert workload_report.memory_fit(entries, "rss_bytes")["bytes_per_connection"] == pytest.approx(5000)


def test_saturation_of_a_cell_is_the_first_saturated_rate_and_the_last_sustained_below_it():
    def entry(rate, saturated):
        return {"workload": {"open_loop": {"rate_per_pair": rate, "saturated": saturated,
                                           "saturated_because": "p99" if saturated else None}}}

    found = workload_report.saturation_of([entry(4000, True), entry(1000, False), entry(2000, False),
                                           entry(8000, True)])
    assert found["sustained_rate_per_pair"] == 2000 and found["saturating_rate_per_pair"] == 4000
    assert workload_report.saturation_of([entry(10, False)])["saturating_rate_per_pair"] is None


BASE = CellSettings(duration_s=1, warmup_s=0.1, loop="auto", compression="default", payload_size=4,
                    payload_kind="text-ascii", ready_timeout_s=5, stall_timeout_s=5, pin=False)


def test_client_shares_spread_receivers_and_idle_connections():
    from dataclasses import replace

    broadcast = client_shares(replace(BASE, workload="broadcast", receivers=10, client_processes=3))
    assert [(s.role, s.receivers, s.ack_processes) for s in broadcast] == [("sender", 4, 2), ("receivers", 3, 0),
                                                                          ("receivers", 3, 0)]
    assert len(client_shares(replace(BASE, workload="broadcast", receivers=2, client_processes=5))) == 2
    # idle connections go to holders of their own, after the pairs' processes: the ones left over, at least one
    idle = client_shares(replace(BASE, idle_connections=1001, client_processes=2, pairs=2))
    assert [(s.pairs, s.idle_connections) for s in idle] == [(1, 0), (1, 0), (0, 1001)]
    idle = client_shares(replace(BASE, idle_connections=1001, client_processes=3))
    assert [(s.pairs, s.idle_connections) for s in idle] == [(1, 0), (0, 501), (0, 500)]


def test_client_command_carries_the_workload_flags(tmp_path):
    from dataclasses import replace
    from pathlib import Path

    client = next(i for i in load_manifest(Path("manifest.toml")) if i.role == "client" and i.name == "websockets")
    argv = client_command(client, replace(BASE, workload="broadcast", receivers=5), "ws://x/r", 1, Path("."),
                          ClientShare(receivers=5, role="sender", ack_processes=1))
    assert argv[argv.index("--receivers") + 1] == "5" and argv[argv.index("--broadcast-role") + 1] == "sender"
    assert argv[argv.index("--ack-processes") + 1] == "1"
    argv = client_command(client, replace(BASE, rate=1500.0, idle_connections=7), "ws://x/r", 1, Path("."))
    assert argv[argv.index("--rate") + 1] == "1500" and argv[argv.index("--idle-connections") + 1] == "7"
    assert "--receivers" not in argv


def test_established_connections_counts_the_server_side_of_each_connection():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        port = listener.getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
        accepted = [listener.accept()[0] for _ in range(5)]
        other = subprocess.Popen(["sleep", "30"])
        try:
            assert listeners.established_connections(port) == 5
            assert listeners.established_connections(port, os.getpid()) == 5  # this process holds both sides
            assert listeners.established_connections(port, other.pid) == 0  # a process that holds none
        finally:
            other.kill()
            other.wait()
            for sock in clients + accepted:
                sock.close()


def test_tree_memory_reads_rss_and_pss_of_this_process():
    import os

    memory = cpu.tree_memory(os.getpid())
    assert memory["rss_bytes"] > 1_000_000 and 0 < memory["pss_bytes"] <= memory["rss_bytes"]
