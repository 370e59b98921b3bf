"""The attempt boundary without processes: the typed records' JSON mapping, the attempt plan, and the pure judge."""

import json
from dataclasses import replace

import pytest

from pingpong.harness.measure import attempt_plan, judge
from pingpong.harness.measure.boundary import ClientRun, Outcome, ServerFacts, Turn, WindowSamples, attempt_from, failed
from pingpong.harness.results import histograms
from pingpong.harness.settings.cell import CellSettings

SETTINGS = CellSettings(duration_s=1.0, warmup_s=0.5, loop="asyncio", compression="off", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=5.0, stall_timeout_s=5.0, pin=False)
SERVER = ServerFacts(ready_after_s=0.25, info={"pid": 7})


def report(**fields) -> str:
    body = {"format_version": 1, "roundtrips": 1000, "elapsed_s": 1.0, "roundtrips_per_s": 1000.0,
            "latency": {"unit": "ns", "recorded": True, "value_counts": [[50_000, 1000]]}, "error": None}
    return json.dumps(body | fields)


def run(index=0, exit_code=0, stdout=None, pid=100) -> ClientRun:
    return ClientRun(index, pid + index, exit_code, report() if stdout is None else stdout, "tail")


def test_client_run_and_window_samples_cross_as_json_and_come_back_equal():
    """What a host's agent sends is plain JSON and reads back into the same records."""
    client = run()
    window = WindowSamples(cpu_source="process-clock", server_cpu_s=0.4, client_cpu_s=0.5, wall_s=1.0,
                           tcp_counters={"InSegs": 2000}, sockets={"client": {"sockets": 2}}, start_wall_ns=10,
                           end_wall_ns=20)
    assert ClientRun.from_dict(json.loads(json.dumps(client.to_dict()))) == client
    assert WindowSamples.from_dict(json.loads(json.dumps(window.to_dict()))) == window


def test_an_ok_attempt_carries_the_report_the_window_and_the_server_facts():
    window = WindowSamples(cpu_source="schedstat", server_cpu_s=0.4, client_cpu_s=0.5, wall_s=1.0)
    outcome = judge.judge_attempt([run()], None, window, SETTINGS, SERVER)
    attempt = attempt_from(Turn(repeat=3, started_at="t", port=9, server_pid=7), outcome)
    assert attempt.ok and attempt.repeat == 3 and attempt.roundtrips == 1000 and attempt.roundtrips_per_s == 1000.0
    assert (attempt.server_cpu_s, attempt.client_cpu_s, attempt.cpu_source) == (0.4, 0.5, "schedstat")
    assert (attempt.ready_after_s, attempt.server_info, attempt.client_pid) == (0.25, {"pid": 7}, 100)
    assert histograms.latency_summary(histograms.merge([attempt.latency_histogram]))["count"] == 1000
    assert "value_counts" not in attempt.client_report["latency"]  # moved to latency_histogram


def test_without_a_server_cpu_figure_the_attempt_names_no_cpu_source():
    outcome = judge.judge_attempt([run()], None, WindowSamples(cpu_source="schedstat"), SETTINGS, SERVER)
    assert attempt_from(Turn(1, "t"), outcome).cpu_source is None


@pytest.mark.parametrize("stdout, reason", [
    ("", "client printed no JSON on stdout"),
    ("{}\n{}", "client printed 2 lines on stdout"),
    ("[1]", "client stdout is JSON but not an object"),
    (report(format_version=7), "client report format_version 7 is not one this orchestrator reads (1)"),
    (json.dumps({"roundtrips": 1, "elapsed_s": 1, "roundtrips_per_s": 1}), "client report has no format_version"),
])
def test_a_client_that_breaks_the_contract_fails_in_one_line(stdout, reason):
    outcome = judge.judge_attempt([run(stdout=stdout)], None, WindowSamples(), SETTINGS, SERVER)
    assert outcome.status == "client-failed" and outcome.reason.startswith(reason), outcome.reason
    assert "\n" not in outcome.reason


def test_a_failing_client_is_a_server_crash_when_the_server_had_exited():
    failing = run(exit_code=1, stdout=report(error="connection closed"))
    assert judge.judge_attempt([failing], None, WindowSamples(), SETTINGS, SERVER).status == "client-failed"
    crashed = judge.judge_attempt([failing], -11, WindowSamples(), SETTINGS, SERVER)
    assert crashed.status == "server-crashed"
    assert crashed.reason == "server exited with code -11 during the run; client: connection closed"


def test_with_several_processes_a_failure_names_its_process_and_files_the_first_pid():
    runs = [run(0), run(1, exit_code=1, stdout=report(error="stall"))]
    outcome = judge.judge_attempt(runs, None, WindowSamples(), replace(SETTINGS, client_processes=2), SERVER)
    assert (outcome.status, outcome.reason, outcome.client.pid) == ("client-failed", "client process 1: stall", 100)


