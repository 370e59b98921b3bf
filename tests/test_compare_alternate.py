"""compare --alternate A B --runs N -- RUN OPTIONS: the two sides' runs made here, A, B, A, B, then compared across
runs; a failed run stops it, Ctrl-C leaves no process, bad input is one line."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pingpong.harness.commands.compare_alternate import order, run_command, side_source, split_run_options
from pingpong.harness.settings.catalog import PROJECT_ROOT
from pingpong.harness.settings.usage import UsageError
from pingpong.harness.system import guardian
from tests.conftest import QUICK_RELAY_CHECK, ROOT, TEST_TOKEN_ENV, processes_carrying
from tests.interactive import sigint_at_default
from tests.test_cli_input import assert_one_line_error

# the checkouts are of HEAD, which has the floor; the comparison reads the JSON
FLOOR_RUN = ["--servers", "raw-tcp-python", "--clients", "raw-tcp-python", "--duration", "0.2", "--warmup", "0.1",
             "--no-figures", *QUICK_RELAY_CHECK]


@pytest.fixture(scope="module")
def checkouts(tmp_path_factory):
    """Two checkouts of this suite's HEAD: a shared clone, and a git worktree of that clone (the floor run they are
    given needs neither node_modules nor build/)."""
    folder = tmp_path_factory.mktemp("checkouts")
    a, b = folder / "a", folder / "b"
    subprocess.run(["git", "clone", "--shared", "--quiet", str(ROOT), str(a)], check=True, timeout=60)
    subprocess.run(["git", "-C", str(a), "worktree", "add", "--quiet", "--detach", str(b), "HEAD"], check=True,
                   timeout=60)
    return a, b


def compare_alternate(*args, cwd=ROOT, timeout=300):
    return subprocess.run([sys.executable, "run_bench.py", "compare", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def test_two_checkouts_run_alternately_and_compare_across_runs(checkouts, tmp_path):
    """N = 2: runs A-1, B-1, A-2, B-2 in that order, each in its checkout with its own results folder, each one's
    progress shown under its name; then the comparison across 2 and 2 runs, with the gate's exit code."""
    kept = tmp_path / "kept"
    done = compare_alternate("--alternate", *map(str, checkouts), "--runs", "2", "--keep", str(kept),
                             "--fail-above", "10", "--", *FLOOR_RUN, "--repeat", "2")
    assert done.returncode == 0, done.stderr
    record = json.loads((kept / "alternation.json").read_text())
    assert record["order"] == ["A-1", "B-1", "A-2", "B-2"]
    assert [(run["side"], run["number"]) for run in record["runs"]] == order(2) == [("A", 1), ("B", 1), ("A", 2),
                                                                                      ("B", 2)]
    starts = [run["started_at"] for run in record["runs"]]
    assert starts == sorted(starts) and all(run["exit_code"] == 0 for run in record["runs"])
    for run in record["runs"]:
        directory = str(checkouts[0 if run["side"] == "A" else 1].resolve())
        assert run["command"][-2:] == ["--results-dir", str(kept / run["name"])]
        assert run["results"].startswith(str(kept / run["name"])) and os.path.isfile(run["results"])
        assert record["sides"][0 if run["side"] == "A" else 1]["directory"] == directory
    assert sorted(path.parent.name for path in kept.glob("*/*.json") if path.name != "latest.json") == [
        "A-1", "A-2", "B-1", "B-2"]
    first_lines = [line.split("]")[0] + "]" for line in done.stderr.splitlines() if line.startswith("[")]
    assert list(dict.fromkeys(first_lines)) == ["[A-1]", "[B-1]", "[A-2]", "[B-2]"]  # progress, run by run
    assert "(across 2 and 2 runs)" in done.stdout.splitlines()[0]
    assert "**Passed**" in done.stdout
    assert "Order and start times (UTC): A-1 " in done.stdout and f"Files: {kept}" in done.stdout


