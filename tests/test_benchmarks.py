"""The benchmark commands the docs cite still start: each answers --help, and their shared matrix settings build.

They measure for minutes, so the suite does not run them; a renamed setting broke every one of them once (the
matrix settings passed server_warmup_s after it had become jit_warmup_s), and nothing noticed.
"""

import json
import lzma
import statistics
import subprocess
import sys
from dataclasses import replace

import pytest

from benchmarks.rounds_setup import implementations_by_role, matrix_settings
from pingpong.harness.settings.configuration import (DEFAULT_JIT_WARMUP_S, DEFAULT_MATRIX_DURATION_S,
                                                     DEFAULT_MATRIX_WARMUP_S)
from tests.conftest import ROOT

BENCHMARKS = sorted(path.stem for path in (ROOT / "benchmarks").glob("*.py")
                    if path.stem not in ("__init__", "rounds_setup", "netns_lab"))  # the last: the lab hosts, a library


def test_the_shared_settings_are_the_matrix_defaults():
    settings = matrix_settings()
    assert (settings.duration_s, settings.warmup_s, settings.jit_warmup_s) == (
        DEFAULT_MATRIX_DURATION_S, DEFAULT_MATRIX_WARMUP_S, DEFAULT_JIT_WARMUP_S)
    assert settings.pin and settings.payload_size == 4
    assert ("server", "raw-tcp-c") in implementations_by_role()


# Each benchmark's `python -m benchmarks.X --help` as runpy runs it, in a process forked for it from one interpreter
# that has imported the harness they build on (so a benchmark sees that, and none of another's imports), with its
# own argv and its output in files: one after another in interpreters of their own they took 10.9 s, mostly
# importing the same packages 33 times.
HELP_EACH = """
import json, os, runpy, sys, traceback
import pingpong.harness.commands.cli, pingpong.harness.measure.local  # what the benchmarks import, once
folder, codes = sys.argv[1], {}
for module in sys.argv[2:]:
    pid = os.fork()
    if pid == 0:
        for fd, stream in ((1, "stdout"), (2, "stderr")):
            os.dup2(os.open(os.path.join(folder, f"{module}.{stream}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        sys.argv, code = [module, "--help"], 0
        try:
            runpy.run_module(f"benchmarks.{module}", run_name="__main__", alter_sys=True)
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
            if isinstance(exit.code, str):
                print(exit.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(code)
    codes[module] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(codes))
"""


