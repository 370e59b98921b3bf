"""Old releases on demand: spec parsing and overriding (pure), and a real run in cached environments."""

import json
import subprocess
import sys

import pytest

from pingpong.harness.settings import interpreters
from pingpong.harness.settings.package_envs import (INSTALLER_ENV, first_error, installer, override_dependencies,
                                                    override_requirements, parse_node_specs, parse_python_specs,
                                                    process_requirements)
from pingpong.harness.settings.usage import UsageError
from tests.test_run_bench import run_bench

REQUIREMENTS = "# pinned\naiohttp==3.14.5\nuvicorn==0.54.0  # server\nwebsockets==17.4\n"


def why_old_releases_cannot_be_installed() -> str | None:
    """None when pip and npm both reach their configured registries (asked of the clients themselves), else why."""
    questions = {"pip": [sys.executable, "-m", "pip", "index", "versions", "aiohttp"],
                 "npm": ["npm", "view", "ws@8.14.2", "version"]}
    for client, argv in questions.items():
        try:
            answer = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{client} could not ask its registry ({type(exc).__name__})"
        if answer.returncode != 0:
            last_line = (answer.stderr.strip().splitlines() or ["no output"])[-1]
            return f"{client} cannot reach its registry: {last_line}"
    return None


def test_requirements_overrides_replace_pins_by_normalized_name_and_append_new_ones():
    text = override_requirements(REQUIREMENTS, ["AIOHTTP==3.9.1", "uvicorn==0.24.0.post1", "trustme==1.2.0"])
    lines = [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]
    assert lines == ["AIOHTTP==3.9.1", "uvicorn==0.24.0.post1", "websockets==17.4", "trustme==1.2.0"]


def test_an_environment_gets_what_its_processes_import_and_not_the_harness_or_the_tests():
    """The frameworks and what they pull in stay; figures, the cluster mode, profilers and pytest go (the processes of
    an environment are servers, clients and workers, which import none of them), and so do comments."""
    text = process_requirements("sanic==25.12.1\nmatplotlib==3.11.2  # figures\nPyYAML==6.0.3\npytest_xdist==3.8.0\n"
                                "# dask==2026.8.0 named in a comment\nDask==2026.8.0\npy-spy==0.4.3\n"
                                "--extra-index-url https://example.invalid/simple\n"
                                "ujson @ https://example.invalid/ujson.whl#sha256=ab12  # a URL's #fragment stays\n")
    # and no comment: one edited leaves the environments as they are
    assert text == ("sanic==25.12.1\nPyYAML==6.0.3\n--extra-index-url https://example.invalid/simple\n"
                    "ujson @ https://example.invalid/ujson.whl#sha256=ab12\n")


def test_node_overrides_keep_other_dependencies_and_leave_runtimes_out():
    chosen = override_dependencies({"bun": "1.4.5", "hdr-histogram-js": "3.0.1", "ws": "8.23.0"}, ["ws@8.14.2"])
    assert chosen == {"hdr-histogram-js": "3.0.1", "ws": "8.14.2"}
    assert override_dependencies({"ws": "8.23.0"}, ["@scope/pkg@1.0.0"]) == {"@scope/pkg": "1.0.0", "ws": "8.23.0"}


@pytest.mark.parametrize("parse, text", [(parse_python_specs, "aiohttp=3.9.1"), (parse_python_specs, ""),
                                         (parse_node_specs, "ws==8.14.2"), (parse_node_specs, "ws")])
def test_malformed_specs_are_usage_errors(parse, text):
    with pytest.raises(UsageError):
        parse(text)


