"""Shared fixtures: the manifest, servers started for a test or shared by a module, and a check that no process
outlives its test."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import resource
import signal
import time
import uuid
from pathlib import Path

import psutil
import pytest

from pingpong.harness.measure.server import LocalServer, start_server
from pingpong.harness.results import histograms
from pingpong.harness.settings.cell import CellSettings, cpus_for
from pingpong.harness.settings.manifest import check_availability, load_manifest
from pingpong.harness.system import guardian, host_sentinel, processes

ROOT = Path(__file__).resolve().parent.parent
IMPLEMENTATIONS = load_manifest(ROOT / "manifest.toml")
SERVERS = [i for i in IMPLEMENTATIONS if i.role == "server"]
CLIENTS = [i for i in IMPLEMENTATIONS if i.role == "client" and not i.outside]  # the contract's clients
PLAIN_CLIENTS = [i for i in IMPLEMENTATIONS if i.role == "client" and i.outside]  # programs measured from outside
WEBSOCKET_SERVERS = [s for s in SERVERS if s.protocol == "websocket"]
RAW_TCP_SERVERS = [s for s in SERVERS if s.protocol == "raw-tcp"]
COMPATIBLE_PAIRS = [(s, c) for s in SERVERS for c in CLIENTS if s.protocol == c.protocol]
TEST_IMPLEMENTATIONS = load_manifest(ROOT / "tests" / "manifest.toml")

# Each new server's relay check watches for a stray copy 0.3 s by default (--relay-silence); these tests start a few
# hundred servers to count, verify payloads or read the files, and watch 0.05 s. A copy sent as the message is
# relayed is still seen; tests/test_rooms.py holds the default to a copy leaked 0.2 s later.
QUICK_RELAY_SILENCE_S = 0.05
QUICK_RELAY_CHECK = ["--relay-silence", str(QUICK_RELAY_SILENCE_S)]


def compile_once_for_every_child() -> None:
    """Under PYTHONDONTWRITEBYTECODE (set on this machine), every Python process the tests start would compile the
    suite's modules from source again: about 0.13 s of each of the ~215 run_bench.py runs. The children write and
    reuse __pycache__ as Python does by default (git ignores it). Not a PYTHONPYCACHEPREFIX folder: there each
    interpreter would compile its standard library too on its first run, and a fresh interpreter's allocator would
    start elsewhere than a user's (tests/test_allocator.py reads it)."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


compile_once_for_every_child()


# The slowest tests (--durations on 2 CPUs, 2026-11-26): 10 s or more each when they were chosen, about 5 to 30 s
# since the tests' windows were shortened (the abuse of each of the 16 servers 3 to 5 s, 65 s together). Marked slow,
# so that `python -m pytest -m "not slow"` is the quick subset while developing; `python -m pytest` runs them all.
SLOW_TESTS = {
    "test_cluster.py::test_a_two_by_two_matrix_runs_across_hosts_with_each_side_counted_on_its_own_host",
    "test_cluster.py::test_a_worker_lost_mid_run_fails_its_attempt_and_the_run_completes",
    "test_cluster.py::test_kill_9_of_the_orchestrator_leaves_no_process_on_any_host",
    "test_cluster.py::test_the_documented_commands_run_a_cluster",
    "test_compare_alternate.py::test_two_checkouts_run_alternately_and_compare_across_runs",
    "test_diagnosis.py::test_compression_flag_fires_when_deflate_is_negotiated_and_not_with_compression_off",
    "test_diagnosis.py::test_diagnose_names_nagle_for_the_split_write_server",
    "test_diagnosis.py::test_diagnose_on_a_healthy_pair_finds_no_anomaly_and_counts_syscalls",
    "test_docs.py::test_the_documented_compression_comparison_runs",
    "test_docs.py::test_the_documented_profiled_diagnosis_runs",
    "test_native_websocket.py::test_native_servers_and_clients_speak_wss_with_each_other_and_python",
    "test_native_websocket.py::test_the_native_set_runs_beside_the_default_one_with_its_floor_cost_split",
    "test_outside.py::test_bad_programs_fail_their_cells_with_a_reason_and_the_run_goes_on",
    "test_package_envs.py::"
    "test_the_seeds_setup_runs_in_one_command_with_2023_releases_on_python_3_9_and_its_table_beside",
    "test_profiling.py::test_a_bun_side_runs_its_own_profiler_kept_to_the_window",
    "test_profiling.py::test_a_function_burning_known_cpu_tops_its_sides_profile_at_that_cost",
    "test_profiling.py::test_ctrl_c_while_profiling_leaves_no_process_behind",
    "test_profiling.py::test_run_profile_profiles_the_named_cell_beside_its_rows_fastest_client",
    "test_reference_files.py::test_every_json_file_reads_and_every_run_loads",
    "test_reliability.py::test_faulty_servers_fail_their_cells_and_the_run_goes_on",
    "test_reliability.py::test_resume_measures_only_missing_attempts_and_refuses_other_settings",
    "test_reliability.py::test_servers_under_abuse_keep_serving_other_rooms",
    "test_run_bench.py::test_one_server_process_per_round_serves_the_row_and_fresh_server_does_not",
    "test_run_bench.py::test_sub_matrix_writes_json_and_markdown",
    "test_terminal_screen.py::test_a_quick_run_in_a_real_terminal_shows_its_plan_progress_and_whole_matrix",
    "test_tls.py::test_tls_cells_run_end_to_end_with_a_throwaway_certificate",
    "test_workers.py::test_a_run_over_workers_records_the_broker_and_leaves_nothing",
    "test_workloads.py::test_broadcast_delivers_every_message_to_every_receiver_across_client_processes",
    "test_workloads.py::test_idle_connections_are_held_and_seen_by_the_kernel_on_the_server_side",
    "test_workloads.py::test_open_loop_latency_grows_past_the_saturation_of_a_slow_server",
    "test_workloads.py::test_payload_sweep_carries_exact_sizes_and_kinds_through_python_and_node_clients",
}


