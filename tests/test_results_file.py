"""The results file: versioned on disk, typed in memory, and the summaries saved in it are the records' JSON."""

import json

import pytest

from pingpong.harness.results import FORMAT_VERSION, RunResult, load
from pingpong.harness.summary import summarize_run
from tests.test_golden import REFERENCE


def test_saved_summaries_are_the_records_json_mapping():
    """Each cell summary the reference file holds is exactly what its attempts summarize to, key for key."""
    saved = json.loads(REFERENCE.read_text())
    summaries = summarize_run(load(REFERENCE))
    for cell in saved["cells"]:
        assert summaries[(cell["server"], cell["client"])].to_json() == cell["summary"]
        assert list(summaries[(cell["server"], cell["client"])].to_json()) == list(cell["summary"])


def test_a_run_round_trips_through_its_json():
    """to_dict then from_dict gives back the same run."""
    run = load(REFERENCE)
    assert RunResult.from_dict(json.loads(json.dumps(run.to_dict()))) == run


def test_a_file_from_a_newer_suite_is_refused_in_one_line():
    """An unknown future format version is an error naming both versions, not a misreading."""
    data = json.loads(REFERENCE.read_text())
    data["format_version"] = FORMAT_VERSION + 1
    with pytest.raises(ValueError) as raised:
        RunResult.from_dict(data)
    message = str(raised.value)
    assert "\n" not in message and f"version {FORMAT_VERSION + 1} is newer" in message