@pytest.mark.timeout(960)  # its run_bench is allowed 900 s (two environments built on first use)
def test_the_seeds_setup_runs_in_one_command_with_2023_releases_on_python_3_9_and_its_table_beside(tmp_path):
    """--setup lemire-2023 (four of its cells here): every Python process on 3.9 with the releases of November 2023,
    the Node.js client on ws 8.14.2, each reporting those versions itself; the published table written beside.
    Sanic 23.6 answers its handshakes (kit/sanic_manager.py once waited there for a flag it never sets)."""
    reason = why_old_releases_cannot_be_installed()
    if reason:
        pytest.skip(f"the 2023 releases cannot be installed here: {reason}")
    try:
        interpreters.find("3.9")
    except UsageError as exc:
        pytest.skip(f"Python 3.9 is not here: {exc}")
    completed = run_bench("--setup", "lemire-2023", "--servers", "aiohttp,sanic", "--clients", "websockets,node-ws",
                          "--duration", "0.5", "--warmup", "0.2", "--repeat", "1", "--no-figures",
                          "--results-dir", str(tmp_path), "--format", "json", timeout=900)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout)
    by_cell = {(cell["server"], cell["client"]): cell["attempts"][0] for cell in result["cells"]}
    for (server, _), attempt in by_cell.items():
        assert attempt["status"] == "ok", attempt["reason"]
        assert attempt["server_info"]["libraries"][server] == {"aiohttp": "3.9.1", "sanic": "23.6.0"}[server]
        assert attempt["server_info"]["runtime"]["version"].startswith("3.9.")
    attempts = {client: attempt for (server, client), attempt in by_cell.items() if server == "aiohttp"}
    assert attempts["node-ws"]["client_report"]["libraries"]["ws"] == "8.14.2"
    assert attempts["websockets"]["client_report"]["libraries"]["websockets"] == "12.0"
    assert attempts["websockets"]["client_report"]["settings"]["websockets_api"] == "legacy"
    environments = result["environment"]["package_environments"]
    assert environments["python_by_interpreter"]["3.9"]["versions"]["aiohttp"] == "3.9.1"
    if "building a Python environment" in completed.stderr:  # built now, not one an earlier run left in the cache
        assert environments["python_by_interpreter"]["3.9"]["installer"] == "uv"  # requirements.txt pins it
    assert environments["node"]["versions"]["ws"] == "8.14.2"
    assert result["configuration"]["python"] == "3.9"
    assert "aiohttp==3.9.1" in result["configuration"]["python_packages"]
    beside = json.loads(next(tmp_path.glob("*-lemire-2023.json")).read_text())
    rows = {(row["server"], row["client"]): row for row in beside["rows"]}
    assert rows[("aiohttp", "node-ws")]["published"] == 270 and rows[("aiohttp", "node-ws")]["measured"] > 0
    assert rows[("node-ws", "node-ws")]["measured"] is None  # not in this run: no ratios, said as "–"
    assert "| aiohttp × node-ws | 270 |" in next(tmp_path.glob("*-lemire-2023.md")).read_text()


def test_an_unbuildable_environment_is_a_one_line_error(tmp_path):
    completed = run_bench("--servers", "aiohttp", "--clients", "node-ws", "--quick", "--node-packages",
                          "ws@0.0.0-does-not-exist", "--results-dir", str(tmp_path), timeout=300)
    assert completed.returncode == 2
    last = completed.stderr.strip().splitlines()[-1]
    assert last.startswith("run_bench.py: error: could not build the package environment: npm install failed")
    assert "No matching version found for ws@0.0.0-does-not-exist" in last, completed.stderr


def test_a_python_environment_that_cannot_resolve_says_why_in_one_line(tmp_path):
    """A pin no release matches: the installer's error and its cause on the run's last line, exit 2, and no
    half-built environment left in the cache."""
    cache = tmp_path / "cache"
    completed = run_bench("--servers", "aiohttp", "--clients", "websockets", "--quick", "--python-packages",
                          "websockets==0.0.1", "--results-dir", str(tmp_path), timeout=300,
                          env={"PINGPONG_CACHE_DIR": str(cache)})
    assert completed.returncode == 2
    last = completed.stderr.strip().splitlines()[-1]
    assert last.startswith("run_bench.py: error: could not build the package environment: uv pip failed: "), last
    assert "websockets==0.0.1" in last and "cause:" in last, last
    assert [path.name for path in cache.iterdir() if path.is_dir()] == []


def test_an_installers_first_error_keeps_uvs_cause_and_pips_error_line():
    uv = "error: No solution found when resolving dependencies\n  cause: Because websockets==0.0.1 was not found\n"
    assert first_error(uv) == ("error: No solution found when resolving dependencies "
                               "(cause: Because websockets==0.0.1 was not found)")
    pip = ("Collecting x\nERROR: Could not find a version that satisfies the requirement x==9\n"
           "ERROR: No matching distribution found for x==9\n")
    assert first_error(pip) == "ERROR: Could not find a version that satisfies the requirement x==9"
    assert first_error("") == "(no output)"


def test_pip_builds_the_environments_when_asked_or_without_uv(monkeypatch):
    monkeypatch.delenv(INSTALLER_ENV, raising=False)
    assert installer() == "uv"  # requirements.txt pins it, so the set-up installed it
    monkeypatch.setenv(INSTALLER_ENV, "pip")
    assert installer() == "pip"
    monkeypatch.delenv(INSTALLER_ENV)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert installer() == "pip"