# The tests run three at a time (pytest.ini: `-n 3 --dist loadgroup`, pytest-xdist) on this 2-CPU VM: much of a
# test's time waits on windows, timeouts and processes starting. One at a time took 18:08 (2026-11-27), two at a time
# 10:34-11:35, three at a time 8:44-9:47 (2026-11-28; since the fixes below, 9:46, 8:56, 9:18, 9:09 and 9:16, all
# passed). Three load the host more than a run does, and each test
# that failed on timing at three was fixed where the code was wrong (the C++ server's room join, a kernel table read
# once, the pacer starting after a window's first samples; sanic-workers' word said before its loop ran for good, so
# that the manager's stop was lost and it was killed after 5 s: 5 of 60 stops under 3 busy loops,
# `benchmarks.server_stops --right-away`) or made to hold where the test was (windows under 0.2 s raw, a goroutine's
# late count and a paced run alone, bounds on interpolated counters, a profile's figure held to a roundtrip's wall
# time). But
# tests at once share the kernel's counters (/proc/net/snmp is the machine's, not the test's) and both CPUs, so a
# test whose assertion another test's load could move (a measured cost, rate, CPU share or latency line, a count of
# a kernel counter, "no flags" on a real run) runs alone: these run first, one after another in one worker, while the
# others wait; then each other module's tests run in one worker, in order, with its module-scoped servers
# (worker_group).
# `python -m pytest -n 0` runs one at a time (each test is then alone).
# They are these, and every test of a module in ALONE_MODULES (none now: a module-scoped fixture that measures is used
# by alone tests only, so it starts in their worker, in their turn).
ALONE_TESTS = {
    # a profile's µs per roundtrip against a known busy wait; the rate with each switch against the baseline's
    "test_diagnosis.py::test_diagnose_on_a_healthy_pair_finds_no_anomaly_and_counts_syscalls",
    # "no flags" on a healthy pair: a side that waits for its CPU reads as waiting (CPU/wall 0.27 beside another test)
    "test_diagnosis.py::test_split_writes_are_flagged_with_delayed_acks_and_a_healthy_pair_is_not",
    # enough roundtrips in a 0.3 s window for a count agreeing within 1%
    "test_outside.py::test_outside_count_agrees_with_the_programs_own",
    # no latency as long as a pause but the paused ones
    "test_workload_drivers.py::test_a_paused_window_leaves_the_paused_latencies_out",
    # an offered rate below the slow server's saturation is answered within its latency line
    "test_workloads.py::test_open_loop_latency_grows_past_the_saturation_of_a_slow_server",
    # handshakes against the kernel's ActiveOpens, which counts every test's connections
    "test_workloads.py::test_handshake_workload_counts_real_handshakes",
    # at least 10 (or 5) pauses of the sentinel in a 0.5 s (0.3 s) window: its pacer thread runs in this process
    "test_host_pace.py::test_a_stopping_pacer_stops_the_groups_for_each_slice_and_leaves_them_running",
    "test_host_pace.py::test_a_preempting_pacer_takes_the_cpu_from_the_groups_for_each_slice_without_stopping_them",
    "test_host_pace.py::test_where_the_real_time_class_is_refused_the_pacer_stops_the_groups_and_says_why",
    # the client processes' window starts and ends within 10% of the window, as the orchestrator's thread reads them
    "test_start_barrier.py::test_client_processes_measure_one_window",
    # publishes per roundtrip within 0.1 of 2, the broker's count sampled at the window's edges (1.897 beside a test)
    "test_workers.py::test_a_run_over_workers_records_the_broker_and_leaves_nothing",
    # an open loop keeps its schedule: each send within 50 ms of its time, the rate within 2.5%
    "test_workload_drivers.py::test_open_loop_achieves_a_low_offered_rate",
    "test_workload_drivers_node.py::test_open_loop_achieves_a_low_offered_rate",
    "test_workload_drivers_node.py::test_open_loop_with_pairs_and_idle_connections_on_a_python_server",
    "test_workload_drivers_node.py::test_raw_tcp_floors_run_the_new_workloads",
    # the module's diagnosis with profiles (`profiled`): a function burning a known CPU time per message is read at
    # 0.7-1.5x of it in its side's profile; the other tests of the module read which function tops it, or none
    "test_profiling.py::test_a_function_burning_known_cpu_tops_its_sides_profile_at_that_cost",
    "test_profiling.py::test_a_node_side_is_profiled_by_v8_and_both_sides_are_saved",
    "test_profiling.py::test_the_diagnosis_page_draws_a_flame_graph_per_side_in_a_browser",
    # every attempt of a real run paced: beside two other tests a cell's processes waited for their CPU, and its rate
    # was read as one that waits on more than the CPU, not taken to the reference pace (a fresh clone, 2026-11-28)
    "test_host_pace.py::test_a_run_paces_a_driver_a_compiled_client_and_a_program_measured_from_outside",
    # no latency as long as a pause: Go's client counts a SIGCONT in a goroutine, which beside two other tests came
    # more than its 3 roundtrips late once (a 204 ms latency over a 200 ms pause, CI by hand, 2026-11-28)
    "test_native_websocket.py::test_a_compiled_client_counts_its_windows_pauses_and_records_no_paused_roundtrip"
    "[go-gorilla]",
}
ALONE_MODULES: set[str] = set()

