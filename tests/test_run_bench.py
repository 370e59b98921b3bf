"""run_bench.py end to end: real processes, the files it writes, its exit codes, and what it leaves behind."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from pingpong.contract import RAW_WINDOWS_ENV
from pingpong.harness.results.histograms import latency_summary, merge
from pingpong.harness.results.records import FORMAT_VERSION
from tests.conftest import QUICK_RELAY_CHECK, QUICK_RELAY_SILENCE_S, ROOT

FAST = ["--duration", "0.3", "--warmup", "0.1", "--jit-warmup", "0",
        *QUICK_RELAY_CHECK]  # what these runs record, not their rates
# matplotlib's import and drawing cost about a second a run: a test that does not look at a figure asks for none
NO_FIGURES = ["--no-figures"]


def run_bench(*args, timeout=300, env=None):
    """run_bench.py with args; env: variables set beside this process's environment."""
    return subprocess.run([sys.executable, "run_bench.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **env} if env else None)


# For a test whose run's windows are shorter than 0.2 s and whose subject is not the host's pace (test_host_pace.py
# has its own): such a window holds a few of the pacer's slices, and with three tests at a time on two CPUs a 0.1 s
# or 0.12 s window once got none, which fails its attempt (2026-11-28). Its windows are measured raw.
RAW_WINDOWS = {RAW_WINDOWS_ENV: "1"}


def command_line(process: psutil.Process) -> str | None:
    """A process's command line, or None when it has exited (a zombie not yet reaped, or gone)."""
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return None


def assert_gone(pids):
    alive = [pid for pid in pids if pid and psutil.pid_exists(pid)
             and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"processes still running: {alive}"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs: it checks that server and "
                    "client share one, the orchestrator keeping the other")
def test_sub_matrix_writes_json_and_markdown(tmp_path):
    """A 2 x 2 run exits 0, prints its JSON, and writes <stamp>.json/.md and latest.md with all four cells."""
    completed = run_bench("--servers", "aiohttp,node-ws", "--clients", "websockets,node-ws", "--repeat", "2",
                          *FAST, "--results-dir", str(tmp_path), "--format", "json")
    assert completed.returncode == 0, completed.stderr
    printed = json.loads(completed.stdout)
    files = sorted(p.name for p in tmp_path.iterdir())
    stamped_json = [name for name in files if name.endswith(".json") and name != "latest.json"]
    assert len(stamped_json) == 1 and stamped_json[0].replace(".json", ".md") in files and "latest.md" in files
    saved = json.loads((tmp_path / stamped_json[0]).read_text())
    assert saved["cells"] == printed["cells"]
    assert saved["format_version"] == FORMAT_VERSION
    assert saved["configuration"]["repeat"] == 2 and saved["configuration"]["pinned"] is True
    assert saved["configuration"]["relay_silence_s"] == QUICK_RELAY_SILENCE_S  # each server's relay check, as given
    # what the run learned is beside its settings: why and when its rounds stopped; no topology on one machine
    assert saved["rounds_outcome"]["stopped_by"] == "rounds" and saved["rounds_outcome"]["measuring_s"] > 0
    assert "stopped_by" not in saved["configuration"]["rounds"] and saved["topology"] is None
    for key in ("cpu_model", "kernel", "python", "node", "suite_commit", "python_packages", "node_packages"):
        assert saved["environment"][key], key
    assert saved["command_line"][1:3] == ["run_bench.py", "--servers"]
    cells = {(c["server"], c["client"]): c for c in saved["cells"]}
    assert set(cells) == {(s, c) for s in ("aiohttp", "node-ws") for c in ("websockets", "node-ws")}
    pids = []
    for cell in cells.values():
        assert cell["status"] == "ok"
        assert [a["repeat"] for a in cell["attempts"]] == [1, 2]
        for attempt in cell["attempts"]:
            assert attempt["roundtrips"] > 0 and attempt["status"] == "ok"
            assert latency_summary(merge([attempt["latency_histogram"]]))["count"] == \
                attempt["roundtrips"] - attempt["client_report"]["pauses"]["latency_dropped"]
            # one pair: placement auto puts both sides on one CPU, the orchestrator on the other
            assert attempt["cpu_placement"] == "same-cpu" and attempt["server_cpus"] == attempt["client_cpus"]
            pids += [attempt["server_pid"], attempt["client_pid"]]
        summary = cell["summary"]
        assert summary["roundtrips_per_s"]["n"] == 2 and "p99_ns" in summary["latency"]
        assert summary["roundtrips_per_s"]["interval_kind"] == "range"  # 2 repeats: their range, covering 50%
        assert summary["roundtrips_per_s"]["interval_coverage"] == 0.5
        assert summary["server_cpu_us_per_roundtrip"] > 0 and summary["client_cpu_us_per_roundtrip"] > 0
    assert_gone(pids)
    markdown = (tmp_path / "latest.md").read_text()
    assert "| server \\ client | websockets | node-ws |" in markdown
    assert "| aiohttp |" in markdown and "| node-ws |" in markdown and "Fastest WebSocket pair" in markdown
    stem = tmp_path / stamped_json[0].removesuffix(".json")
    for figure in ("heatmap", "latency-cdf"):  # the run's figures, drawn by default
        assert stem.with_name(f"{stem.name}-{figure}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_name_is_one_line_exit_2(tmp_path):
    """An unknown client name gives one line naming the valid ones, exit 2, no traceback."""
    completed = run_bench("--clients", "websockets,nope", "--results-dir", str(tmp_path))
    assert completed.returncode == 2
    assert completed.stderr.strip().count("\n") == 0
    assert "unknown client 'nope'" in completed.stderr and "websockets, aiohttp, node-ws" in completed.stderr
    assert list(tmp_path.iterdir()) == []


def test_nonsense_numbers_are_refused(tmp_path):
    for args in (["--repeat", "0"], ["--duration", "-2"], ["--warmup", "-1"], ["--payload-size", "0"],
                 ["--duration", "abc"]):
        completed = run_bench(*args, "--results-dir", str(tmp_path))
        assert completed.returncode == 2, args
        assert completed.stderr.startswith("run_bench.py: error:") and "Traceback" not in completed.stderr


def test_list_shows_every_implementation_and_availability():
    completed = run_bench("--list", "--format", "json")
    assert completed.returncode == 0
    rows = json.loads(completed.stdout)
    assert {(r["role"], r["name"]) for r in rows} >= {("server", "sanic"), ("client", "node-ws")}
    assert all(r["available"] for r in rows)


def test_echoing_server_fails_verification_and_is_not_measured(tmp_path):
    """A server that echoes to the sender is reported as failing verification; the other cell is measured."""
    completed = run_bench("--manifest", "manifest.toml", "--manifest", "tests/manifest.toml",
                          "--servers", "echo-to-sender,websockets", "--clients", "websockets", "--repeat", "1",
                          *FAST, *NO_FIGURES, "--results-dir", str(tmp_path), "--format", "json")
    assert completed.returncode == 1
    assert not list(tmp_path.glob("*.png")) and "latest.md" in {p.name for p in tmp_path.iterdir()}
    cells = {c["server"]: c for c in json.loads(completed.stdout)["cells"]}
    bad = cells["echo-to-sender"]
    assert bad["status"] == "failed"
    assert bad["attempts"][0]["status"] == "verification-failed"
    assert "sent A's message back to A" in bad["attempts"][0]["reason"]
    assert bad["attempts"][0]["roundtrips"] is None
    assert cells["websockets"]["status"] == "ok"


def start_in_background(tmp_path, sigint_disposition, *args) -> subprocess.Popen:
    """run_bench.py started with SIGINT's disposition set for it, whatever this test process inherited.

    signal.SIG_DFL is an interactive start; signal.SIG_IGN is what a background job of a non-interactive shell
    (a script's `command &`, nohup, a CI runner) gets.
    """
    def set_sigint() -> None:
        signal.signal(signal.SIGINT, sigint_disposition)

    with open(tmp_path / "run_bench.stderr", "w") as stderr:
        return subprocess.Popen([sys.executable, "run_bench.py", "--servers", "websockets", "--clients", "websockets",
                                 "--repeat", "6", "--duration", "1", "--warmup", "0.2",
                                 "--results-dir", str(tmp_path / "results"), *args], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=set_sigint)


def wait_for_attempts(process: subprocess.Popen, latest, count: int) -> dict:
    """The saved results once they hold at least count attempts (the run still going)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, f"run_bench.py ended early with {process.returncode}"
        if latest.exists():
            saved = json.loads(latest.read_text())
            if len(saved["cells"][0]["attempts"]) >= count:
                return saved
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} attempts saved within 120 s")


def test_interrupt_saves_partial_results_and_leaves_nothing(tmp_path):
    """SIGINT mid-run: exit 130, the finished cell is in the results marked interrupted, no process survives."""
    process = start_in_background(tmp_path, signal.SIG_DFL)
    latest = tmp_path / "results" / "latest.json"
    wait_for_attempts(process, latest, 1)
    children = [p.pid for p in psutil.Process(process.pid).children(recursive=True)]
    process.send_signal(signal.SIGINT)
    assert process.wait(60) == 130, (tmp_path / "run_bench.stderr").read_text()
    saved = json.loads(latest.read_text())
    assert saved["interrupted"] is True and saved["finished_at"]
    assert 1 <= len(saved["cells"][0]["attempts"]) < 6
    assert_gone(children + [a["server_pid"] for a in saved["cells"][0]["attempts"]])


def test_started_with_sigint_ignored_it_keeps_ignoring_it_and_sigterm_stops_it(tmp_path):
    """A background job's ignored SIGINT stays ignored (the run goes on); SIGTERM still stops it cleanly."""
    process = start_in_background(tmp_path, signal.SIG_IGN)
    latest = tmp_path / "results" / "latest.json"
    wait_for_attempts(process, latest, 1)
    process.send_signal(signal.SIGINT)
    saved = wait_for_attempts(process, latest, 2)  # measuring went on after the SIGINT
    assert saved["interrupted"] is False
    children = [p.pid for p in psutil.Process(process.pid).children(recursive=True)]
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 130, (tmp_path / "run_bench.stderr").read_text()
    saved = json.loads(latest.read_text())
    assert saved["interrupted"] is True and saved["finished_at"]
    assert 2 <= len(saved["cells"][0]["attempts"]) < 6
    assert_gone(children + [a["server_pid"] for a in saved["cells"][0]["attempts"]])


def test_one_server_process_per_round_serves_the_row_and_fresh_server_does_not(tmp_path):
    """Two clients, two rounds: each round's server process serves both cells (in rooms of their own) and is
    stopped cleanly; --fresh-server starts one per attempt. The seed and the order are recorded."""
    args = ["--servers", "websockets", "--clients", "websockets,node-ws", "--duration", "0.3", "--warmup", "0.1",
            "--repeat", "2", "--seed", "5", "--format", "json", "--jit-warmup", "0", *QUICK_RELAY_CHECK, *NO_FIGURES]
    completed = run_bench(*args, "--results-dir", str(tmp_path / "long-lived"))
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["configuration"]["rounds"]["seed"] == 5 and not result["configuration"]["rounds"]["fresh_server"]
    by_round = {r: [a for c in result["cells"] for a in c["attempts"] if a["repeat"] == r] for r in (1, 2)}
    assert all(len({a["server_pid"] for a in attempts}) == 1 for attempts in by_round.values())
    assert by_round[1][0]["server_pid"] != by_round[2][0]["server_pid"]
    assert all(a["status"] == "ok" and a["server_exit_code"] in (0, -15) for a in by_round[1] + by_round[2])
    assert_gone([a["server_pid"] for a in by_round[1] + by_round[2]])
    fresh = run_bench(*args, "--fresh-server", "--results-dir", str(tmp_path / "fresh"))
    assert fresh.returncode == 0, fresh.stderr
    attempts = [a for c in json.loads(fresh.stdout)["cells"] for a in c["attempts"]]
    assert len({a["server_pid"] for a in attempts}) == 4


def test_a_list_setting_is_a_dimension_interleaved_within_every_round(tmp_path):
    """--compression default,off: both points are measured in round 1 before either in round 2; each point has its
    own results file, and the index pairs every cell's rate at the second point with the first's, by round."""
    completed = run_bench("--servers", "websockets", "--clients", "websockets", "--compression", "default,off",
                          "--duration", "0.3", "--warmup", "0.1", "--repeat", "2", *QUICK_RELAY_CHECK, *NO_FIGURES,
                          "--results-dir", str(tmp_path))
    assert completed.returncode == 0, completed.stderr
    rounds = [int(line.split("round ")[1].split(":")[0]) for line in completed.stderr.splitlines()
              if line.startswith("[")]
    assert rounds == [1, 1, 2, 2]
    index = json.loads(next(tmp_path.glob("*-sweep.json")).read_text())
    assert index["swept"] == ["compression"]
    assert [p["compression"] for p in index["points"]] == ["default", "off"]
    for point in index["points"]:
        run = json.loads((tmp_path / point["results"]).read_text())
        assert run["configuration"]["compression"] == point["compression"]
        assert run["configuration"]["dimensions"] == {"compression": ["default", "off"]}
    first, second = index["cells"]["websockets × websockets"]
    assert first["ratio_to_first_point"]["value"] == 1.0
    assert second["ratio_to_first_point"]["n"] == 2 and second["ratio_to_first_point"]["kind"] == "range"
    assert "Paired by round against the first point (compression default)" in \
        next(tmp_path.glob("*-sweep.md")).read_text()


@pytest.mark.parametrize("started_from", ["the checkout", "another folder"])
def test_kill_9_of_the_orchestrator_leaves_no_process_behind(tmp_path, started_from):
    """SIGKILL reaches no handler, and every server and client runs in a process group of its own; the guardian, told
    each process group as it starts, ends them when the orchestrator's pipe closes. Sanic has worker processes:
    the whole tree of the server being measured goes, and the clients with it. Started from another folder
    (python /path/to/run_bench.py), the guardian still finds the suite's package."""
    folder = ROOT if started_from == "the checkout" else tmp_path
    with open(tmp_path / "run_bench.stderr", "w") as stderr:
        process = subprocess.Popen([sys.executable, str(ROOT / "run_bench.py"), "--servers", "sanic", "--clients",
                                    "websockets,node-ws", "--repeat", "6", "--duration", "1", "--warmup", "0.2",
                                    "--fresh-server", "--results-dir", str(tmp_path / "results")], cwd=folder,
                                   stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + 120
        started = []
        while time.monotonic() < deadline:  # a server with its workers and a client, all measuring
            # a child that just exited (a room probe, a client between attempts) has no command line any more
            tree = [(p, command_line(p)) for p in psutil.Process(process.pid).children(recursive=True)]
            measuring = [(p, line) for p, line in tree if line is not None and "pingpong.harness.system.guardian" not in line]
            started = [p for p, _ in measuring]
            names = " ".join(line for _, line in measuring)
            if "servers.sanic_server" in names and "client" in names and len(started) >= 3:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("no server and client running within 120 s")
        pids = [p.pid for p in started]
    finally:
        process.kill()
        process.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(psutil.pid_exists(pid) and psutil.Process(pid).status()
                                              != psutil.STATUS_ZOMBIE for pid in pids):
        time.sleep(0.05)
    assert_gone(pids)
    assert "No module named" not in (tmp_path / "run_bench.stderr").read_text()
