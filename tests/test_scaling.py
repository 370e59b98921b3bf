"""The scaling model (analysis/scaling.py) and `run_bench.py scaling`: the law's fit recovers known parameters, the
prediction is the smallest limit and names it, a point is read from attempts as measured, and the command reads a
committed --workers sweep (real figures) and refuses bad input in one line."""

import json
import re
import subprocess
import sys

import pytest

from pingpong.harness.analysis.scaling import (BROKER, CLIENTS, PAIRS, SERVER, Fit, Host, MeasuredPoint, fit_series,
                                               fit_usl, measured_point, predict)
from pingpong.harness.analysis.stats import median_with_interval
from pingpong.harness.results.records import Attempt
from pingpong.harness.results.stored import read_json
from tests.conftest import ROOT
from tests.test_cli_input import assert_one_line_error
from tests.test_docs import as_argv, documented_commands

SWEEP = "results/reference/2026-11-25-workers-cluster-sweep.json.xz"
AFTER = "results/reference/2026-11-26-workers-after-sweep.json.xz"  # --workers 1,2,4 × --room-placement kernel,room


def usl(sigma: float, kappa: float, n: int) -> float:
    return 1 + sigma * (n - 1) + kappa * n * (n - 1)


@pytest.mark.parametrize("sigma, kappa", [(0.3, 0.0), (0.05, 0.01), (0.0, 0.02), (1.5, 0.004)])
def test_the_law_fitted_to_exact_points_gives_back_its_parameters(sigma, kappa):
    found_sigma, found_kappa, how = fit_usl({n: usl(sigma, kappa, n) for n in (2, 4, 8)})
    assert found_sigma == pytest.approx(sigma, abs=1e-9) and found_kappa == pytest.approx(kappa, abs=1e-9)
    assert "universal scalability law" in how and "N = 2, N = 4, N = 8" in how


def test_one_point_above_one_is_amdahls_law_and_a_cost_that_falls_is_flat():
    sigma, kappa, how = fit_usl({2: 1.25})
    assert (sigma, kappa) == (pytest.approx(0.25), 0.0) and "Amdahl" in how
    assert fit_usl({2: 0.9, 4: 0.8})[:2] == (0.0, 0.0)  # cheaper with more workers: no negative contention
    assert fit_usl({})[:2] == (0.0, 0.0)


def test_the_prediction_is_the_smallest_limit_and_says_which():
    fit = Fit(sigma=0.0, kappa=0.0, measured_at=(1, 2), how="", broker_base_us=20.0, broker_per_worker_us=5.0,
              client_cpu_us=100.0)
    host = Host(cpus=16, pairs=32, client_processes=8)
    one = predict(fit, 100.0, host, 1)  # server 10k/s, no broker, clients 8 CPUs 80k/s, pairs 32e6/200 = 160k/s
    assert (one.bound, one.roundtrips_per_s, one.broker_limit) == (SERVER, pytest.approx(10_000), None)
    eight = predict(fit, 100.0, host, 8)  # server 80k, broker 1e6/50 = 20k, clients 7 CPUs 70k
    assert eight.bound == BROKER and eight.roundtrips_per_s == pytest.approx(20_000) and eight.client_cpus == 7
    busy_clients = predict(Fit(0.0, 0.0, (1,), "", None, None, 500.0), 100.0, Host(16, 32, 2), 4)
    assert busy_clients.bound == CLIENTS and busy_clients.roundtrips_per_s == pytest.approx(4_000)
    few_pairs = predict(Fit(0.0, 0.0, (1,), "", None, None, 100.0), 100.0, Host(16, 2, 8), 4)
    assert few_pairs.bound == PAIRS and few_pairs.roundtrips_per_s == pytest.approx(10_000)
    one_cpu = predict(fit_series([point_at(1, 100.0)]), 100.0, host, 8)  # measured at N = 1 only: one CPU
    assert one_cpu.server_limit == pytest.approx(10_000) and one_cpu.bound == SERVER
    no_room = predict(fit, 100.0, Host(cpus=4, pairs=32, client_processes=8), 3)  # 3 workers + broker = 4 CPUs
    assert no_room.roundtrips_per_s is None and no_room.bound is None and no_room.client_cpus == 0


def point_at(workers: int, server_cpu_us: float) -> MeasuredPoint:
    return MeasuredPoint(workers, 3, 1_000.0, median_with_interval([server_cpu_us] * 3), 100.0, None, 1, 1,
                         0.5, 0.5, None)


def attempt(repeat: int, rate: float, server_cpu_s: float, broker_cpu_s: float | None) -> Attempt:
    workers = {"broker": {"window": {"cpu_s": broker_cpu_s}}} if broker_cpu_s is not None else None
    return Attempt(repeat=repeat, status="ok", reason=None, started_at="", roundtrips=int(rate), roundtrips_per_s=rate, window_wall_s=1.0,
                   server_cpu_s=server_cpu_s, client_cpu_s=0.5, server_cpus=[0], client_cpus=[1], workers=workers)


