"""The documentation stays readable and true: no line wider than 120 characters, the README short, links alive."""

import re

from tests.conftest import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "results" / "reference" / "README.md"]


def test_no_line_of_the_documentation_is_wider_than_120_characters():
    wide = [f"{path.relative_to(ROOT)}:{number} ({len(line)})" for path in DOCUMENTS
            for number, line in enumerate(path.read_text().splitlines(), 1) if len(line) > 120]
    assert not wide, wide


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert "pip install -r requirements.txt && npm ci && python run_bench.py" in text
    assert "python -m pytest" in text and "python -m pytest" in (ROOT / ".ci" / "run").read_text()


def test_every_relative_link_leads_to_a_file():
    broken = []
    for path in DOCUMENTS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if not target.startswith(("http://", "https://")) and not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} → {target}")
    assert not broken, broken
