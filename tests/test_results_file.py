"""The results file: versioned on disk, typed in memory, and the summaries saved in it are the records' JSON."""

import json
from dataclasses import asdict, replace

import pytest

from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.results.records import FORMAT_VERSION, RoundsOutcome, RunResult, load
from pingpong.harness.results.stored import read_json
from tests.conftest import ROOT
from tests.test_golden import REFERENCE

# Format version 2: the rounds' outcome inside configuration["rounds"], a --cluster run's topology in its environment
VERSION_2 = ROOT / "results" / "reference" / "2026-11-22-cluster-matrix.json.xz"


INTERVAL_KEYS = {1: ("ci_low", "ci_high"),
                 2: ("interval_low", "interval_high", "interval_coverage", "interval_kind", "precision",
                     "interval_ranks")}


CPU_KEYS = ("server_cpu_us_per_roundtrip", "client_cpu_us_per_roundtrip")


def without_interval(summary: dict, version: int) -> dict:
    """A saved summary less its rate's interval keys, which format version 2 renamed and extended, and less the CPU
    per roundtrip, which now divides by the roundtrips of the sampled window itself (checked apart)."""
    rates = {k: v for k, v in summary.get("roundtrips_per_s", {}).items() if k not in INTERVAL_KEYS[version]}
    summary = {k: v for k, v in summary.items() if k not in CPU_KEYS}
    return {**summary, "roundtrips_per_s": rates} if "roundtrips_per_s" in summary else summary


def test_saved_summaries_are_the_records_json_mapping():
    """Each cell summary the reference file holds is what its attempts summarize to, key for key. The file has
    format version 1, whose rate interval was a bootstrap ci_low/ci_high: today's interval keys stand in their
    place, and every other figure is unchanged."""
    saved = read_json(REFERENCE)
    assert saved["format_version"] == 1
    summaries = summarize_run(load(REFERENCE))
    for cell in saved["cells"]:
        today = summaries[(cell["server"], cell["client"])].to_json()
        assert without_interval(today, 2) == without_interval(cell["summary"], 1)
        for key in CPU_KEYS:  # the sampled window is within a few ms of the driver's: the figures agree within 1%
            if cell["summary"].get(key) is not None:
                assert abs(today[key] / cell["summary"][key] - 1) < 0.01
        assert list(today) == list(cell["summary"])
        if "roundtrips_per_s" in today:
            old_keys = [k for k in cell["summary"]["roundtrips_per_s"] if k not in INTERVAL_KEYS[1]]
            assert list(today["roundtrips_per_s"]) == old_keys[:old_keys.index("cv") + 1] + list(INTERVAL_KEYS[2])


def test_a_saved_run_carries_todays_summaries():
    """Saved again, a version-1 run is written as the current version with today's summaries, intervals named."""
    run = load(REFERENCE)
    data = json.loads(json.dumps(run.to_dict(summarize_run(run))))
    assert data["format_version"] == FORMAT_VERSION == 4
    rates = data["cells"][0]["summary"]["roundtrips_per_s"]
    assert rates["interval_kind"] == "range" and rates["interval_coverage"] == 0.75  # 3 repeats
    assert rates["interval_low"] == rates["minimum"] and rates["interval_high"] == rates["maximum"]


def test_a_run_round_trips_through_its_json():
    """to_dict then from_dict gives back the same run."""
    run = load(REFERENCE)
    assert RunResult.from_dict(json.loads(json.dumps(run.to_dict()))) == run


def test_saving_again_converts_only_what_changed_and_says_what_asdict_would():
    """to_dict keeps each attempt's conversion for the next save, yet an attempt replaced since (its server's exit
    code filled in) is saved as it is now, and the whole equals the dataclasses' own conversion."""
    run = load(REFERENCE)
    first = run.to_dict()
    cell = run.cells[0]
    cell.attempts[0] = replace(cell.attempts[0], server_exit_code=-9)
    again = run.to_dict()
    assert again["cells"][0]["attempts"][0]["server_exit_code"] == -9
    assert again["cells"][0]["attempts"][1] is first["cells"][0]["attempts"][1]  # unchanged: not converted again
    expected = asdict(run)
    for cell_data, cell in zip(expected["cells"], run.cells):
        cell_data["status"] = cell.status
    assert json.dumps(again) == json.dumps(expected)


def test_a_file_from_a_newer_suite_is_refused_in_one_line():
    """An unknown future format version is an error naming both versions, not a misreading."""
    data = read_json(REFERENCE)
    data["format_version"] = FORMAT_VERSION + 1
    with pytest.raises(ValueError) as raised:
        RunResult.from_dict(data)
    message = str(raised.value)
    assert "\n" not in message and f"version {FORMAT_VERSION + 1} is newer" in message


def test_a_version_2_file_reads_what_its_run_learned_into_the_records_own_fields():
    """A file of the previous format kept stopped_by, measuring_s and server_start_s in configuration["rounds"] and
    the cluster's topology in its environment: loaded, they are the run's rounds_outcome and topology, its settings
    are only settings, and saved again it is of the current format with them at the top level."""
    saved = read_json(VERSION_2)
    assert saved["format_version"] == 2 and saved["configuration"]["rounds"]["stopped_by"] == "rounds"
    run = load(VERSION_2)
    assert run.rounds_outcome == RoundsOutcome(stopped_by="rounds", measuring_s=saved["configuration"]["rounds"][
        "measuring_s"], server_start_s=saved["configuration"]["rounds"]["server_start_s"])
    assert run.topology == saved["environment"]["cluster"] and "cluster" not in run.environment
    assert run.configuration["rounds"] == {key: value for key, value in saved["configuration"]["rounds"].items()
                                           if key not in ("stopped_by", "measuring_s", "server_start_s")}
    again = json.loads(json.dumps(run.to_dict()))
    assert again["format_version"] == FORMAT_VERSION
    assert again["rounds_outcome"]["stopped_by"] == "rounds" and again["topology"] == saved["environment"]["cluster"]
    assert "stopped_by" not in again["configuration"]["rounds"] and "cluster" not in again["environment"]
    assert RunResult.from_dict(again) == run
    assert read_json(VERSION_2) == saved  # loading left the file's own data as it was


def test_a_version_1_file_has_no_outcome_and_no_topology():
    """Before rounds were recorded, a file says nothing of how they ended: both fields are None."""
    run = load(REFERENCE)
    assert run.rounds_outcome is None and run.topology is None


def test_a_measurement_switch_in_the_orchestrators_environment_is_recorded_with_the_run(monkeypatch):
    """The servers inherit the orchestrator's environment, so a switch set there changes what is measured: each
    run's environment names the switches that were set, and only those."""
    from pingpong.contract import CPP_LEAVE_SINGLE_THREADED_ENV
    from pingpong.harness.settings.environment import describe_environment

    monkeypatch.delenv(CPP_LEAVE_SINGLE_THREADED_ENV, raising=False)
    assert describe_environment(ROOT)["measurement_switches"] == {}
    monkeypatch.setenv(CPP_LEAVE_SINGLE_THREADED_ENV, "1")
    assert describe_environment(ROOT)["measurement_switches"] == {CPP_LEAVE_SINGLE_THREADED_ENV: "1"}
