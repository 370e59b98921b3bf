"""Where the two sides run (--placement): the plan for each workload, the orchestrator moved off the shared CPU, every
thread of a runtime on its side's CPUs, the setting as a dimension, and the host's wakeup figure from the C floor."""

import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from pingpong.harness.analysis.excess import flagged_excess, healthy_pair
from pingpong.harness.analysis.host_wakeup import HostWakeup, share_of_roundtrip, wakeup_cost
from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.measure.local import run_attempt
from pingpong.harness.measure.server import start_server, stop_server
from pingpong.harness.results.records import Cell, RunResult
from pingpong.harness.settings import cell
from pingpong.harness.settings.cell import CellSettings, cpus_for, orchestrator_cpus, placement_of
from pingpong.harness.system import processes
from pingpong.harness.system.listeners import process_tree
from tests.conftest import QUICK_RELAY_SILENCE_S, ROOT, by_name
from tests.test_render import ok

SETTINGS = CellSettings(duration_s=0.2, warmup_s=0.1, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=10, pin=True,
                        relay_silence_s=QUICK_RELAY_SILENCE_S)
two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="placement needs two CPUs of ours")


@pytest.fixture
def cpus_0_and_1(monkeypatch):
    """The plan as on a host whose CPUs 0 and 1 are ours."""
    monkeypatch.setattr(cell, "our_cpus", lambda: (0, 1))


def test_auto_gives_a_serial_workload_one_cpu_and_a_parallel_one_the_sides_their_own(cpus_0_and_1):
    assert placement_of(SETTINGS) == "same-cpu"
    assert cpus_for(SETTINGS) == ({1}, {1}) and orchestrator_cpus(SETTINGS) == {0}
    assert placement_of(replace(SETTINGS, workload="handshake")) == "same-cpu"
    # (--workers 2 takes both CPUs here: placement shared, tests/test_server_cpus.py)
    for parallel in (dict(pairs=2), dict(client_processes=2), dict(rate=1000.0), dict(workload="broadcast")):
        settings = replace(SETTINGS, **parallel)
        assert placement_of(settings) == "split", parallel
        assert cpus_for(settings) == ({0}, {1}) and orchestrator_cpus(settings) is None


def test_an_explicit_placement_wins_and_no_pin_means_unpinned(cpus_0_and_1):
    assert placement_of(replace(SETTINGS, placement="split")) == "split"
    assert placement_of(replace(SETTINGS, pairs=4, placement="same-cpu")) == "same-cpu"
    assert cpus_for(replace(SETTINGS, placement="unpinned")) == (None, None)
    assert placement_of(replace(SETTINGS, pin=False, placement="split")) == "unpinned"
    planned = replace(SETTINGS, placement="split", server_cpus=(0,), client_cpus=(1,))
    assert cpus_for(planned) == ({0}, {1})


def test_one_cpu_of_ours_can_only_be_shared(monkeypatch):
    monkeypatch.setattr(cell, "our_cpus", lambda: (3,))
    settings = replace(SETTINGS, placement="split")
    assert placement_of(settings) == "same-cpu" and cpus_for(settings) == ({3}, {3})
    assert orchestrator_cpus(settings) is None  # nowhere else to go


@two_cpus
def test_the_orchestrator_leaves_the_cpu_and_comes_back():
    """this_process_on moves every thread of this process and restores them, so the plan never shrinks."""
    before = os.sched_getaffinity(0)
    target = {min(before)}
    with processes.this_process_on(target):
        assert os.sched_getaffinity(0) == target
    assert os.sched_getaffinity(0) == before
    assert cell.our_cpus() == tuple(sorted(before))


@two_cpus
@pytest.mark.parametrize("server_name", ["node-ws", "sanic"])
def test_every_thread_of_a_server_runs_on_its_sides_cpus(server_name, tmp_path):
    """Node.js (its libuv pool, V8's threads) and sanic (its worker process) started on one CPU have every thread
    of every process there."""
    shared = max(os.sched_getaffinity(0))
    started = start_server(by_name("server", server_name), SETTINGS, ROOT, tmp_path, {shared})
    try:
        assert started.problem is None, started.problem
        tree = process_tree(started.process.pid)
        threads = [(pid, int(tid)) for pid in tree for tid in os.listdir(f"/proc/{pid}/task")]
        assert len(threads) > 1
        assert {frozenset(os.sched_getaffinity(tid)) for _, tid in threads} == {frozenset({shared})}
    finally:
        stop_server(started)


