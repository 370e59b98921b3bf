"""--python: interpreters found by name (pure parts and this machine's), and real runs on two interpreters at once,
a cell skipped with its reason, and an environment reused from the cache."""

import json
import sys

import pytest

from pingpong.harness.settings import interpreters
from pingpong.harness.settings.package_envs import pins_as_ceilings
from pingpong.harness.settings.usage import UsageError
from tests.test_package_envs import why_old_releases_cannot_be_installed
from tests.test_run_bench import run_bench

RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"
OTHER = "3.9"  # the seed's own: pyenv's on this project's machines


def interpreter_missing(name: str) -> str | None:
    try:
        interpreters.find(name)
    except UsageError as exc:
        return str(exc)
    return None


OTHER_MISSING = interpreter_missing(OTHER) or (why_old_releases_cannot_be_installed() if RUNNING != OTHER else
                                               f"the tests run on {OTHER} itself")
needs_other = pytest.mark.skipif(OTHER_MISSING is not None, reason=f"Python {OTHER} here: {OTHER_MISSING}")
SHORT = ["--repeat", "1", "--duration", "0.3", "--warmup", "0.1", "--no-figures"]


def test_pins_become_ceilings_for_another_interpreter_and_comments_stay():
    text = pins_as_ceilings("# pinned: websockets==17.4\nwebsockets==17.4\nuvicorn[standard]==0.54.0  # x\nsix>=1\n")
    assert text == "# pinned: websockets==17.4\nwebsockets<=17.4\nuvicorn[standard]<=0.54.0  # x\nsix>=1\n"


def test_the_running_interpreter_is_found_by_its_version_and_named_by_what_it_is():
    found = interpreters.find(RUNNING)
    assert found.python_version.startswith(RUNNING + ".") and found.implementation == "CPython"
    assert found.label == f"CPython {found.python_version}" and found.asked == RUNNING


@pytest.mark.parametrize("text, words", [
    ("2.5", "--python 2.5: no such interpreter here (looked in pyenv's versions, PATH"),
    ("no-such-python", "--python no-such-python: no such interpreter here (looked in PATH"),
    ("/nonexistent/python", "--python /nonexistent/python: no interpreter that runs"),
    (f"{RUNNING},{sys.executable}", f"--python: {sys.executable} and {RUNNING} are the same interpreter"),
])
def test_an_interpreter_that_is_not_here_is_a_one_line_usage_error(text, words):
    with pytest.raises(UsageError) as raised:
        interpreters.parse(text)
    assert str(raised.value).startswith(words) and "\n" not in str(raised.value), str(raised.value)


def test_a_bad_python_option_exits_2_in_one_line_before_measuring(tmp_path):
    completed = run_bench("--python", "2.5", "--servers", "websockets", "--clients", "websockets", *SHORT,
                          "--results-dir", str(tmp_path))
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1 and "--python 2.5: no such interpreter" in completed.stderr
    assert not list(tmp_path.glob("*.json"))


def test_list_names_the_interpreters_found_with_the_running_one_first():
    completed = run_bench("list")
    assert completed.returncode == 0, completed.stderr
    listed = completed.stdout.split("Python interpreters found here")[1].splitlines()[1:]
    assert listed and listed[0].split()[0] == RUNNING and sys.version.split()[0] in listed[0]