# Each module's seconds one at a time (--durations=0, 2026-11-27, 2 CPUs), those of 10 s or more. The modules run in
# this order, the longest first, the rest after them as collected: the workers then end close together, not one
# running a long module while the others wait with nothing left (pytest.ini: --no-loadscope-reorder keeps it).
MODULE_SECONDS = {
    "test_cluster.py": 99, "test_reliability.py": 75, "test_workloads.py": 72, "test_matrix_pairs.py": 64,
    "test_native_websocket.py": 61, "test_workers.py": 58, "test_room_placement.py": 48,
    "test_workload_drivers.py": 47, "test_diagnosis.py": 42, "test_run_bench.py": 42, "test_outside.py": 39,
    "test_workload_drivers_node.py": 39, "test_profiling.py": 35, "test_round_rule_coverage.py": 25,
    "test_rooms.py": 23, "test_start_barrier.py": 23, "test_docs.py": 23, "test_spawn_ahead.py": 23,
    "test_contract.py": 23, "test_host_pace.py": 20, "test_compare_alternate.py": 19, "test_terminal_screen.py": 17,
    "test_server_cpus.py": 17, "test_cli_input.py": 16, "test_interpreters.py": 13, "test_benchmarks.py": 11,
}


def is_alone(item) -> bool:
    return item.get_closest_marker("alone") is not None


def runs_alone(nodeid: str) -> bool:
    """tests/test_x.py::test_y[param] runs alone when test_x.py::test_y or test_x.py::test_y[param] is in ALONE_TESTS,
    or its module in ALONE_MODULES."""
    path, _, name = nodeid.partition("::")
    module = Path(path).name
    return module in ALONE_MODULES or bool({f"{module}::{name.split('[')[0]}", f"{module}::{name}"} & ALONE_TESTS)


def worker_group(nodeid: str) -> str:
    """The worker's unit of work a test belongs to: "alone", or its module."""
    return "alone" if runs_alone(nodeid) else Path(nodeid.partition("::")[0]).name