@two_cpus
def test_a_same_cpu_attempt_records_its_placement_and_its_one_cpu():
    attempt = run_attempt(by_name("server", "node-ws"), by_name("client", "websockets"), SETTINGS, 1, ROOT)
    assert attempt.ok, attempt.reason
    shared = max(os.sched_getaffinity(0))
    assert (attempt.cpu_placement, attempt.server_cpus, attempt.client_cpus) == ("same-cpu", [shared], [shared])
    split = run_attempt(by_name("server", "node-ws"), by_name("client", "websockets"),
                        replace(SETTINGS, placement="split"), 1, ROOT)
    assert split.ok and split.cpu_placement == "split" and split.server_cpus != split.client_cpus


def test_the_wakeup_cost_is_a_quarter_of_the_roundtrips_difference_per_round():
    """60k/s on one CPU (16.7 µs a roundtrip) and 6k/s split (166.7 µs): 150 µs of four wakeups, 37.5 µs each."""
    host = wakeup_cost("raw-tcp-c × raw-tcp-c", [60_000, 50_000, 60_000], [6_000, 6_000, 5_000])
    assert host.wakeup_us.value == pytest.approx(37.5)
    assert (host.wakeup_us.low, host.wakeup_us.high) == (pytest.approx(36.67, abs=0.01), pytest.approx(45.83,
                                                                                                         abs=0.01))
    assert HostWakeup.from_json(host.to_json()) == host
    assert "37.5 µs" in host.sentence() and "60,000/s on one CPU" in host.sentence()
    assert share_of_roundtrip(host, 6_000) == pytest.approx(0.9)
    with pytest.raises(ValueError):
        wakeup_cost("x", [1.0], [])


def test_the_part_of_a_wakeup_charged_as_cpu_time_is_a_quarter_of_the_cpu_difference_per_round():
    """Both sides' CPU per roundtrip 16 µs on one CPU and 136, 116 and 156 split: 30, 25 and 35 µs of each of four
    wakeups show as CPU time, median 30; kept through the file; a file without them reads as before."""
    host = wakeup_cost("raw-tcp-c × raw-tcp-c", [60_000] * 3, [6_000] * 3, [16.0] * 3, [136.0, 116.0, 156.0])
    assert host.cpu_per_wakeup_us.value == pytest.approx(30.0)
    assert HostWakeup.from_json(host.to_json()) == host
    assert "30.0 µs of it shows as the sides' CPU time" in host.sentence()
    without = wakeup_cost("raw-tcp-c × raw-tcp-c", [60_000] * 3, [6_000] * 3)
    assert "cpu_per_wakeup_us" not in without.to_json() and HostWakeup.from_json(without.to_json()) == without
    with pytest.raises(ValueError):
        wakeup_cost("x", [1.0, 1.0], [2.0, 2.0], [1.0], [2.0])


def test_a_flagged_cell_is_set_against_the_same_clients_fastest_unflagged_server_of_its_runtime():
    """Its cost beyond that pair in µs per roundtrip, paired by round: 1e6/500 - 1e6/1000 = 1000 µs each round."""
    run = RunResult(started_at="t", command_line=[], configuration={}, environment={}, implementations={
        "server": {"slow-py": {"runtime": "python"}, "fast-py": {"runtime": "python"},
                   "fastest-node": {"runtime": "node"}}},
        cells=[Cell("slow-py", "c", attempts=[ok(r, 500) for r in (1, 2, 3)]),
               Cell("fast-py", "c", attempts=[ok(r, 1000) for r in (1, 2, 3)]),
               Cell("fastest-node", "c", attempts=[ok(r, 4000) for r in (1, 2, 3)])])
    summaries = summarize_run(run)
    summaries[("slow-py", "c")] = replace(summaries[("slow-py", "c")], flags=("odd",))
    summaries[("fast-py", "c")] = replace(summaries[("fast-py", "c")], flags=())
    summaries[("fastest-node", "c")] = replace(summaries[("fastest-node", "c")], flags=())
    runtimes = {("server", name): entry["runtime"] for name, entry in run.implementations["server"].items()}
    contenders = {"slow-py", "fast-py", "fastest-node"}
    assert healthy_pair(("slow-py", "c"), summaries, runtimes, contenders) == ("fast-py", "c")
    excess = flagged_excess(run, summaries, runtimes, contenders)
    assert list(excess) == [("slow-py", "c")]
    assert excess[("slow-py", "c")].difference.value == pytest.approx(1000)
    assert excess[("slow-py", "c")].text().startswith("+1,000 µs per roundtrip over fast-py × c")
    assert healthy_pair(("slow-py", "c"), summaries, runtimes, {"slow-py"}) is None


