"""diagnose --profile with real processes: py-spy on the Python sides, V8's profiler on the Node.js ones; a function
that burns a known CPU time per message tops its side's profile at about that time per roundtrip; the page draws
the flame graphs in a browser; Ctrl-C leaves no profiler or pair behind; a side no profiler attaches to says why."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pingpong.harness.commands import diagnose_profiles
from pingpong.harness.results.records import Attempt
from pingpong.harness.system import profilers
from tests.conftest import QUICK_RELAY_CHECK, ROOT
from tests.interactive import sigint_at_default
from tests.test_html_report import BROWSER, Elements, chromium, needs_browser

def py_spy_cannot_attach() -> str | None:
    """Why py-spy cannot sample a process here (not installed, or ptrace refused), or None when it can."""
    if profilers.py_spy_path() is None:
        return "py-spy is not installed (pip install -r requirements.txt)"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                               stdout=subprocess.PIPE, text=True)
    try:
        sleeper.stdout.readline()  # its interpreter is up
        dumped = subprocess.run([profilers.py_spy_path(), "dump", "--pid", str(sleeper.pid)], capture_output=True,
                                text=True, timeout=30)
    finally:
        sleeper.kill()
        sleeper.wait()
        sleeper.stdout.close()
    return None if dumped.returncode == 0 else f"py-spy cannot attach here: {dumped.stderr.strip()[-200:]}"


CANNOT_ATTACH = py_spy_cannot_attach()
needs_py_spy = pytest.mark.skipif(CANNOT_ATTACH is not None, reason=CANNOT_ATTACH or "")
BURNING = "spend_service_time (tests/implementations/slow_server.py)"  # 2 ms of CPU per message it relays
KNOWN_US_PER_ROUNDTRIP = 2 * 2000  # two messages a roundtrip
# A short window for the measured attempts (diagnose's default is 5 s after 1 s of warmup): these tests read the
# profiles, whose own attempts keep a window of at least PROFILE_WINDOW_S (2 s) whatever --duration says
SHORT_WINDOW = ["--duration", "0.5", "--warmup", "0.2", *QUICK_RELAY_CHECK]
DIAGNOSE = [sys.executable, "run_bench.py", "diagnose", "slow-relay", "websockets", "--manifest", "manifest.toml",
            "--manifest", "tests/manifest.toml", "--profile", "--against", "websockets", "node-ws", "--repeat", "1",
            "--no-strace", "--switches", "nodelay-forced", *SHORT_WINDOW]


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """One diagnosis with profiles: the slow relay × websockets against websockets × node-ws, one round."""
    results = tmp_path_factory.mktemp("profiled")
    completed = subprocess.run([*DIAGNOSE, "--profile-rounds", "1", "--results-dir", str(results), "--format", "json"],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout), results


@needs_py_spy
def test_a_function_burning_known_cpu_tops_its_sides_profile_at_that_cost(profiled):
    report, _ = profiled
    server = report["profiles"]["sides"]["server"]["cell"]
    top = server["top_self"][0]
    assert top["function"] == BURNING, server["top_self"][:3]
    # The busy wait ends by the wall clock, and py-spy samples a thread that is not waiting, running or not: a wait
    # preempted near its end overshoots and is sampled meanwhile, so contention can only raise the figure (3,728-3,932
    # alone, 5,427-5,806 beside two busy loops, 12,087 once in a run three at a time; 2026-11-28). It can never pass
    # a roundtrip's wall time under the profilers, which grows with the same overshoots: the bound below
    wall_us_per_roundtrip = 1e6 / report["profiles"]["roundtrips_per_s"]["cell"]
    assert 0.7 * KNOWN_US_PER_ROUNDTRIP <= top["self_us_per_roundtrip"] <= wall_us_per_roundtrip, \
        (top, wall_us_per_roundtrip)
    assert server["profiler"].startswith("py-spy ") and server["measured_cpu_us_per_roundtrip"] > 0
    differences = report["profiles"]["sides"]["server"]["differences"]
    assert differences[0]["function"] == BURNING and differences[0]["self_difference_us"] > 2000
    assert any(BURNING in sentence for sentence in report["verdict"])


@needs_py_spy
def test_a_node_side_is_profiled_by_v8_and_both_sides_are_saved(profiled):
    """The healthy pair's client is Node.js ws: V8's profiler, over its inspector, sampled its window; each pair's
    side is saved as speedscope JSON and folded stacks."""
    report, results = profiled
    client = report["profiles"]["sides"]["client"]
    assert client["healthy"]["profiler"] == "v8 cpu profiler (inspector)"
    assert client["healthy"]["sampled_cpu_us_per_roundtrip"] > 0 and client["healthy"]["top_self"]
    assert client["cell"]["profiler"].startswith("py-spy ")
    saved = [Path(name) for name in report["profiles"]["files"]]
    assert len(saved) == 8 and all(path.exists() and path.stat().st_size for path in saved)
    speedscope = json.loads(next(p for p in saved if p.name == "cell-server.speedscope.json").read_text())
    frames = speedscope["shared"]["frames"]
    assert any(frame["name"] == BURNING for frame in frames)
    assert all(0 <= index < len(frames) for stack in speedscope["profiles"][0]["samples"] for index in stack)


@needs_py_spy
@needs_browser
def test_the_diagnosis_page_draws_a_flame_graph_per_side_in_a_browser(profiled, tmp_path):
    _, results = profiled
    page = next(results.glob("diagnose-*.html"))
    elements = Elements(page.read_text())
    assert not [attrs for _, attrs in elements.tags if "src" in attrs or "href" in attrs]  # nothing from the network
    completed = chromium(f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri())
    assert completed.returncode == 0, completed.stderr[-2000:]
    dom = completed.stdout
    assert dom.count("<svg") == 4  # server and client, of the cell and of the healthy pair
    assert len(re.findall(r"<rect ", dom)) > 40
    assert re.search(r"<title>spend_service_time \(tests/implementations/slow_server.py\)\n[\d,.]+ µs per roundtrip",
                     dom)
    assert BROWSER


def processes_naming(marker: str) -> list[int]:
    """The PIDs of live processes whose command line holds marker (this test's own folder): never anyone else's."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in command and int(entry) != os.getpid():
                found.append(int(entry))
    return found


@needs_py_spy
def test_ctrl_c_while_profiling_leaves_no_process_behind(tmp_path):
    """SIGINT once the profilers are attached: diagnose ends, and neither py-spy nor the pair runs on."""
    process = subprocess.Popen([*DIAGNOSE, "--profile-rounds", "3", "--results-dir", str(tmp_path)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                               preexec_fn=sigint_at_default)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("*-profiles/*/server*.log")) or not processes_naming(str(tmp_path)):
            assert process.poll() is None and time.monotonic() < deadline, "the profilers never started"
            time.sleep(0.05)
        assert processes_naming(str(tmp_path))  # py-spy, whose output is in this folder, runs
        os.kill(process.pid, signal.SIGINT)
        process.wait(60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode != 0
    deadline = time.monotonic() + 10
    while processes_naming(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_naming(str(tmp_path)) == []


def test_a_side_no_profiler_attaches_to_says_why_in_one_line(tmp_path):
    """The compiled programs get a one-line reason in place of a profile; the other side is still read."""
    reason = profilers.missing_profiler("native")
    assert reason and "\n" not in reason
    assert profilers.missing_profiler("bun") is None and profilers.missing_profiler("node") is None
    capture = profilers.start_profiler("server", "native", 1, tmp_path / "server", set())
    assert isinstance(capture, profilers.Capture) and capture.error == reason
    attempt = Attempt(repeat=1, status="ok", reason=None, started_at="t", roundtrips=100, roundtrips_per_s=1000.0,
                      profiles={"server": capture.to_dict()})
    assert diagnose_profiles.side_profile(attempt, "server") == reason
    comparison = diagnose_profiles.compare_sides({"cell": [attempt], "healthy": [attempt]},
                                                 {"cell": "go × x", "healthy": "go × y"}, tmp_path)
    assert comparison["sides"]["server"] == {"note": reason}
    assert comparison["sides"]["client"] == {"note": "no profile was taken"}


def test_a_bun_side_runs_its_own_profiler_kept_to_the_window(tmp_path):
    """Nothing attaches to a running Bun: a profiled Bun side starts with bun --cpu-prof, and only the samples
    inside the window are kept."""
    completed = subprocess.run(
        [sys.executable, "run_bench.py", "diagnose", "bun", "bun", "--profile", "--against", "bun", "node-ws",
         "--repeat", "1", "--profile-rounds", "1", "--no-strace", "--switches", "nodelay-forced", *SHORT_WINDOW,
         "--results-dir", str(tmp_path), "--format", "json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    sides = json.loads(completed.stdout)["profiles"]["sides"]
    for side in ("server", "client"):
        cell = sides[side]["cell"]
        assert cell["profiler"].startswith("bun --cpu-prof"), cell["profiler"]
        assert cell["top_self"] and cell["sampled_cpu_us_per_roundtrip"] > 0
    assert any(row["function"] == "message (bun_server.js)" for row in sides["server"]["cell"]["top_self"])
    assert sides["client"]["healthy"]["profiler"] == "v8 cpu profiler (inspector)"


@needs_py_spy
def test_run_profile_profiles_the_named_cell_beside_its_rows_fastest_client(tmp_path):
    """run --profile: after the rounds, the named cell and its row's fastest other client are profiled; the record,
    the Markdown, the terminal and the HTML page list them, and a page of flame graphs is written beside them."""
    completed = subprocess.run(
        [sys.executable, "run_bench.py", "--manifest", "manifest.toml", "--manifest", "tests/manifest.toml",
         "--servers", "slow-relay", "--clients", "websockets,node-ws", "--repeat", "1", "--duration", "0.3",
         "--warmup", "0.2", "--jit-warmup", "0", "--no-figures", *QUICK_RELAY_CHECK,  # it reads no rate, no PNG
         "--profile", "slow-relay:websockets", "--profile-rounds", "1", "--results-dir",
         str(tmp_path), "--format", "terminal"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    run = json.loads((tmp_path / "latest.json").read_text())
    profiled = run["profiles"]["slow-relay × websockets"]
    assert profiled["pairs"] == {"cell": "slow-relay × websockets", "healthy": "slow-relay × node-ws"}
    assert profiled["sides"]["server"]["cell"]["top_self"][0]["function"] == BURNING
    assert profiled["sides"]["client"]["healthy"]["profiler"] == "v8 cpu profiler (inspector)"
    # the terminal wraps each note where its figures end a line, so it is read with its line breaks as spaces
    screen = " ".join(completed.stdout.split())
    assert "Profile of slow-relay × websockets, server side" in screen
    assert "by total time" in screen
    assert "## Profiles of the cells named by --profile" in (tmp_path / "latest.md").read_text()
    page = tmp_path / profiled["page"]
    assert page.exists() and page.read_text().count("<svg") == 4
    assert f'href="{profiled["page"]}"' in (tmp_path / "latest.html").read_text()


@pytest.mark.parametrize("argv,message", [
    (["--profile", "slow-relay"], "--profile takes SERVER:CLIENT pairs"),
    (["--profile", "slow-relay:bun"], "client bun is not among this run's clients"),
    (["--profile", "slow-relay:websockets", "--profile-rounds", "0"], "--profile-rounds must be at least 1"),
    (["--profile", "slow-relay:websockets", "--payload-size", "4,64"], "not of a run over a list of settings"),
])
def test_run_profile_refuses_what_it_cannot_do_in_one_line(argv, message, tmp_path):
    completed = subprocess.run(
        [sys.executable, "run_bench.py", "--manifest", "manifest.toml", "--manifest", "tests/manifest.toml",
         "--servers", "slow-relay", "--clients", "websockets", "--results-dir", str(tmp_path), *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2 and completed.stderr.strip().count("\n") == 0, completed.stderr
    assert message in completed.stderr
