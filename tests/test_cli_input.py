"""Bad input and surprises at the command line: exit codes, one-line errors, the files written or left alone.

Nothing here measures: every case stops before a server starts (or parses options without running anything).
"""

import csv
import io
import json
import os
import re
import subprocess
import sys

import pytest

from pingpong import SUITE_VERSION
from pingpong.contract import HOST_PROBE_ENV, RAW_WINDOWS_ENV
from pingpong.harness.commands.parser import build_parser
from pingpong.harness.results.stored import read_json, sibling
from pingpong.harness.settings.configuration import (DEFAULT_MATRIX_DURATION_S, DEFAULT_MATRIX_WARMUP_S,
                                                     build_configuration, measurement_switch_problems,
                                                     resolve_options)
from tests.conftest import ROOT
from tests.test_run_bench import run_bench

REFERENCE = "results/reference/2026-11-21-default-matrix.json.xz"


def options_for(*args):
    return resolve_options(build_parser().parse_args(["run", *args]))


def assert_one_line_error(completed, *fragments):
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.startswith("run_bench.py: error:") and completed.stderr.strip().count("\n") == 0
    for fragment in fragments:
        assert fragment in completed.stderr
    assert completed.stdout == ""


def test_nothing_runnable_is_refused_and_writes_nothing(tmp_path):
    """A selection whose every pair is skipped exits 2 with one line, and leaves the results folder as it was."""
    (tmp_path / "latest.json").write_text("the last real run")
    completed = run_bench("--servers", "raw-tcp-c", "--clients", "node-ws", "--results-dir", str(tmp_path))
    assert_one_line_error(completed, "nothing to measure", "server speaks raw-tcp, client speaks websocket")
    assert [p.name for p in tmp_path.iterdir()] == ["latest.json"]
    assert (tmp_path / "latest.json").read_text() == "the last real run"


def test_nothing_runnable_into_a_new_folder_does_not_create_it(tmp_path):
    completed = run_bench("--servers", "raw-tcp-c", "--clients", "node-ws", "--results-dir", str(tmp_path / "new"))
    assert completed.returncode == 2
    assert not (tmp_path / "new").exists()


def test_an_explicit_option_beats_quick():
    """--quick fills in only what was not given: --duration 4 --quick measures 4 s, with --quick's warmup."""
    options = options_for("--quick", "--duration", "4", "--repeat", "2")
    assert (options.duration_s, options.warmup_s, options.rounds.min_rounds) == (4.0, 0.2, 2)
    assert options.rounds.precision is None and options.rounds.max_rounds == 2
    quick = options_for("--quick")
    assert (quick.duration_s, quick.rounds.min_rounds, quick.rounds.max_rounds) == (0.5, 1, 1)
    default = options_for()
    assert (default.duration_s, default.warmup_s) == (DEFAULT_MATRIX_DURATION_S, DEFAULT_MATRIX_WARMUP_S)
    assert default.rounds.max_rounds > default.rounds.min_rounds and default.rounds.precision == 0.03


