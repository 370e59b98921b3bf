"""Snapshot tests of the exporters: a results file renders to exactly the committed Markdown and CSV.

A deliberate change of a renderer regenerates the snapshots (see make_snapshots below) and shows in the diff.
"""

from pathlib import Path

from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.report.csv_rows import render_csv
from pingpong.harness.report.markdown import render_markdown
from pingpong.harness.results.records import load
from pingpong.harness.results.stored import sibling
from tests.conftest import ROOT
from tests.test_render import sample_run

REFERENCE = ROOT / "results" / "reference" / "2026-11-21-default-matrix.json.xz"
GOLDEN = ROOT / "tests" / "golden"


def rendered(run) -> dict[str, str]:
    summaries = summarize_run(run)
    return {"md": render_markdown(run, summaries), "csv": render_csv(run, summaries)}


def test_the_reference_run_re_renders_to_its_committed_markdown():
    """results/reference/'s JSON, written before the restructure, loads and renders to its .md byte for byte."""
    assert rendered(load(REFERENCE))["md"] == sibling(REFERENCE, ".md").read_text()


def test_the_reference_run_renders_to_its_csv_snapshot():
    """The CSV export of the reference run is exactly tests/golden/2026-11-21-default-matrix.csv."""
    assert rendered(load(REFERENCE))["csv"] == (GOLDEN / "2026-11-21-default-matrix.csv").read_text()


def test_the_sample_run_renders_to_its_snapshots():
    """test_render's sample run (steady, noisy, failed, partial and skipped cells) renders to its snapshots."""
    outputs = rendered(sample_run())
    assert outputs["md"] == (GOLDEN / "sample-run.md").read_text()
    assert outputs["csv"] == (GOLDEN / "sample-run.csv").read_text()


def make_snapshots(folder: Path = GOLDEN) -> None:
    """Rewrite the snapshots from the current renderers: python -c 'import tests.test_golden as g; g.make_snapshots()'."""
    (folder / "2026-11-21-default-matrix.csv").write_text(rendered(load(REFERENCE))["csv"])
    outputs = rendered(sample_run())
    (folder / "sample-run.md").write_text(outputs["md"])
    (folder / "sample-run.csv").write_text(outputs["csv"])
