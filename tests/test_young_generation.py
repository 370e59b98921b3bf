"""V8's young generation in every Node.js process the suite starts (--young-generation, settings/cell.py): held at
1 MiB a semi-space by default, as Node.js has it with `grows`; a list of both is a dimension measured in one run."""

import json
import shutil
import subprocess
import sys

import pytest

from pingpong.harness.measure.attempt_plan import process_environment
from pingpong.harness.report.formatting import young_generation_text
from pingpong.harness.results.records import RunResult, recorded_setting
from pingpong.harness.settings.cell import CellSettings
from tests.conftest import ROOT

NODE = shutil.which("node")
# A heap whose survivors ask the young generation to grow: a ring of 100,000 live objects, replaced 40 times over.
GROWING_HEAP = ("const v8 = require('v8'); let ring = new Array(100000);"
                "for (let i = 0; i < 4000000; i++) ring[i % 100000] = {i, text: 'x' + i};"
                "const young = v8.getHeapSpaceStatistics().find(space => space.space_name === 'new_space');"
                "console.log(JSON.stringify({new_space_bytes: young.space_size, kept: ring.length}));")


def settings(young_generation: str) -> CellSettings:
    return CellSettings(duration_s=0.2, warmup_s=0.1, loop="auto", compression="default", payload_size=4,
                        payload_kind="text-ascii", ready_timeout_s=10, stall_timeout_s=5, pin=False,
                        young_generation=young_generation)


def test_fixed_adds_the_semi_space_option_after_a_users_own_and_grows_adds_nothing(monkeypatch):
    monkeypatch.setenv("NODE_OPTIONS", "--max-old-space-size=512")
    fixed = process_environment(settings("fixed"))
    grows = process_environment(settings("grows"))
    assert fixed["NODE_OPTIONS"] == "--max-old-space-size=512 --max-semi-space-size=1"
    assert grows["NODE_OPTIONS"] == "--max-old-space-size=512"
    monkeypatch.delenv("NODE_OPTIONS")
    assert process_environment(settings("fixed"))["NODE_OPTIONS"] == \
        "--max-semi-space-size=1"
    assert "NODE_OPTIONS" not in process_environment(settings("grows"))


@pytest.mark.skipif(NODE is None, reason="needs Node.js on PATH")
def test_a_node_process_keeps_its_semi_spaces_at_1_mib_when_fixed_and_grows_them_otherwise():
    sizes = {}
    for mode in ("fixed", "grows"):
        completed = subprocess.run([NODE, "-e", GROWING_HEAP], capture_output=True, text=True, timeout=60,
                                   env=process_environment(settings(mode)))
        assert completed.returncode == 0, completed.stderr
        sizes[mode] = json.loads(completed.stdout)["new_space_bytes"]
    # new_space holds both semi-spaces: Node.js 20 starts them at 512 KiB each; fixed lets each reach 1 MiB
    assert sizes["fixed"] <= 2 << 20, sizes
    assert sizes["grows"] >= 8 << 20, sizes


def test_the_settings_line_says_fixed_and_a_file_from_before_reads_as_grows():
    assert "young generation held at 1 MiB" in young_generation_text({"young_generation": "fixed"})
    assert young_generation_text({"young_generation": "grows"}) == young_generation_text({}) == ""
    before = RunResult(started_at="2026-11-28T00:00:00Z", command_line=[], configuration={}, environment={},
                       implementations={}, cells=[])
    assert recorded_setting(before, "young_generation") == "grows"


@pytest.mark.skipif(NODE is None, reason="needs Node.js on PATH")
def test_both_as_a_list_are_two_points_of_one_run_each_recorded_and_said(tmp_path):
    completed = subprocess.run([sys.executable, "run_bench.py", "--servers", "node-ws", "--clients", "node-builtin",
                                "--quick", "--repeat", "2", "--young-generation", "fixed,grows", "--no-figures",
                                "--results-dir", str(tmp_path), "--format", "md"],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    [sweep] = tmp_path.glob("*-sweep.json")
    index = json.loads(sweep.read_text())
    assert [point["young_generation"] for point in index["points"]] == ["fixed", "grows"]
    runs = {mode: json.loads(next(tmp_path.glob(f"*-young-{mode}.json")).read_text()) for mode in ("fixed", "grows")}
    for mode, run in runs.items():
        assert run["configuration"]["young_generation"] == mode
        assert run["configuration"]["dimensions"] == {"young_generation": ["fixed", "grows"]}
        [cell] = run["cells"]
        assert [attempt["status"] for attempt in cell["attempts"]] == ["ok", "ok"]
    assert "young generation fixed" in completed.stdout and "young generation grows" in completed.stdout