def test_the_options_resolve_once_into_a_frozen_record_and_leave_the_namespace_alone():
    """resolve_options reads the parsed options and writes nothing back: its record is frozen, and the Namespace
    holds exactly what argparse put there."""
    import dataclasses

    namespace = build_parser().parse_args(["run", "--payload-size", "16,1024", "--quick"])
    before = vars(namespace).copy()
    resolved = resolve_options(namespace)
    assert vars(namespace) == before
    assert resolved.payload_sizes == (16, 1024) and resolved.pairs == (1,) and resolved.rates == (None,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.duration_s = 1.0


def test_diagnose_keeps_its_shorter_default_duration():
    options = resolve_options(build_parser().parse_args(["diagnose", "aiohttp", "node-ws"]))
    assert options.duration_s == 3.0
    assert options.rounds.min_rounds == options.rounds.max_rounds == 3 and options.rounds.seed == 0
    assert options.resume is None


def test_empty_names_in_a_list_are_refused(tmp_path):
    for args in (["--servers", "node-ws,,bun"], ["--clients", "node-ws,"], ["--servers", ""],
                 ["--exclude", ",bun"]):
        completed = run_bench(*args, "--results-dir", str(tmp_path))
        assert_one_line_error(completed, "empty name")
    assert list(tmp_path.iterdir()) == []


def test_exclude_refuses_unknown_names_and_an_empty_selection(tmp_path):
    assert_one_line_error(run_bench("--exclude", "nope", "--results-dir", str(tmp_path)), "unknown name 'nope'")
    assert_one_line_error(run_bench("--servers", "bun", "--exclude", "bun", "--results-dir", str(tmp_path)),
                          "no server left")


def test_exclude_drops_a_name_from_both_roles():
    from pingpong.harness.settings.catalog import DEFAULT_MANIFEST, load_manifests, select

    implementations = load_manifests([DEFAULT_MANIFEST])
    servers = [s.name for s in select(implementations, "server", None, "websockets,raw-tcp-c")]
    clients = [c.name for c in select(implementations, "client", None, "websockets,raw-tcp-c")]
    assert "websockets" not in servers and "raw-tcp-c" not in servers and "sanic" in servers
    assert "websockets" not in clients and "raw-tcp-c" not in clients and "node-ws" in clients


def test_listing_in_every_format_shows_installed_versions():
    """--list and list take --format md|json|csv; each names the runtime's and the packages' versions."""
    rows = json.loads(run_bench("list", "--format", "json").stdout)
    aiohttp = next(r for r in rows if r["role"] == "server" and r["name"] == "aiohttp")
    assert re.fullmatch(r"3\.\d+\.\d+", aiohttp["versions"]["python"])
    assert aiohttp["versions"]["aiohttp"] == requirement_pin("aiohttp")
    node_ws = next(r for r in rows if r["role"] == "server" and r["name"] == "node-ws")
    lock = json.loads((ROOT / "package.json").read_text())["dependencies"]
    assert node_ws["versions"]["ws"] == lock["ws"] and re.match(r"\d+\.\d+", node_ws["versions"]["node"])
    listed = run_bench("--list", "--format", "csv")
    assert listed.returncode == 0
    table = list(csv.DictReader(io.StringIO(listed.stdout)))
    assert {(r["role"], r["name"]) for r in table} == {(r["role"], r["name"]) for r in rows}
    assert f"aiohttp {requirement_pin('aiohttp')}" in next(r for r in table if r["name"] == "aiohttp")["versions"]
    plain = run_bench("--list").stdout
    assert f"websockets {requirement_pin('websockets')}" in plain


def requirement_pin(name: str) -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.startswith(f"{name}=="):
            return line.split("==")[1]
    raise KeyError(name)


def test_version_names_the_suite_version_and_commit():
    completed = run_bench("--version")
    assert completed.returncode == 0
    assert re.match(rf"run_bench.py {re.escape(SUITE_VERSION)} \(commit ([0-9a-f]{{12}}|unknown)", completed.stdout)
    assert json.loads((ROOT / "package.json").read_text())["version"] == SUITE_VERSION


def test_report_re_renders_the_reference_run_in_every_format():
    """The committed reference run shows again as Markdown (its committed .md), CSV, JSON, HTML and text."""
    markdown = run_bench("report", REFERENCE, "--format", "md")
    assert markdown.returncode == 0 and markdown.stdout == sibling(ROOT / REFERENCE, ".md").read_text()
    rows = list(csv.DictReader(io.StringIO(run_bench("report", REFERENCE, "--format", "csv").stdout)))
    saved = read_json(ROOT / REFERENCE)
    assert [(r["server"], r["client"]) for r in rows] == [(c["server"], c["client"]) for c in saved["cells"]]
    assert json.loads(run_bench("report", REFERENCE, "--format", "json").stdout)["cells"][0]["summary"]["status"]
    page = run_bench("report", REFERENCE, "--format", "html").stdout
    assert page.startswith("<!DOCTYPE html>") and "bun" in page
    text = run_bench("report", REFERENCE).stdout
    assert "Fastest WebSocket pairs" in text and max(len(line) for line in text.splitlines()) <= 120


def test_report_of_something_else_is_one_line_exit_2(tmp_path):
    (tmp_path / "notes.json").write_text("{}")
    for path in (tmp_path / "missing.json", tmp_path, tmp_path / "notes.json",
                 ROOT / "results/reference/2026-11-21-pairs-sweep.json.xz"):
        assert_one_line_error(run_bench("report", str(path)))


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`run_bench.py --list | head`: a stdout closed before the listing is written is no error: exit 0, quiet."""
    process = subprocess.Popen([sys.executable, "run_bench.py", "--list"], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.close()  # before the interpreter has even started: its first write meets a closed pipe
    stderr = process.stderr.read().decode()
    assert process.wait(60) == 0
    assert stderr == ""


@pytest.mark.parametrize("args, fragment", [
    (["--receivers", "5"], "--receivers is for --workload broadcast"),
    (["--workload", "broadcast", "--rate", "100"], "no --pairs, --rate or --idle-connections"),
    (["--workload", "broadcast", "--pairs", "2"], "no --pairs, --rate or --idle-connections"),
    (["--workload", "handshake", "--idle-connections", "10"], "takes no --rate or --idle-connections"),
    (["--rate", "0"], "--rate values must be > 0"),
    (["--rate", "fast"], "--rate takes numbers"),
    (["--idle-connections", "-1"], "--idle-connections values must be at least 0"),
    (["--saturation-p99", "0"], "--saturation-p99 must be > 0"),
    (["--malloc", "warm"], "--malloc 'warm': choose from settled, as-is"),
    (["--relay-silence", "0"], "--relay-silence must be > 0 seconds, got 0"),
])
def test_workload_options_that_do_not_fit_get_one_line(tmp_path, args, fragment):
    completed = run_bench(*args, "--results-dir", str(tmp_path / "new"))
    assert_one_line_error(completed, fragment)
    assert not (tmp_path / "new").exists()


def test_idle_connections_choose_fresh_servers_and_say_why():
    options = options_for("--idle-connections", "0,100", "--repeat", "2")
    configuration = build_configuration(options, ["run_bench.py"], [], [], [])
    assert configuration.rounds.fresh_server and "memory" in configuration.rounds.fresh_server_reason
    assert [point["idle_connections"] for point in configuration.points] == [0, 100]
    assert configuration.recorded(configuration.settings_at(configuration.points[1]))["idle_connections"] == 100


def test_malloc_modes_are_a_dimension_that_needs_a_server_process_each():
    """--malloc settled,as-is: two points; each point's processes get its mode (PINGPONG_MALLOC), recorded."""
    from pingpong.contract import MALLOC_ENV
    from pingpong.harness.measure.attempt_plan import process_environment
    from pingpong.harness.measure.rounds import SERVER_DIMENSIONS

    options = options_for("--malloc", "settled,as-is", "--repeat", "2")
    configuration = build_configuration(options, ["run_bench.py"], [], [], [])
    assert [point["malloc"] for point in configuration.points] == ["settled", "as-is"]
    settings = configuration.settings_at(configuration.points[1])
    assert process_environment(settings)[MALLOC_ENV] == "as-is"
    assert configuration.recorded(settings)["malloc"] == "as-is"
    assert "malloc" in SERVER_DIMENSIONS
    assert process_environment(configuration.settings_at(configuration.points[0]))[MALLOC_ENV] == "settled"


def test_a_measurement_switch_set_to_anything_but_1_or_0_is_refused(tmp_path):
    """PINGPONG_RAW_WINDOWS=yes would leave the switch off without a word: the run refuses it in one line and
    writes nothing; 0 and an empty value are off, as unset is."""
    completed = subprocess.run([sys.executable, "run_bench.py", "--quick", "--results-dir", str(tmp_path)], cwd=ROOT,
                               capture_output=True, text=True, timeout=60, env={**os.environ, RAW_WINDOWS_ENV: "yes"})
    assert_one_line_error(completed, f"{RAW_WINDOWS_ENV}='yes': a measurement switch is 1 (on) or 0 (off)")
    assert list(tmp_path.iterdir()) == []
    for value in ("0", "", "1"):
        assert measurement_switch_problems({RAW_WINDOWS_ENV: value}) == []
    assert measurement_switch_problems({}) == []
    assert len(measurement_switch_problems({RAW_WINDOWS_ENV: "on", "PINGPONG_FIXED_ADDRESS_LAYOUT": "true"})) == 2


def test_a_retired_switch_set_to_1_is_refused_saying_why(tmp_path):
    """PINGPONG_HOST_PROBE=1 would measure nothing now (the host's pace is measured inside every window): the run
    refuses it in one line, saying so, and writes nothing; 0, empty and unset pass."""
    completed = subprocess.run([sys.executable, "run_bench.py", "--quick", "--results-dir", str(tmp_path)], cwd=ROOT,
                               capture_output=True, text=True, timeout=60, env={**os.environ, HOST_PROBE_ENV: "1"})
    assert_one_line_error(completed, f"{HOST_PROBE_ENV}=1 is retired (unset it):",
                          "the host's pace is measured inside every window now")
    assert list(tmp_path.iterdir()) == []
    for value in ("0", ""):
        assert measurement_switch_problems({HOST_PROBE_ENV: value}) == []