def pytest_sessionstart(session):
    """The compiled programs (Go, Rust, C++) that no run has built yet, built once before any test starts: a run
    builds them on their first use, and three test workers would otherwise wait on one build beside tests that
    measure. Once, in pytest-xdist's controller (or the one process without it); a few seconds from the native cache
    outside the checkout, about 3 minutes on a machine that never built them."""
    if hasattr(session.config, "workerinput"):
        return
    from pingpong.harness.settings.native_build import build_on_first_use
    build_on_first_use(IMPLEMENTATIONS, ROOT)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest.ini's --dist loadgroup, by worker_group: the tests that run alone in one worker, one after another and
    first; each other module's tests in one worker, in order, with its module-scoped servers. Not by xdist_group
    marks: pytest-xdist 3.8.0 carries a test's group in a suffix of `item._nodeid`, which pytest 9 no longer reads
    (it reports `item.nodeid` from `item._id`), so every test went out on its own and a module's servers started in
    each worker that ran one of its tests."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class TestGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return TestGroupScheduling(config, log)


# Tests that need compiled programs without naming them in their parameters: the programs, or None for all of them.
THREADS_SERVER = ("cpp-websocketpp",)
NEEDS_NATIVE = {
    "test_native_websocket.py": None,
    "test_run_bench.py::test_list_shows_every_implementation_and_availability": None,
    "test_room_placement.py::test_a_threads_server_by_room_runs_each_thread_on_its_own_port_and_cpu": THREADS_SERVER,
    "test_room_placement.py::test_a_threads_servers_room_reaches_its_members_on_every_thread_and_its_own_only":
        THREADS_SERVER}


def unbuilt_native() -> dict[str, str]:
    """The compiled programs (entries with a build command) that are not built here, and why."""
    found = {}
    for implementation in IMPLEMENTATIONS:
        if implementation.build and implementation.name not in found:
            availability = check_availability(implementation, ROOT)
            if not availability.available:
                found[implementation.name] = availability.reason
    return found


def native_skip(item, unbuilt: dict[str, str]) -> str | None:
    """Why a test is skipped on a machine where a compiled program it needs could not be built (its toolchain or
    libraries missing: the session's start tried to build them), or None."""
    callspec = getattr(item, "callspec", None)
    named = {getattr(value, "name", value) for value in (callspec.params.values() if callspec else ())}
    needed = sorted(name for name in named if isinstance(name, str) and name in unbuilt)
    for key in (item.path.name, f"{item.path.name}::{getattr(item, 'originalname', item.name)}"):
        if key in NEEDS_NATIVE:
            needed += sorted(set(NEEDS_NATIVE[key] or unbuilt) & set(unbuilt))
    return f"{needed[0]}: {unbuilt[needed[0]]}" if needed else None


@pytest.hookimpl(tryfirst=True)  # before -m and -k deselect any
def pytest_collection_modifyitems(config, items):
    # Where a compiled program could not be built, the tests that need it skip, saying why; CI needs every one
    # (.ci/run fails on a .unavailable note), so there they run and fail.
    unbuilt = unbuilt_native() if os.environ.get("CI") != "true" else {}
    names = set()
    for item in items:
        why = native_skip(item, unbuilt) if unbuilt else None
        if why:
            item.add_marker(pytest.mark.skip(reason=why))
        name = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        names |= {name, f"{item.path.name}::{item.name}"}  # a test, and one of its parameters
        if name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        if runs_alone(item.nodeid):
            item.add_marker(pytest.mark.alone)
    # stable: a module's tests stay in order
    items.sort(key=lambda item: (not is_alone(item), -MODULE_SECONDS.get(item.path.name, 0)))
    if not config.args or config.args == ["tests"] or config.args == [str(ROOT / "tests")]:  # the whole suite
        # a renamed test would otherwise quietly lose its mark (one ran beside others so, 2026-11-27)
        stale = sorted((ALONE_TESTS | SLOW_TESTS) - names)
        assert not stale, f"tests/conftest.py names tests that do not exist: {stale}"


class Turns:
    """A readers-writer lock over the workers of one pytest run (flock on files they share): a test holds it shared
    from its first fixture's setup to its last one's teardown, an `alone` one exclusive; consecutive alone tests of a
    worker keep it exclusive between them (a module's servers started for them included). The turnstile, held by a
    test waiting to be alone, keeps new tests from starting meanwhile, so it is never starved. Without workers
    (`-n 0`) there is no one to wait for."""

    def __init__(self, folder: Path) -> None:
        self.turnstile = open(folder / "tests-turnstile.lock", "a")
        self.running = open(folder / "tests-running.lock", "a")
        self.held: str | None = None  # None, "shared" or "alone"

    def take(self, alone: bool) -> None:
        wanted = "alone" if alone else "shared"
        if self.held == wanted:
            return
        self.give_back()
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.running, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        self.held = wanted

    def give_back(self) -> None:
        if self.held is not None:
            fcntl.flock(self.running, fcntl.LOCK_UN)
            self.held = None