def test_several_processes_merge_into_one_report():
    runs = [run(0), run(1)]
    outcome = judge.judge_attempt(runs, None, WindowSamples(), replace(SETTINGS, client_processes=2), SERVER)
    assert outcome.ok and outcome.measured.roundtrips == 2000 and outcome.measured.roundtrips_per_s == 2000.0
    assert outcome.client.report["client_processes"] == 2


def test_a_compiled_clients_pair_value_counts_become_the_drivers_pair_histograms():
    """per_pair_value_counts (the compiled clients') is read as per_pair_hdr_histograms, each counting its pair's
    roundtrips, and kept per process when two such processes merge; the value counts themselves are not kept."""
    pairs = {"pairs": 2, "per_pair_roundtrips": [600, 400],
             "per_pair_value_counts": [[[50_000, 500], [90_000, 100]], [[50_000, 400]]]}
    outcome = judge.judge_attempt([run(stdout=report(**pairs)), run(1, stdout=report(**pairs))], None,
                                  WindowSamples(cpu_source="schedstat", server_cpu_s=0.4, client_cpu_s=0.5, wall_s=1.0),
                                  replace(SETTINGS, pairs=4, client_processes=2), SERVER)
    assert outcome.status == "ok", outcome.reason
    for process in outcome.client.report["per_process"]:
        counts = [histograms.merge([encoded]).get_total_count() for encoded in process["per_pair_hdr_histograms"]]
        assert counts == process["per_pair_roundtrips"] == [600, 400]
    single, problem = judge.parse_client_report(report(**pairs))
    assert problem is None and "per_pair_value_counts" not in single and len(single["per_pair_hdr_histograms"]) == 2


def test_zero_roundtrips_is_a_failure():
    outcome = judge.judge_attempt([run(stdout=report(roundtrips=0))], None, WindowSamples(), SETTINGS, SERVER)
    assert (outcome.status, outcome.reason) == ("client-failed", "client reported zero roundtrips")


def test_timeouts_name_the_limit_that_was_applied():
    many = replace(SETTINGS, idle_connections=2000)  # 10 s more to open them, at 200 per second
    limit = attempt_plan.client_limit_s(many)
    assert limit == pytest.approx(0.5 + 1.0 + many.client_grace_s + 10.0)
    outcome = judge.client_timed_out(run(exit_code=-15), 1, limit, 100, SERVER, " on tls://h1:1")
    assert outcome.status == "timeout" and outcome.reason == f"client on tls://h1:1 did not finish within {limit:g} s"
    barrier = judge.barrier_timed_out(1, 2, attempt_plan.barrier_limit_s(many), ["a", "b"], 100, SERVER)
    assert barrier.reason == "start barrier: 1 of 2 client processes reported ready within 40 s"


def test_a_client_that_ends_before_the_barrier_released_says_so():
    outcome = judge.ended_before_release(run(1, exit_code=0), None, 100, SERVER, " on tls://h1:1")
    assert outcome.status == "client-failed" and outcome.client.pid == 100
    assert outcome.reason.startswith("client process 1 on tls://h1:1 ended before the start barrier released: it "
                                     "exited with code 0 without waiting for the go")


def test_rooms_and_names_are_built_in_one_place():
    assert attempt_plan.room_path(2, 1) == "/bench-r2"
    assert attempt_plan.room_path(2, 3, 1, 2) == "/bench-r2-n3-c1"
    assert attempt_plan.room_path(2, 1, 1, 2, "broadcast") == "/bench-r2"  # one room for sender and receivers
    assert [attempt_plan.process_name(i, 2, 1) for i in range(2)] == ["client0", "client1"]
    assert attempt_plan.process_name(0, 1, 4) == "client-n4"
    assert attempt_plan.room_probe_path(3) == "/__room_probe_3"


def test_the_window_is_opened_by_the_processes_with_pairs_or_by_the_broadcast_sender():
    idle = replace(SETTINGS, idle_connections=10, client_processes=2)
    shares = attempt_plan.client_shares(idle)
    assert [share.pairs for share in shares] == [1, 0] and attempt_plan.window_processes(idle, shares) == 1
    broadcast = replace(SETTINGS, workload="broadcast", receivers=4, client_processes=2)
    assert attempt_plan.window_processes(broadcast, attempt_plan.client_shares(broadcast)) == 1


def test_a_failed_outcome_becomes_an_attempt_without_figures():
    attempt = attempt_from(Turn(1, "t", server_pid=5), failed("not-ready", "no handshake"), server_exit_code=-15)
    assert (attempt.status, attempt.reason, attempt.server_exit_code) == ("not-ready", "no handshake", -15)
    assert attempt.roundtrips is None and attempt.cpu_source is None and not attempt.ok
    assert Outcome("ok").ok and not failed("timeout", "x").ok
