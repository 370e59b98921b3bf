"""The suite's own scheduling (tests/conftest.py): which tests run alone, and that a module's tests run in one worker.

Under pytest 9 with pytest-xdist 3.8, `--dist loadgroup` by xdist_group marks sent every test out on its own: the
group rides in a suffix of `item._nodeid`, which pytest 9 no longer reports. Nothing failed; the tests only took
longer, with each module's servers started in every worker. The run below would have shown it.
"""

import os
import re
import subprocess
import sys
from collections import defaultdict

from tests.conftest import ALONE_TESTS, ROOT, runs_alone, worker_group

# pure tests of two modules, about ten of each: a worker given them one at a time would take some of each
QUICK = ["tests/test_package_envs.py::test_malformed_specs_are_usage_errors",
         "tests/test_package_envs.py::test_requirements_overrides_replace_pins_by_normalized_name_and_append_new_ones",
         "tests/test_package_envs.py::"
         "test_an_environment_gets_what_its_processes_import_and_not_the_harness_or_the_tests",
         "tests/test_package_envs.py::test_node_overrides_keep_other_dependencies_and_leave_runtimes_out",
         "tests/test_cluster.py::test_fingerprint_mismatches_name_each_difference",
         "tests/test_cluster.py::test_clock_offset_takes_the_exchange_with_the_shortest_round_trip",
         "tests/test_cluster.py::test_server_window_interpolates_cpu_and_counters_at_the_window_edges",
         "tests/test_cluster.py::test_counters_of_several_hosts_add_up_and_shares_spread_round_robin",
         "tests/test_cluster.py::test_only_tls_or_loopback_tcp_schedulers_are_accepted_without_insecure"]


def test_a_test_runs_alone_by_its_name_whatever_its_parameters_and_the_others_by_module():
    alone = sorted(ALONE_TESTS)[0]
    module, name = alone.split("::")
    assert runs_alone(f"tests/{module}::{name}") and runs_alone(f"tests/{module}::{name}[one-param]")
    assert worker_group(f"tests/{module}::{name}[x]") == "alone"
    assert not runs_alone(f"tests/{module}::{name}_and_more")
    assert worker_group("tests/test_rooms.py::test_rooms_isolate_and_relay_to_all_others[sanic]") == "test_rooms.py"
    # one parameter of a test alone, the others not
    paused = ("test_native_websocket.py::"
              "test_a_compiled_client_counts_its_windows_pauses_and_records_no_paused_roundtrip")
    assert f"{paused}[go-gorilla]" in ALONE_TESTS and f"{paused}" not in ALONE_TESTS
    assert runs_alone(f"tests/{paused}[go-gorilla]") and not runs_alone(f"tests/{paused}[rust-tungstenite]")


def test_each_modules_tests_run_in_one_worker():
    # not this run's worker, its options or its cost log
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST_XDIST", "PYTEST_CURRENT", "PYTEST_ADDOPTS", "PINGPONG_TEST_COSTS"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider", *QUICK],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout[-3000:]
    workers = defaultdict(set)
    for worker, module in re.findall(r"\[(gw\d+)\][^\n]*PASSED (tests/\w+\.py)::", done.stdout):
        workers[module].add(worker)
    assert set(workers) == {"tests/test_package_envs.py", "tests/test_cluster.py"}, done.stdout[-3000:]
    assert all(len(ran_in) == 1 for ran_in in workers.values()), dict(workers)
