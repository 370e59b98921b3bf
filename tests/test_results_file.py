"""The results file: versioned on disk, typed in memory, and the summaries saved in it are the records' JSON."""

import json

from pingpong.harness.results import RunResult, load
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