TURNS = pytest.StashKey[Turns]()  # one per worker process


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Every test takes its turn (Turns): shared, or alone when marked."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        with test_costs_logged(item, time.perf_counter()):
            yield
        return
    turns = item.config.stash.get(TURNS, None)
    if turns is None:
        turns = Turns(item.config._tmp_path_factory.getbasetemp().parent)  # the run's folder, shared by the workers
        item.config.stash[TURNS] = turns
    waited = time.perf_counter()
    turns.take(is_alone(item))
    try:
        with test_costs_logged(item, waited):
            yield
    finally:
        if nextitem is None or not (is_alone(item) and is_alone(nextitem)):
            turns.give_back()  # shared is given back after every test, so that one waiting to be alone gets its turn


TEST_COSTS_ENV = "PINGPONG_TEST_COSTS"  # a file: each test's line of what it cost, for finding where the time goes


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def test_costs_logged(item, waited: float):
    """With PINGPONG_TEST_COSTS=FILE, one JSON line a test: its wall seconds from its first setup to its last
    teardown, the seconds it waited for its turn, and the CPU seconds of the worker and of the processes it reaped
    (each reaps its own children, so a run_bench.py's servers and clients count in it)."""
    path = os.environ.get(TEST_COSTS_ENV)
    if not path:
        yield
        return
    started = time.perf_counter()
    own, reaped = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
    try:
        yield
    finally:
        line = {"test": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"), "alone": is_alone(item),
                "wall_s": round(time.perf_counter() - started, 3), "waited_s": round(started - waited, 3),
                "worker_cpu_s": round(cpu_seconds(resource.RUSAGE_SELF) - own, 3),
                "reaped_cpu_s": round(cpu_seconds(resource.RUSAGE_CHILDREN) - reaped, 3)}
        with open(path, "a") as log:
            fcntl.flock(log, fcntl.LOCK_EX)
            log.write(json.dumps(line) + "\n")


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
    # The host sentinels a measured window started (measure/pacer.py) serve every later window of the process until
    # its run ends, when the engine closes them; a test that measures attempts itself ends them here, as the engine
    # would, and then no process of it may be left.
    host_sentinel.close_all()
    # This pytest process's own guardian (started with the first child it started, pingpong/harness/system/guardian.py)
    # lives as long as this process does, as it does in run_bench.py; it is not a leftover of the test.
    own_guardian = guardian.guardian_pid()
    deadline = time.monotonic() + 5
    leftovers = [p for p in processes_carrying(token) if p.pid != own_guardian]
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.05)
        leftovers = [p for p in processes_carrying(token) if p.pid != own_guardian]
    described = [(p.pid, p.cmdline()) for p in leftovers]
    for process in leftovers:  # they carry this test's token: started by it, so ours to end
        try:
            process.kill()
        except psutil.Error:
            pass
    assert not leftovers, f"processes left running: {described}"


# Sanic's own shutdown race (sanic 25.12): its SIGTERM handler stops the worker through the shared-state proxy while
# the loop it interrupted is inside a call on that same proxy; the interrupted call then reads the handler's reply
# (None, or a worker's state name) where it expected a worker's state, and the main process exits 1 with this in its
# log. It shows in whichever of sanic's two loops over the workers' states was interrupted: the monitor's
# (_sync_states) or the one that waits for them to end (_get_process_states). Seen about once in 40 stops; the
# measurement is over by then. Only these traces are excused, and only for sanic (and sanic-workers, the same
# manager).
SANIC_SHUTDOWN_RACE = re.compile(r"in (_sync_states|_get_process_states)\n(.*\n)*"
                                 r"AttributeError: '(NoneType|str)' object has no attribute 'get'")


def client_report_of(process, timeout_s: float) -> tuple[int, dict, str]:
    """Wait for a client process: its exit code, its one JSON report and its stderr. Killed if it outlives
    timeout_s (the assertion then fails on its missing report)."""
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    lines = stdout.strip().splitlines()
    assert len(lines) == 1, (stdout, stderr)
    return process.returncode, json.loads(lines[0]), stderr