@pytest.fixture(scope="module")
def help_runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    folder = tmp_path_factory.mktemp("benchmarks-help")
    done = subprocess.run([sys.executable, "-c", HELP_EACH, str(folder), *BENCHMARKS], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return {module: subprocess.CompletedProcess([module, "--help"], code, (folder / f"{module}.stdout").read_text(),
                                                (folder / f"{module}.stderr").read_text())
            for module, code in json.loads(done.stdout).items()}


@pytest.mark.parametrize("module", BENCHMARKS)
def test_each_benchmark_answers_help(module, help_runs):
    completed = help_runs[module]
    assert completed.returncode == 0, completed.stderr[-800:]
    assert "usage:" in completed.stdout.lower()


def test_address_layout_counts_the_slow_processes_below_its_share_of_the_median():
    from benchmarks.address_layout import SLOW_BELOW, layout_figures
    attempts = {1: {"rate": 100.0, "server_us": 10.0, "client_us": 20.0},
                2: {"rate": 100.0 * SLOW_BELOW - 1, "server_us": 14.0, "client_us": 27.0},
                3: {"rate": 104.0, "server_us": 9.0, "client_us": 19.0}}
    figures = layout_figures(attempts)
    assert (figures["attempts"], figures["median"], figures["slow"]) == (3, 100.0, 1)
    assert (figures["server_us_per_roundtrip"], figures["client_us_per_roundtrip"]) == (10.0, 20.0)
    assert layout_figures({}) == {"attempts": 0}


def test_address_layout_refuses_an_unknown_cell_in_one_line():
    completed = subprocess.run([sys.executable, "-m", "benchmarks.address_layout", "--cells", "nosuch:websockets"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert completed.stderr.strip() == "address_layout: unknown implementations: nosuch"


def test_a_jit_warmup_ends_where_the_running_median_stays_near_the_plateau():
    from benchmarks.jit_warmup import settled_after
    rates = [200, 300, 500, 800, 950, 1000, 1010, 990, 1000, 1005, 995, 1000]  # 0.25 s windows
    plateau, settled = settled_after(rates, 0.25, 0.10)
    assert plateau == 1000 and settled == 1.5  # the running median of 5 is within 10% from the 7th window on
    # a rate that falls at the end: the plateau (the last third's median, 750) is not where the running median ends
    assert settled_after([1000] * 5 + [500], 0.25, 0.10) == (750, None)


def test_the_deflate_model_predicts_each_placement_from_the_others_cpu():
    from benchmarks.deflate_model import predict, wakeup_for_rate
    same = {"roundtrip_us": 700.0, "cpu_us": 690.0}
    split = {"roundtrip_us": 1000.0, "cpu_us": 720.0}
    predicted = predict(same, split, wakeup_us=70.0)
    assert predicted["same_cpu_predicted_us"] == 720.0 and predicted["split_predicted_us"] == 690.0 + 4 * 70.0
    assert round(predicted["split_error"], 3) == -0.03
    # with 7.5 µs of each wakeup charged as CPU time, the split CPU holds 30 µs more than the one-CPU roundtrip's
    assert predict(same, split, wakeup_us=70.0, charged_us=7.5)["same_cpu_predicted_us"] == 690.0
    assert wakeup_for_rate(200, 1000.0, 4) == 1000.0  # 5,000 µs a roundtrip less 1,000 of CPU over 4 wakeups
    assert wakeup_for_rate(2000, 1000.0, 4) is None  # already slower than that rate


def test_the_model_charges_each_side_by_its_runtimes_floor():
    """Each runtime's floor against itself gives a side of that runtime and role its CPU per wakeup (split less one
    CPU, over the side's 2 wakeups); a cell's prediction then charges its server and client by their runtimes, the
    rest of a wakeup (w - c) the host's; with every side charged c it is the first model."""
    from benchmarks.deflate_model import predict, predict_by_runtime, runtime_charges
    same = {("raw-tcp-node", "raw-tcp-node"): {"server_cpu_us": 25.0, "client_cpu_us": 26.0},
            ("raw-tcp-python", "raw-tcp-python"): {"server_cpu_us": 37.0, "client_cpu_us": 49.0}}
    split = {("raw-tcp-node", "raw-tcp-node"): {"server_cpu_us": 61.0, "client_cpu_us": 74.0},
             ("raw-tcp-python", "raw-tcp-python"): {"server_cpu_us": 75.0, "client_cpu_us": 109.0}}
    charges = runtime_charges(same, split)
    assert charges == {("server", "node"): 18.0, ("client", "node"): 24.0, ("server", "python"): 19.0,
                       ("client", "python"): 30.0}
    cell_same, cell_split = {"roundtrip_us": 400.0, "cpu_us": 400.0}, {"roundtrip_us": 520.0, "cpu_us": 500.0}
    by_runtime = predict_by_runtime(cell_same, cell_split, wakeup_us=24.0, charged_us=17.0, server_charge_us=19.0,
                                    client_charge_us=24.0)
    assert by_runtime["same_cpu_predicted_us"] == 500.0 - 2 * (19.0 + 24.0)
    assert by_runtime["split_predicted_us"] == 400.0 + 2 * (19.0 + 24.0) + 4 * (24.0 - 17.0)
    alike = predict_by_runtime(cell_same, cell_split, 24.0, 17.0, 17.0, 17.0)
    assert alike == predict(cell_same, cell_split, wakeup_us=24.0, charged_us=17.0)


def test_the_models_check_pairs_each_round_with_that_rounds_floor_and_says_when_the_rounds_cannot_tell():
    """Round by round, the host's w and c come from the C floor's cell of the same round, so a round where the host
    was slower moves the floor and the cell together; per cell the median error with its interval, and a verdict
    that holds or misses only when the interval says so."""
    from benchmarks.deflate_model import paired_by_round, verdict
    from pingpong.harness.analysis.stats import Ratio
    floor, cell = ("raw-tcp-c", "raw-tcp-c"), ("sanic", "node-ws")
    same, split = {floor: {}, cell: {}}, {floor: {}, cell: {}}
    for repeat, slower in enumerate([1.0, 1.5, 1.0, 1.2, 1.0, 1.1], start=1):  # the host's pace of each round
        same[floor][repeat] = {"roundtrip_us": 30 * slower, "cpu_us": 30 * slower, "server_cpu_us": 15 * slower,
                               "client_cpu_us": 15 * slower}
        split[floor][repeat] = {"roundtrip_us": 110 * slower, "cpu_us": 90 * slower,  # w = 20 µs, c = 15 µs
                                "server_cpu_us": 45 * slower, "client_cpu_us": 45 * slower}
        same[cell][repeat] = {"roundtrip_us": 200 * slower, "cpu_us": 200 * slower}
        # the cell apart: its CPU plus 4 c, and 4 (w - c) more of wall time: the model exactly, at every pace
        split[cell][repeat] = {"roundtrip_us": 280 * slower, "cpu_us": 260 * slower}
    errors = paired_by_round(same, split, runtimes={})[cell]
    assert abs(errors["same_cpu_error"].value) < 1e-9 and abs(errors["split_error"].value) < 1e-9
    assert abs(errors["split_error"].low) < 1e-9 and abs(errors["split_error"].high) < 1e-9  # every round alike
    assert errors["same_cpu_error"].n == 6 and errors["same_cpu_error"].coverage > 0.96  # min-max of 6
    assert "by_runtime_same_cpu_error" not in errors  # no runtime floors in the run
    # both sides of the C floor's runtime: each charged its floor's side per wakeup of that round, 15 µs, so c
    native = {("server", "sanic"): "native", ("client", "node-ws"): "native"}
    by_runtime = paired_by_round(same, split, runtimes=native)[cell]
    assert abs(by_runtime["by_runtime_split_error"].value) < 1e-9 and by_runtime["by_runtime_split_error"].n == 6
    # round 3 lost its floor: that round is left out, not judged with another round's host
    del split[floor][3]
    assert paired_by_round(same, split, runtimes={})[cell]["split_error"].n == 5

    def error(low, value, high):
        return Ratio(value, low, high, 0.96, "order-statistic", 9)
    assert verdict(error(-0.1, 0.0, 0.2), error(-0.2, -0.1, 0.0)) == "holds"
    assert verdict(error(-0.1, 0.0, 0.2), error(-0.4, -0.3, -0.26)) == "misses"  # wholly below -25%
    assert verdict(error(-0.1, 0.0, 0.3), error(-0.2, -0.1, 0.0)) == "not settled"  # its interval reaches +30%
    assert verdict(Ratio(0.3, None, None, None, None, 1), error(-0.1, 0, 0.1)) == "misses"  # one round: its value


def test_a_slimmed_reference_run_has_no_histograms_says_so_and_still_reports(tmp_path):
    """slim_reference leaves every encoded histogram out, keeps the rest, says what it left out; report reads it."""
    from benchmarks.slim_reference import slim
    run = json.loads(lzma.open(ROOT / "results/reference/2026-11-29-default-9.json.xz").read())
    slimmed = slim(run)
    text = json.dumps(slimmed["cells"])
    assert "latency_histogram" not in text and "HISTFAAA" not in text
    attempts = sum(len(cell["attempts"]) for cell in run["cells"])
    assert slimmed["slimmed"]["histograms"] >= attempts
    assert [c["summary"] for c in slimmed["cells"]] == [c["summary"] for c in run["cells"]]
    assert "latency_histogram" in json.dumps(run)  # the input is left as it was
    out = tmp_path / "slim.json.xz"
    done = subprocess.run([sys.executable, "-m", "benchmarks.slim_reference",
                           "results/reference/2026-11-29-default-9.json.xz", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    shown = subprocess.run([sys.executable, "run_bench.py", "report", str(out), "--format", "md"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "| sanic (uvloop) |" in shown.stdout, shown.stderr[-500:]
    refused = subprocess.run([sys.executable, "-m", "benchmarks.slim_reference", str(out), str(tmp_path / "x.json")],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1


def test_bun_faults_reads_the_steady_seconds_and_refuses_an_unknown_mode_in_one_line():
    """The seconds after the first give the steady figures (medians); a mode it does not have is a usage error."""
    from benchmarks.bun_faults import steady
    seconds = [{"roundtrips_per_s": 10.0, "faults": 900, "faults_per_roundtrip": 0.9}] + [
        {"roundtrips_per_s": rate, "faults": faults, "faults_per_roundtrip": faults / rate}
        for rate, faults in ((40000.0, 2000), (42000.0, 1600), (41000.0, 1800))]
    assert steady(seconds) == {"roundtrips_per_s": 41000.0, "faults_per_s": 1800, "faults_per_roundtrip": 1800 / 41000}
    completed = subprocess.run([sys.executable, "-m", "benchmarks.bun_faults", "--modes", "tcp,udp"], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr.strip() == "bun_faults: unknown modes: udp (modes: tcp, tcp-view, websocket)"


def test_window_pace_takes_cells_as_its_usage_writes_them_and_refuses_unknown_ones_in_one_line():
    from benchmarks.window_pace import parse_cells
    known = {("server", "sanic"), ("client", "picows"), ("server", "node-ws"), ("client", "node-ws")}
    assert parse_cells("sanic:picows,node-ws:node-ws:auto:node", known) == [
        ("sanic", "picows", "auto", "sanic×picows"), ("node-ws", "node-ws", "auto", "node")]
    assert parse_cells("sanic:picows:uvloop", known) == [("sanic", "picows", "uvloop", "sanic×picows")]
    with pytest.raises(ValueError, match="unknown implementations: nosuch"):
        parse_cells("sanic:nosuch", known)
    completed = subprocess.run([sys.executable, "-m", "benchmarks.window_pace", "--cells", "sanic"], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert completed.stderr.strip() == "window_pace: --cells: 'sanic' is not SERVER:CLIENT[:LOOP[:LABEL]]"


def test_attempt_pace_bias_pairs_rounds_and_reads_where_a_paced_window_ran_slow():
    """benchmarks/attempt_pace_bias: a round's paced attempts against its unpaced ones (a round missing either is
    left out), and the pieces between a window's pauses against its middle ones; bad cells are one-line errors."""
    from benchmarks.attempt_pace_bias import cell_figures, piece_profile
    rounds = {1: {"paced": [98.0, 96.0], "unpaced": [100.0, 100.0], "reference": [90.0, 90.0]},
              2: {"paced": [99.0], "unpaced": [99.0], "reference": [95.0]},
              3: {"paced": [200.0], "unpaced": [100.0]},
              4: {"paced": [50.0]}}  # no unpaced attempt: left out
    figures = cell_figures(rounds)
    assert figures["rounds"] == 3 and figures["ratios"] == pytest.approx([0.97, 1.0, 2.0])
    assert figures["median_ratio"] == pytest.approx(1.0)
    assert figures["unpaced_median"] == pytest.approx(100.0) and figures["paced_median"] == pytest.approx(99.0)
    assert figures["reference_cv"] == pytest.approx(statistics.stdev([90, 95]) / 92.5)
    # piece 1 (after the first pause) at three quarters of the middle pieces' rate, the last at 0.9
    window = {"running_ns": [16, 16, 16, 16, 16, 10], "segments_in": [160, 120, 160, 160, 160, 90]}
    assert piece_profile([window, None, {"error": "no connection"}]) == pytest.approx([1.0, 0.75, 1.0, 1.0, 1.0, 0.9])
    assert piece_profile([None]) is None
    for argv, error in ((["--cells", "sanic"], "attempt_pace_bias: --cells: 'sanic' is not SERVER:CLIENT"),
                        (["--cells", "sanic:nosuch"], "attempt_pace_bias: --cells: unknown implementations: nosuch"),
                        (["--rounds", "2"], "attempt_pace_bias: --per-round must be at least 1 and --rounds at "
                                            "least 3")):
        completed = subprocess.run([sys.executable, "-m", "benchmarks.attempt_pace_bias", *argv], cwd=ROOT,
                                   capture_output=True, text=True, timeout=60)
        assert completed.returncode == 2 and completed.stderr.strip() == error, completed.stderr


def test_window_length_precision_reads_each_length_at_the_rounds_it_affords():
    """benchmarks/window_length_precision: per length the rounds' CV and the interval expected at its afforded
    rounds (8 rounds keep the maximum and drop the minimum: a cell whose slowest round is far off is within at 8 but
    not at 6), each longer length paired by round with the shortest; bad options are one-line errors."""
    from benchmarks.window_length_precision import (cell_figures, cell_line, parse_afforded, parse_windows,
                                                    slow_share, summary)
    assert parse_windows("0.3,0.1") == [0.1, 0.3]
    assert parse_afforded("0.1:8,0.3:6,0.5:4", [0.1, 0.3]) == {0.1: 8, 0.3: 6}
    for bad, message in (("0.1", "must name two lengths or more"), ("0.1,0.1", "must name two lengths or more"),
                         ("0.05,0.1", "shorter than the 0.1 s"), ("0.1,x", "is not seconds"),
                         ("0.1,nan", "is not seconds"), ("0.1,inf", "is not seconds")):
        with pytest.raises(ValueError, match=message):
            parse_windows(bad)
    with pytest.raises(ValueError, match="no rounds for the 0.3 s window"):
        parse_afforded("0.1:8", [0.1, 0.3])
    with pytest.raises(ValueError, match="3 rounds or more"):
        parse_afforded("0.1:8,0.3:2", [0.1, 0.3])
    short = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 101.0, 80.0]  # one round far slow
    long = [102.0, 103.0, 101.0, 102.5, 101.5, 102.0]  # two rounds missing at this length
    raw = [90.0, 110.0, 95.0, 105.0, 100.0, 100.0, 120.0, 80.0]  # the host's pace in it: spread apart from short
    rounds = {number: {0.1: {"reference": short[number - 1], "raw": raw[number - 1]},
                       **({0.3: {"reference": long[number - 1], "raw": long[number - 1]}} if number <= 6 else {})}
              for number in range(1, 9)}
    figures = cell_figures(rounds, {0.1: 8, 0.3: 6}, 0.03)
    first, second = figures["lengths"]["0.1"], figures["lengths"]["0.3"]
    assert (first["rounds"], second["rounds"]) == (8, 6)
    assert first["reference_cv"] == pytest.approx(statistics.stdev(short) / statistics.mean(short))
    assert first["raw_cv"] == pytest.approx(statistics.stdev(raw) / statistics.mean(raw))
    assert first["within"] and second["within"] and first["expected_half_width"] < 0.03
    slow_at_six = cell_figures({n: {0.1: {"reference": v, "raw": v}, 0.3: {"reference": v, "raw": v}}
                                for n, v in enumerate(short, 1)}, {0.1: 8, 0.3: 6}, 0.03)
    assert slow_at_six["lengths"]["0.1"]["within"] and not slow_at_six["lengths"]["0.3"]["within"]
    paired = figures["paired"]["0.3"]
    assert paired["rounds"] == 6 and paired["median_ratio"] == pytest.approx(statistics.median(
        [b / a for a, b in zip(short, long)]))
    cells = [{"server": "sanic", "client": "websockets", **figures},
             {"server": "bun", "client": "bun", **slow_at_six}]
    overall = summary(cells, [0.1, 0.3])
    assert overall["0.1"]["within"] == 2 and overall["0.3"]["within"] == 1
    assert (overall["0.3"]["python_pairs"], overall["0.3"]["python_pairs_within"]) == (1, 1)
    # two rounds: a CV but no interval to expect; the cell's line says so instead of failing the run
    two = {"server": "bun", "client": "bun", **cell_figures({1: {0.1: {"reference": 100.0, "raw": 100.0}},
                                                             2: {0.1: {"reference": 90.0, "raw": 90.0}}},
                                                            {0.1: 8, 0.3: 6}, 0.03)}
    assert two["lengths"]["0.1"]["reference_cv"] is not None and two["lengths"]["0.1"]["expected_half_width"] is None
    assert not two["lengths"]["0.1"]["within"]
    assert cell_line(two, [0.1, 0.3]) == "bun × bun: 0.1 s: 2 round(s), too few; 0.3 s: 0 round(s), too few"
    assert cell_line(cells[0], [0.1, 0.3]).startswith("sanic × websockets: 0.1 s: CV 7.3% (raw 12.2%), at 8 rounds ±")
    assert slow_share([10.0] * 19 + [20.0]) == pytest.approx(0.05) and slow_share([]) is None
    for argv, error in ((["--windows", "0.1"], "window_length_precision: --windows: '0.1' must name two lengths or "
                                              "more, each once"),
                        (["--afforded", "0.1:8"], "window_length_precision: --afforded: no rounds for the 0.2 s "
                                                  "window"),
                        (["--rounds", "2"], "window_length_precision: --rounds must be at least 3"),
                        (["--cells", "sanic"], "window_length_precision: --cells: 'sanic' is not SERVER:CLIENT"),
                        (["--cells", "sanic:websockets,sanic:websockets"],
                         "window_length_precision: --cells: sanic:websockets is named twice"),
                        (["--cells", "sanic:nosuch"], "window_length_precision: --cells: unknown implementations: "
                                                      "nosuch")):
        completed = subprocess.run([sys.executable, "-m", "benchmarks.window_length_precision", *argv], cwd=ROOT,
                                   capture_output=True, text=True, timeout=60)
        assert completed.returncode == 2 and completed.stderr.strip() == error, completed.stderr


def test_the_paced_benchmarks_refuse_what_keeps_them_from_measuring_in_one_line(monkeypatch):
    """benchmarks/rounds_setup.paced_cells_problem, which attempt_pace_bias and window_length_precision share: a pair
    not SERVER:CLIENT, an unknown implementation, the host sentinel not built, the raw-windows switch set."""
    from benchmarks.rounds_setup import paced_cells_problem
    from pingpong.contract import RAW_WINDOWS_ENV
    from pingpong.harness.system import host_sentinel
    implementations = implementations_by_role()
    monkeypatch.delenv(RAW_WINDOWS_ENV, raising=False)
    built = host_sentinel.SENTINEL.exists()
    not_built = f"{host_sentinel.SENTINEL.name} is not built (sh native/build.sh)"
    assert paced_cells_problem([("sanic", "websockets")], implementations) == (None if built else not_built)
    assert paced_cells_problem([("sanic",)], implementations) == "--cells: 'sanic' is not SERVER:CLIENT"
    assert paced_cells_problem([("nosuch", "websockets")], implementations) == (
        "--cells: unknown implementations: nosuch")
    monkeypatch.setenv(RAW_WINDOWS_ENV, "1")
    assert paced_cells_problem([("sanic", "websockets")], implementations) == (
        f"{RAW_WINDOWS_ENV} is set; this benchmark sets the windows' pacing itself" if built else not_built)


def test_warmup_helpers_reads_its_settings_and_refuses_bad_ones_in_one_line():
    from benchmarks.warmup_helpers import parse_settings, settings_for
    assert parse_settings("default:measured,2:spare") == [("default", "measured"), ("2", "spare")]
    base = matrix_settings()
    assert settings_for(base, "default", "measured") == replace(base, warmup_helpers="measured")
    long = settings_for(base, "2", "spare")
    assert (long.warmup_s, long.jit_warmup_s, long.warmup_helpers) == (2.0, 2.0, "spare")
    for bad, message in (("2:elsewhere", "HELPERS must be one of spare, measured"),
                         ("0:spare", "WARMUP must be 'default' or seconds above 0")):
        with pytest.raises(ValueError, match=message):
            parse_settings(bad)
    completed = subprocess.run([sys.executable, "-m", "benchmarks.warmup_helpers", "--cells", "sanic:nosuch"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr.strip() == "warmup_helpers: --cells: 'sanic:nosuch' is not SERVER:CLIENT of manifest.toml"


def test_the_crossed_placement_is_predicted_from_split_by_the_crossings_counted_in_both():
    """Each crossing counted beyond split's costs the host's w, taken round by round from the C floor's cell."""
    from benchmarks.deflate_model import crossed_by_round, predict_crossed
    split = {"roundtrip_us": 500.0, "crossings": 4.0}
    crossed = {"roundtrip_us": 900.0, "crossings": 24.0}
    assert predict_crossed(split, crossed, wakeup_us=20.0) == {"crossed_predicted_us": 900.0, "crossed_error": 0.0}
    floor, cell = ("raw-tcp-c", "raw-tcp-c"), ("aiohttp", "node-ws")
    same_rounds = {floor: {1: {"roundtrip_us": 30.0}, 2: {"roundtrip_us": 30.0}}}
    split_rounds = {floor: {1: {"roundtrip_us": 110.0, "crossings": 4.0}, 2: {"roundtrip_us": 150.0, "crossings": 4.0}},
                    cell: {1: split, 2: split}}
    crossed_rounds = {cell: {1: crossed, 2: {"roundtrip_us": 1300.0, "crossings": 24.0}}}
    # round 1: w = 20 µs, exact; round 2: w = 30 µs, 500 + 20 × 30 = 1100 against 1300
    errors = crossed_by_round(split_rounds, same_rounds, crossed_rounds)[cell]
    assert errors.n == 2 and errors.low == 1100 / 1300 - 1 and errors.high == 0.0


def test_the_counting_cost_is_taken_over_its_events_two_a_wakeup_and_one_a_move():
    """benchmarks.wakeup_counting divides the µs the counting added by the events it traced: each wakeup is a
    sched_waking and a sched_wakeup, each move one sched_migrate_task; an attempt without counts has none."""
    from types import SimpleNamespace
    from benchmarks.wakeup_counting import events_per_roundtrip
    server = SimpleNamespace(wakeups=200, migrations=0)
    client = SimpleNamespace(wakeups=2400, migrations=10)
    assert events_per_roundtrip(SimpleNamespace(server_scheduling=server, client_scheduling=client,
                                                roundtrips=100)) == (2 * 200 + 2 * 2400 + 10) / 100
    uncounted = SimpleNamespace(wakeups=None, migrations=None)
    assert events_per_roundtrip(SimpleNamespace(server_scheduling=server, client_scheduling=uncounted,
                                                roundtrips=100)) is None