def test_placement_as_a_list_is_a_dimension_of_the_run():
    """Two placements are two points of one run, interleaved in its rounds, each its own server processes."""
    from pingpong.harness.settings.configuration import sweep_points

    resolved = type("Resolved", (), dict(loops=("auto",), compressions=("default",), tls_modes=(False,),
                                         mallocs=("settled",), young_generations=("fixed",), payload_sizes=(4,),
                                         payload_kinds=("text-ascii",),
                                         pairs=(1,), receivers=(1,), idle_connections=(0,), rates=(None,),
                                         workers=(1,), placements=("same-cpu", "split"),
                                         room_placements=("kernel",), interpreters=()))
    assert [point["placement"] for point in sweep_points(resolved)] == ["same-cpu", "split"]
    assert "placement" not in sweep_points(type("One", (resolved,), dict(placements=("auto",))))[0]


def test_an_unknown_placement_is_one_line_and_exit_2():
    completed = subprocess.run([sys.executable, "run_bench.py", "--placement", "same-cpu,nowhere", "--quick"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert "--placement 'same-cpu,nowhere': choose from auto, same-cpu, split, unpinned" in completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1


def test_the_pace_figures_say_how_much_of_a_cells_spread_the_cpus_pace_accounts_for():
    """Two cells whose slow rounds ran on a slow CPU: roundtrip time and pace correlate, and divided by the pace the
    rounds' spread is gone."""
    from pingpong.harness.analysis.pace import attempt_pace, pace_figures

    def paced(repeat, rate, pace):
        return replace(ok(repeat, rate), cpu_pace_ns={"cpu1": pace})

    slow_rounds = {1: 1.0, 2: 1.5, 3: 1.0, 4: 2.0}
    cells = [Cell(name, "c", attempts=[paced(r, base / factor, 90 * factor) for r, factor in slow_rounds.items()])
             for name, base in (("a", 1000), ("b", 4000))]
    run = RunResult(started_at="t", command_line=[], configuration={}, environment={}, implementations={},
                    cells=cells)
    figures = pace_figures(run)
    assert figures.cells == 2 and figures.attempts == 8
    assert figures.median_correlation == pytest.approx(1.0)
    assert figures.median_cv_per_pace == pytest.approx(0.0, abs=1e-9) and figures.median_cv > 0.3
    assert "median correlation +1.00 over 2 cells" in figures.sentence()
    assert attempt_pace(ok(1, 1000)) is None
    assert pace_figures(RunResult(started_at="t", command_line=[], configuration={}, environment={},
                                  implementations={}, cells=[Cell("a", "c", attempts=[ok(1, 1000)])])) is None


def interpreter_mapped_at(pid: int) -> str | None:
    """The lowest address at which the process maps this Python's binary, or None while it maps none."""
    binary = os.path.realpath(sys.executable)
    with open(f"/proc/{pid}/maps") as maps:
        starts = sorted(line.split("-")[0] for line in maps if line.rstrip().endswith(binary))
    return starts[0] if starts else None


@pytest.mark.parametrize("switch", ["1", None])
def test_the_fixed_layout_switch_starts_children_unrandomized_and_leaves_the_orchestrator_as_it_was(
        switch, monkeypatch, tmp_path):
    from pingpong.contract import FIXED_ADDRESS_LAYOUT_ENV
    from pingpong.harness.settings.environment import describe_environment
    if switch is None:
        monkeypatch.delenv(FIXED_ADDRESS_LAYOUT_ENV, raising=False)
    else:
        monkeypatch.setenv(FIXED_ADDRESS_LAYOUT_ENV, switch)
    own_before = open("/proc/self/personality").read()
    seen = []
    for number in range(2):
        child = processes.start(f"layout{number}", [sys.executable, "-c", "import time; time.sleep(30)"], ROOT,
                                tmp_path)
        try:
            # Popen returns once the child's exec has replaced its memory, which may be before the kernel has mapped
            # the new binary into it (seen on a loaded host: no interpreter in maps yet), so it is read until it is
            deadline = time.monotonic() + 5
            while not (interpreter := interpreter_mapped_at(child.pid)) and time.monotonic() < deadline:
                time.sleep(0.01)
            persona = int(open(f"/proc/{child.pid}/personality").read(), 16)
            assert interpreter, open(f"/proc/{child.pid}/maps").read()
            seen.append((bool(persona & processes.ADDR_NO_RANDOMIZE), interpreter))
        finally:
            processes.stop(child, grace_s=1)
    assert open("/proc/self/personality").read() == own_before
    fixed = switch == "1"
    assert [unrandomized for unrandomized, _ in seen] == [fixed, fixed]
    if fixed:  # one binary, one place: the two processes map the interpreter at the same address
        assert seen[0][1] == seen[1][1]
    assert (FIXED_ADDRESS_LAYOUT_ENV in describe_environment(ROOT)["measurement_switches"]) == fixed


TRACE = """# tracer: nop
#
          python-301     [000] d..2. 10.000001: sched_waking: comm=node pid=402 prio=120 target_cpu=001
          <idle>-0       [001] dNh2. 10.000020: sched_wakeup: comm=node pid=402 prio=120 target_cpu=001
            node-402     [001] d..2. 10.000100: sched_waking: comm=node pid=403 prio=120 target_cpu=001
            node-402     [001] d..2. 10.000101: sched_wakeup: comm=node pid=403 prio=120 target_cpu=001
 Timer-thread 2-410      [000] d..2. 10.000200: sched_waking: comm=python pid=301 prio=120 target_cpu=000
 Timer-thread 2-410      [000] d..2. 10.000201: sched_wakeup: comm=python pid=301 prio=120 target_cpu=000
            node-402     [001] d..2. 10.000300: sched_migrate_task: comm=node pid=403 prio=120 orig_cpu=1 dest_cpu=0
            node-402     [001] d..2. 10.000310: sched_wakeup: comm=node pid=403 prio=120 target_cpu=000
          python-301     [000] d..2. 10.000400: sched_wakeup: comm=other pid=999 prio=120 target_cpu=001
"""


def test_a_wakeup_crosses_cpus_when_the_wakers_cpu_is_not_the_one_chosen_for_the_woken_thread():
    """sched_waking is written on the waker's CPU, sched_wakeup names the woken thread's; a wakeup queued to the other
    CPU (written there by its interrupt) crosses, one on the waker's own CPU does not, one whose waking the trace
    lacks is counted but not judged; a move counts once; another process's thread counts for no side."""
    from pingpong.harness.system.wakeup_trace import WakeupCounts, count, event_filter
    counts = count(TRACE, {"server": {301, 410}, "client": {402, 403}})
    assert counts == {"server": WakeupCounts(wakeups=1, cross_cpu_wakeups=0, migrations=0),
                      "client": WakeupCounts(wakeups=3, cross_cpu_wakeups=1, migrations=1)}
    assert event_filter({403, 12}) == "pid == 12 || pid == 403"


@two_cpus
def test_helpers_across_puts_a_thread_pools_hand_offs_on_the_other_cpu_and_the_trace_counts_them(monkeypatch):
    """Node.js's ws client inflates aiohttp's deflated messages on its libuv pool: about 20 hand-offs a roundtrip,
    which stay on the client's CPU when split (2 wakeups a side cross, the messages') and all cross with placement
    helpers-across, whose record says how many threads it moved; the trace's instance is gone after each window."""
    from pingpong.harness.system import wakeup_trace
    if (why_not := wakeup_trace.available()) is not None:
        pytest.skip(why_not)
    monkeypatch.setenv(wakeup_trace.ENV, "1")
    monkeypatch.setenv("PINGPONG_RAW_WINDOWS", "1")  # no pauses: a continued thread is a wakeup too
    crossings = {}
    for placement in ("split", "helpers-across"):
        attempt = run_attempt(by_name("server", "aiohttp"), by_name("client", "node-ws"),
                              replace(SETTINGS, placement=placement), 1, ROOT)
        assert attempt.ok and attempt.cpu_placement == placement, attempt.reason
        server, client = attempt.server_scheduling, attempt.client_scheduling
        crossings[placement] = (server.cross_cpu_wakeups / attempt.roundtrips,
                                client.cross_cpu_wakeups / attempt.roundtrips, client.wakeups / attempt.roundtrips)
        assert not [name for name in os.listdir(wakeup_trace.TRACEFS / "instances")
                    if name.startswith(f"{wakeup_trace.INSTANCE_PREFIX}{os.getpid()}-")]
    server_split, client_split, client_woken = crossings["split"]
    assert 1.8 <= server_split <= 2.2 and 1.8 <= client_split <= 2.2  # one message each way per side
    assert client_woken > 10  # the pool's hand-offs, on the client's own CPU
    assert crossings["helpers-across"][1] > 10  # the same hand-offs, crossing
    assert attempt.warmup_helpers["across"] >= 1


def test_a_wakeup_trace_left_by_a_killed_run_is_removed_by_the_next_and_a_live_ones_kept():
    """An orchestrator killed with its window open leaves its tracefs instance, events on; the next run removes the
    instances whose process is gone, never another live run's."""
    from pingpong.harness.system import wakeup_trace
    if (why_not := wakeup_trace.available()) is not None:
        pytest.skip(why_not)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    instances = wakeup_trace.TRACEFS / "instances"
    left, live = (instances / f"{wakeup_trace.INSTANCE_PREFIX}{pid}-1" for pid in (gone.pid, os.getpid()))
    try:
        os.mkdir(left)
        os.mkdir(live)
        wakeup_trace.remove_stale()
        assert not left.exists() and live.exists()
    finally:
        for path in (left, live):
            if path.exists():
                os.rmdir(path)