def stopped_cleanly(server_name: str, exit_code: int | None, stderr_tail: str) -> bool:
    """Exit 0 or by the stop signal, as every server must; or sanic's upstream shutdown race, named above."""
    if exit_code in processes.CLEAN_EXIT_CODES:
        return True
    return server_name in ("sanic", "sanic-workers") and exit_code == 1 \
        and SANIC_SHUTDOWN_RACE.search(stderr_tail) is not None


class SharedServers:
    """Servers the tests of one module share where a test is not about a server's lifecycle.

    Each is started on first use exactly as a run starts it (pinned, probed, relay verified), serves every test
    that asks for it (each client in a room of its own), and is stopped when the module ends. They carry the
    module's own leak token, so the per-test leak check leaves them alone and the module's teardown checks them.
    """

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.token = uuid.uuid4().hex
        self.started: dict[tuple, LocalServer] = {}

    def get(self, implementation, settings: CellSettings) -> LocalServer:
        key = (implementation.name, settings.loop, settings.compression, settings.tls_cert)
        if key not in self.started:
            server_cpus, _ = cpus_for(settings)
            folder = self.work_dir / f"{implementation.name}-{len(self.started)}"
            folder.mkdir(parents=True)
            previous = os.environ.get(TEST_TOKEN_ENV)
            os.environ[TEST_TOKEN_ENV] = self.token
            try:
                self.started[key] = start_server(implementation, settings, ROOT, folder, server_cpus)
            finally:
                if previous is None:
                    del os.environ[TEST_TOKEN_ENV]
                else:
                    os.environ[TEST_TOKEN_ENV] = previous
        return self.started[key]

    def stop_all(self) -> list[str]:
        """Stop every server; what went wrong (an unclean exit, a group member left), one line each."""
        problems = []
        for (name, *_), server in self.started.items():
            code = processes.stop(server.process)
            if not stopped_cleanly(name, code, server.process.stderr_tail(40)):
                problems.append(f"{name}: exit code {code} on SIGTERM; stderr: {server.process.stderr_tail(5)}")
            if processes.group_members(server.process.pid):
                problems.append(f"{name}: group members left after stop")
        return problems


@pytest.fixture(scope="module")
def shared_servers(tmp_path_factory):
    """The module's SharedServers; at its end every server must stop cleanly and leave no process behind."""
    servers = SharedServers(tmp_path_factory.mktemp("shared-servers"))
    yield servers
    problems = servers.stop_all()
    leftovers = [(p.pid, p.cmdline()) for p in processes_carrying(servers.token) if p.pid != guardian.guardian_pid()]
    assert not problems, problems
    assert not leftovers, f"processes left running: {leftovers}"


# A client paused by hand in its measured window (the drivers' tests): this many SIGSTOPs, each this long. A pause
# is longer than any latency seen without one on this slow shared host (a Bun client's 46 ms, and a raw-TCP Bun
# client's 82 ms in CI, 2026-11-27), so that a roundtrip that spanned a pause is told from a slow one by its length
PAUSES = 5
PAUSE_S = 0.2


def pause_by_hand(pid: int) -> None:
    """Stop the process PAUSES times: SIGSTOP, PAUSE_S, SIGCONT, then 50 ms of running."""
    for _ in range(PAUSES):
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(PAUSE_S)
        finally:
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.05)


# How many latencies one pause may drop in each pair: the roundtrip that saw the count change and those before it
# that the count may have come late for (Python's handler runs between two bytecodes: one before; the Node.js and Bun
# listener runs on a later turn of the loop: three before, node/driver/ping_pong.js LATE_ROUNDTRIPS).
DROPPED_PER_PAUSE = {"python": 2, "node": 4}


def check_pauses(report: dict, pairs: int, per_pause: int) -> int:
    """Every pause counted, each dropped at most per_pause latencies in each pair (none when it ended before the
    window's first count was read), those roundtrips still count, and no latency as long as a pause is left; returns
    latency_dropped."""
    assert report["error"] is None and report["pairs"] == pairs
    dropped = report["pauses"]["latency_dropped"]
    assert report["pauses"]["continued"] == PAUSES
    assert PAUSES <= dropped <= per_pause * PAUSES * pairs, report["pauses"]
    histogram = histograms.merge([report["latency"]["hdr_histogram"]])
    assert histogram.get_total_count() == report["roundtrips"] - dropped
    assert histogram.get_max_value() < PAUSE_S * 1e9  # no roundtrip that spanned a pause is in it
    return dropped