@needs_other
@pytest.mark.timeout(600)  # a first build of the other interpreter's environment
def test_two_interpreters_in_one_run_each_a_point_whose_processes_run_on_it_and_the_cache_is_reused(tmp_path):
    """--python 3.9,RUNNING: a point per interpreter, paired in the same rounds; every Python process reports the
    interpreter of its point, and the Node.js client does not change. A second run builds nothing."""
    argv = ["--python", f"{OTHER},{RUNNING}", "--servers", "websockets", "--clients", "websockets,node-ws", *SHORT,
            "--format", "json"]
    completed = run_bench(*argv, "--results-dir", str(tmp_path / "first"))
    assert completed.returncode == 0, completed.stderr[-2000:]
    sweep = json.loads(next((tmp_path / "first").glob("*-sweep.json")).read_text())
    assert [point["python"] for point in sweep["points"]] == [OTHER, RUNNING]
    for asked in (OTHER, RUNNING):
        run = json.loads(next((tmp_path / "first").glob(f"*-python-{asked}.json")).read_text())
        assert run["configuration"]["python"] == asked
        environment = run["environment"]["package_environments"]["python_by_interpreter"][asked]
        assert environment["interpreter"]["python_version"].startswith(asked + ".")
        by_client = {cell["client"]: cell for cell in run["cells"]}
        for client, runtime in (("websockets", "cpython"), ("node-ws", "node")):
            attempt = by_client[client]["attempts"][0]
            assert attempt["status"] == "ok" and attempt["roundtrips"] > 0, attempt
            assert attempt["server_info"]["runtime"]["version"].startswith(asked + ".")
            reported = attempt["client_report"]["runtime"]
            assert reported["name"] == runtime
            if runtime == "cpython":
                assert reported["version"].startswith(asked + ".")
        # the versions the processes loaded are the environment's
        server_libraries = by_client["websockets"]["attempts"][0]["server_info"]["libraries"]
        assert server_libraries["websockets"] == environment["versions"]["websockets"]
    again = run_bench(*argv, "--results-dir", str(tmp_path / "second"))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "building a Python environment" not in again.stderr


@needs_other
def test_a_cell_whose_module_is_not_in_an_interpreters_environment_is_skipped_with_its_reason(tmp_path):
    """A server that needs a module the environments leave out (pytest: the harness's alone) is skipped on --python
    3.9 with the reason in one line; the other cell of the run is measured."""
    manifest = tmp_path / "extra.toml"
    manifest.write_text('[[server]]\nname = "needs-pytest"\nruntime = "python"\nprotocol = "websocket"\n'
                        'command = ["{python}", "servers/websockets_server.py"]\n'
                        'requires = ["python-module:websockets", "python-module:pytest"]\nloops = ["auto"]\n'
                        'compression = ["default", "off", "on"]\ndescription = "TEST ONLY"\n')
    completed = run_bench("--manifest", "manifest.toml", "--manifest", str(manifest), "--python", OTHER,
                          "--servers", "needs-pytest,websockets", "--clients", "websockets", *SHORT,
                          "--format", "json", "--results-dir", str(tmp_path))
    assert completed.returncode == 0, completed.stderr[-2000:]
    cells = {cell["server"]: cell for cell in json.loads(completed.stdout)["cells"]}
    assert cells["needs-pytest"]["status"] == "skipped"
    assert cells["needs-pytest"]["skipped"] == (f"server needs-pytest unavailable: Python module 'pytest' is not in "
                                               f"the environment of --python {OTHER}")
    assert cells["websockets"]["status"] == "ok" and cells["websockets"]["skipped"] is None


def test_the_published_table_stands_beside_a_run_with_ratios_to_its_reference_cell():
    """Rates as measured, each cell's ratio to node-ws × node-ws in its own table, and how far the shape moved."""
    from pingpong.harness.analysis.published import SETUPS, beside, render_markdown

    setup = SETUPS["lemire-2023"]
    measured = {("node-ws", "node-ws"): 6000.0, ("aiohttp", "node-ws"): 1200.0, ("sanic", "websockets"): None}
    table = beside(setup, measured)
    rows = {(row["server"], row["client"]): row for row in table["rows"]}
    assert len(rows) == 8 and rows[("node-ws", "node-ws")]["measured_ratio"] == 1.0
    aiohttp = rows[("aiohttp", "node-ws")]
    assert aiohttp["published_ratio"] == round(270 / 19000, 4) and aiohttp["measured_ratio"] == 0.2
    assert aiohttp["shape_moved"] == round(0.2 / (270 / 19000), 3)
    assert rows[("sanic", "websockets")]["measured"] is None and rows[("sanic", "websockets")]["shape_moved"] is None
    markdown = render_markdown(table, "run.json")
    assert "| aiohttp × node-ws | 270 | 1,200 | 0.014 | 0.200 | 14.07× |" in markdown
    assert "| sanic × websockets | 3,700 | – | 0.195 | – | – |" in markdown and "`run.json`" in markdown