def test_a_point_is_read_from_the_attempts_as_they_measured_it():
    point = measured_point(2, [attempt(1, 10_000, 0.95, 0.1), attempt(2, 8_000, 0.96, 0.08),
                               Attempt(repeat=3, status="failed", reason="stalled", started_at="")])
    assert point.attempts == 2 and point.roundtrips_per_s == 9_000
    assert point.server_cpu_us.value == pytest.approx((95 + 120) / 2)  # 0.95 s / 10k, 0.96 s / 8k
    assert point.broker_cpu_us == pytest.approx(10.0) and point.client_cpu_us == pytest.approx((50 + 62.5) / 2)
    assert point.server_busy == pytest.approx(0.955) and point.saturated == SERVER
    with pytest.raises(ValueError, match="--workers 1"):
        fit_series([point])


def scaling(*args):
    return subprocess.run([sys.executable, "run_bench.py", "scaling", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_the_command_models_a_committed_workers_sweep_per_cell():
    completed = scaling(SWEEP, "--cpus", "16", "--pairs", "32", "--client-processes", "8", "--format", "json")
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    models = {(model["server"], model["client"]): model for model in report["models"]}
    sweep = read_json(ROOT / SWEEP)
    cells = {tuple(name.split(" × ")) for name in sweep["cells"]}
    assert set(models) == cells and len(report["sources"]) == len(sweep["points"])
    for model in models.values():
        assert [point["workers"] for point in model["points"]] == [1, 2]
        assert [prediction["workers"] for prediction in model["predictions"]] == [1, 2, 4, 8]
        one = model["points"][0]["server_cpu_us"]["value"]
        for prediction in model["predictions"]:
            limits = [prediction[f"{side}_limit"] for side in ("server", "broker", "client", "pairs")]
            assert prediction["roundtrips_per_s"] == pytest.approx(min(limit for limit in limits if limit))
        assert model["predictions"][0]["server_cpu_us"] == pytest.approx(one)


def test_the_documented_command_predicts_each_cell_at_each_n():
    """docs/workloads.md's block, as written: a section per cell of the sweep, a row per N of --at, the assumptions."""
    (command,) = documented_commands("docs/workloads.md", "run_bench.py scaling results/reference")
    completed = subprocess.run(as_argv(command), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    cells = read_json(ROOT / SWEEP)["cells"]
    sections = completed.stdout.split("\n## ")[1:]
    assert [section.splitlines()[0] for section in sections] == list(cells)
    for section in sections:
        predicted = [line.split("|")[1].strip() for line in section.splitlines()
                     if re.match(r"\| \d+ \| [\d,]+ \| (server|broker|clients|pairs) \|", line)]
        assert predicted == ["1", "2", "4", "8"], section
    assert "Assumptions:" in completed.stdout and "16 CPUs, 32 pairs, 8 client processes" in completed.stdout


@pytest.mark.parametrize("args, fragment", [
    (["missing.json"], "missing.json does not exist"),
    ([SWEEP, "--at", "4,16"], "--at 16 leaves no CPU"),
    ([SWEEP, "--cpus", "0"], "values must be at least 1, got '0'"),
    ([SWEEP, "--at", "2,x"], "takes whole numbers separated by commas"),
    ([SWEEP, "--cpus", "16,16"], "give one whole number"),
    ([SWEEP.replace("-sweep", "-workers2")], "needs N = 1"),
])
def test_bad_input_is_one_line(args, fragment):
    assert_one_line_error(scaling(*args), fragment)


def test_each_value_of_another_swept_setting_is_a_series_of_its_own():
    """The sweep after the broker change ran --room-placement kernel,room beside --workers 1,2,4: each workers server
    is modelled once per placement, from that placement's points only; go-gorilla, which placement by room skips,
    only by the kernel's."""
    completed = scaling(AFTER, "--format", "json")
    assert completed.returncode == 0, completed.stderr
    models = json.loads(completed.stdout)["models"]
    series = {(model["server"], model["variant"]): model for model in models}
    for server in ("sanic-workers", "aiohttp-workers", "node-ws-cluster"):
        for placement in ("kernel", "room"):
            model = series[(server, f"room-placement {placement}")]
            assert [point["workers"] for point in model["points"]] == [1, 2, 4]
    assert ("go-gorilla", "room-placement kernel") in series and ("go-gorilla", "room-placement room") not in series
    by_room = series[("sanic-workers", "room-placement room")]["points"]
    assert max(point["broker_cpu_us"] for point in by_room if point["workers"] > 1) < 1  # nothing published
