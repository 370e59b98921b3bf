"""The run's cost of a page fault (system/page_faults.py) is measured, not assumed: every trial's pages fault once."""

from pingpong.harness.system import page_faults


def test_every_trial_faults_on_each_of_its_pages_once_and_the_cost_is_positive():
    record = page_faults.fault_cost(trials=3, pages=64, gap_s=0.001)
    assert record["error"] is None
    assert len(record["trials_us"]) == 3 and all(faults >= 64 for faults in record["faults"])
    assert record["us_per_fault"] > 0 and record["pages"] == 64