def test_a_failed_run_stops_the_alternation_and_keeps_what_was_made(checkouts, tmp_path):
    """B's checkout whose run_bench.py exits 3: A-1 is measured, B-1 fails, and compare stops there with one line
    naming it and exit code 2; A-1's results and the record stay in --keep's folder."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "run_bench.py").write_text("import sys\nprint('something went wrong', file=sys.stderr)\nsys.exit(3)\n")
    kept = tmp_path / "kept"
    done = compare_alternate("--alternate", str(checkouts[0]), str(broken), "--runs", "2", "--keep", str(kept),
                             "--", *FLOOR_RUN, "--repeat", "1")
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("run_bench.py: error:")]
    assert len(errors) == 1 and "run B-1" in errors[0] and "exited with code 3" in errors[0] and str(kept) in errors[0]
    assert "[B-1] something went wrong" in done.stderr
    assert done.stdout == ""
    record = json.loads((kept / "alternation.json").read_text())
    assert record["order"] == ["A-1", "B-1"] and [run["exit_code"] for run in record["runs"]] == [0, 3]
    assert os.path.isfile(record["runs"][0]["results"]) and not (kept / "A-2").exists()


def test_a_run_that_saves_several_matrices_stops_the_alternation(tmp_path):
    """A run over a list of settings saves a matrix per point: there is no one file to compare, and compare says
    so, naming the run (a stand-in checkout that writes two results files)."""
    sweeping = tmp_path / "sweeping"
    sweeping.mkdir()
    (sweeping / "run_bench.py").write_text(
        "import pathlib, sys\nfolder = pathlib.Path(sys.argv[sys.argv.index('--results-dir') + 1])\n"
        "folder.mkdir(parents=True)\nfor point in ('a', 'b'):\n    (folder / f'{point}.json').write_text('{}')\n")
    done = compare_alternate("--alternate", str(sweeping), str(sweeping), "--runs", "2", "--keep",
                             str(tmp_path / "kept"))
    errors = [line for line in done.stderr.splitlines() if line.startswith("run_bench.py: error:")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr
    assert "run A-1" in errors[0] and "saved several matrices" in errors[0]


def test_ctrl_c_stops_the_run_in_progress_and_leaves_no_process(checkouts, tmp_path):
    """SIGINT to compare while A-1 measures: A-1's run gets it on its own process group, saves what it measured,
    and nothing it or compare started is left running; compare exits 130.

    compare is started as from a terminal, SIGINT at its default, whatever this test process inherited: under
    `nohup ... &` or a script's background job SIGINT comes ignored, and run_bench.py keeps an ignored SIGINT
    ignored on purpose, so the Ctrl-C here would never arrive (tests/interactive.py)."""
    kept = tmp_path / "kept"
    process = subprocess.Popen([sys.executable, "run_bench.py", "compare", "--alternate", *map(str, checkouts),
                                "--runs", "2", "--keep", str(kept), "--", *FLOOR_RUN, "--repeat", "40"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=sigint_at_default)
    token = os.environ[TEST_TOKEN_ENV]
    seen = []
    try:
        for line in process.stderr:
            seen.append(line)
            if line.startswith("[A-1] [1/40]"):  # its first attempt is measured: the run is under way
                break
        started_by_compare = [p.pid for p in processes_carrying(token) if p.pid not in (process.pid,
                                                                                        guardian.guardian_pid())]
        assert started_by_compare, "".join(seen)  # the run, its server, its client, its guardian
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, "".join(seen) + stderr
    assert "[A-1] interrupted: saving what was measured" in stderr and "stopped during A-1" in stderr
    assert stdout == ""
    deadline = time.monotonic() + 5  # the run's own guardian ends its groups and exits once the run is gone
    left = [p.pid for p in processes_carrying(token) if p.pid in started_by_compare]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p.pid for p in processes_carrying(token) if p.pid in started_by_compare]
    assert not left
    record = json.loads((kept / "alternation.json").read_text())
    assert record["interrupted"] == "A-1" and record["runs"] == []
    assert [path.name for path in (kept / "A-1").glob("*.json") if path.name != "latest.json"]
    assert not (kept / "B-1").exists()


@pytest.mark.parametrize("args, fragment", [
    (["--alternate", "{a}", "{tmp}/missing", "--runs", "2"], "B = {tmp}/missing: no such folder"),
    (["--alternate", "{tmp}", "{a}", "--runs", "2"], "A = {tmp}: no run_bench.py in it"),
    (["--alternate", "{a}", "{a}", "--runs", "1"], "--runs 1: at least 2 runs a side"),
    (["--alternate", "{a}", "{a}"], "--alternate needs --runs N"),
    (["--alternate", "{a}", "{a}", "--runs", "2", "--", "--results-dir", "x"], "may not set --results-dir"),
    (["--alternate", "{a}", "{a}", "--runs", "2", "--", "--resume", "x.json"], "may not --resume"),
    (["--alternate", "{a}", "{a}", "--runs", "2", "--", "report", "x.json"], "'report' is not one"),
    (["--alternate", "{a}", "{a}", "--runs", "2", "--", "--repeat", "many"], "invalid int value: 'many'"),
    (["--alternate", "{a}", "python:aiohttp", "--runs", "2"], "is not a package like"),
    (["--alternate", "{a}", "python:aiohttp==3.9.1", "--runs", "2", "--", "--python-packages", "ws==1"],
     "give the packages in one place"),
    (["--alternate", "{a}", "{a}", "--runs", "2", "--fail-above", "-5"], "--fail-above takes a percentage"),
    (["--alternate", "{a}", "{a}", "--runs", "2", "{a}/run_bench.py"], "no results files, no --against"),
    (["--runs", "3"], "--runs goes with --alternate"),
    (["a.json", "b.json", "--", "--repeat", "2"], "run options after -- go with --alternate"),
])
def test_bad_input_is_one_line_and_runs_nothing(checkouts, tmp_path, args, fragment):
    """Each is refused before any run starts: one line, exit code 2, no folder made for the runs."""
    empty = tmp_path / "empty"
    empty.mkdir()
    fill = {"{a}": str(checkouts[0]), "{tmp}": str(empty)}

    def filled(text):
        for key, value in fill.items():
            text = text.replace(key, value)
        return text

    kept = tmp_path / "kept"
    args = [filled(arg) for arg in args]
    if "--alternate" in args:  # compare's own option: before the run options
        cut = args.index("--") if "--" in args else len(args)
        args[cut:cut] = ["--keep", str(kept)]
    done = compare_alternate(*args)
    assert_one_line_error(done, filled(fragment))
    assert not kept.exists()


def test_keep_must_be_a_new_or_empty_folder(checkouts, tmp_path):
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "A-1").mkdir()
    done = compare_alternate("--alternate", str(checkouts[0]), str(checkouts[1]), "--runs", "2", "--keep",
                             str(tmp_path / "kept"))
    assert_one_line_error(done, "not a new or empty folder")


def test_a_package_set_runs_in_this_checkout_with_the_old_release_option(tmp_path):
    """python:... and node:... become --python-packages / --node-packages (space-separated specs, extras kept
    whole), added to the run options of every run of that side, which starts in this checkout."""
    python = side_source("B", "python:aiohttp==3.9.1,uvicorn[standard,x]==0.24.0.post1")
    assert python.directory == str(PROJECT_ROOT)
    assert run_command(python, ["--repeat", "2"], tmp_path / "B-1") == [
        sys.executable, "run_bench.py", "--repeat", "2", "--python-packages",
        "aiohttp==3.9.1 uvicorn[standard,x]==0.24.0.post1", "--results-dir", str(tmp_path / "B-1")]
    node = side_source("A", "node:ws@8.14.2,@types/ws@8.5.0")
    assert node.package_options == ("--node-packages", "ws@8.14.2 @types/ws@8.5.0")
    with pytest.raises(UsageError, match="needs at least one package"):
        side_source("A", "node:")


def test_run_options_start_after_the_first_double_dash_of_compare_only():
    assert split_run_options(["compare", "--alternate", "a", "b", "--", "--repeat", "2", "--", "x"]) == (
        ["compare", "--alternate", "a", "b"], ["--repeat", "2", "--", "x"])
    assert split_run_options(["compare", "a.json", "b.json"]) == (["compare", "a.json", "b.json"], None)
    assert split_run_options(["measure", "--", "prog", "{url}"]) == (["measure", "--", "prog", "{url}"], None)
