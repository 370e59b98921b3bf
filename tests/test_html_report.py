"""The HTML report: one self-contained page, checked as pure text and as a real browser shows it.

The browser tests load the page from a file:// URL in headless Chromium (Debian's chromium package; .ci/run
installs it) and check the DOM after the page's script ran and that the screenshot is not blank.
"""

import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.report import workers as workers_report
from pingpong.harness.report.html import render_html
from pingpong.harness.report.markdown import render_markdown
from pingpong.harness.results.records import Attempt, Cell, RunResult, load
from tests.conftest import ROOT
from tests.test_render import CONFIG, ok, sample_run, workers_run

REFERENCE = ROOT / "results" / "reference" / "2026-11-21-default-matrix.json.xz"
BROWSER = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(name)), None)
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no headless Chromium here (apt-get install chromium; "
                                                           ".ci/run installs it)")


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text, of a page."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_the_page_needs_nothing_from_the_network():
    """No element loads anything: no src, no stylesheet link, no link to another site; CSS and script inline."""
    page = render_html(load(REFERENCE), summarize_run(load(REFERENCE)))
    elements = Elements(page)
    assert not [attrs for _, attrs in elements.tags if "src" in attrs]
    assert not [tag for tag, _ in elements.tags if tag == "link"]
    assert all(attrs["href"].startswith("#") for tag, attrs in elements.tags if tag == "a")
    assert "url(" not in page and "@import" not in page


def test_every_flagged_cell_links_to_its_details_and_back():
    run = load(REFERENCE)
    summaries = summarize_run(run)
    ids = {attrs["id"] for _, attrs in Elements(render_html(run, summaries)).tags if "id" in attrs}
    flagged = [key for key, summary in summaries.items() if summary.flags]
    assert flagged
    for server, client in flagged:
        assert f"flagged-{server}--{client}" in ids and f"cell-{server}--{client}" in ids


def test_text_from_the_results_is_escaped():
    """A name or a reason carrying markup shows as text: no element comes from the results."""
    run = RunResult(started_at="t", command_line=["<script>alert(1)</script>"], configuration=CONFIG,
                    environment={"cpu_model": "<img src=x>"}, implementations={},
                    cells=[Cell("<b>s</b>", "c&c", attempts=[ok(1, 1000)]),
                           Cell("x", "y\"'", attempts=[Attempt(repeat=1, status="error", reason="<i>boom</i>",
                                                                started_at="t")])])
    page = render_html(run, summarize_run(run))
    tags = {tag for tag, _ in Elements(page).tags}
    assert "b" not in tags and "img" not in tags and "i" not in tags
    assert page.count("<script>") == 1 and "&lt;b&gt;s&lt;/b&gt;" in page and "&lt;i&gt;boom&lt;/i&gt;" in page


class TableRows(HTMLParser):
    """The text of each cell, row by row, of the table with this id."""

    def __init__(self, page: str, table_id: str) -> None:
        super().__init__()
        self.table_id, self.inside, self.in_cell, self.rows = table_id, False, False, []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.inside = dict(attrs).get("id") == self.table_id
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("th", "td"):
            self.rows[-1].append("")
            self.in_cell = True

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif tag in ("th", "td"):
            self.in_cell = False

    def handle_data(self, data):
        if self.inside and self.in_cell:
            self.rows[-1][-1] += data


def test_the_workers_table_shows_the_texts_of_the_markdown():
    """A run on 2 workers has a Workers table whose heading is report/workers.py's columns and whose row is the
    Markdown's, cell for cell (its pairs, attempts with both kinds, the hop's ratio with its bracket), under the same
    explanation; the cell of one process has no row, and a run without workers no section."""
    run = workers_run()
    summaries = summarize_run(run)
    page = render_html(run, summaries)
    header, *rows = TableRows(page, "workers").rows
    assert header == ["server", "client", *workers_report.COLUMNS]
    section = render_markdown(run, summaries).split("\n## Workers\n")[1].split("\n## ")[0]
    markdown_rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| cluster |")]
    assert rows == [[text.strip() for text in row] for row in markdown_rows]
    assert rows[0][:2] == ["cluster", "c"]
    assert {"8 / 5 (+1 unknown)", "3 of 4", "0.80× [0.50–0.90, 75%]"} <= set(rows[0])
    assert workers_report.EXPLANATION in "".join(Elements(page).text)
    plain = render_html(sample_run(), summarize_run(sample_run()))
    assert "<h2>Workers</h2>" not in plain and TableRows(plain, "workers").rows == []


def chromium(*args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([BROWSER, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                           "--disable-dev-shm-usage", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def reference_page(tmp_path_factory):
    folder = tmp_path_factory.mktemp("html")
    page = folder / "reference.html"
    run = load(REFERENCE)
    page.write_text(render_html(run, summarize_run(run)))
    return page


@needs_browser
def test_in_a_browser_the_table_is_sorted_by_rate_and_details_open(reference_page, tmp_path):
    """After the script ran: the table is sorted fastest first (the file lists cells in run order), the heading
    shows the sort, and the cell named in the URL's fragment has its details open."""
    url = reference_page.as_uri() + "#cell-bun--bun"
    completed = chromium(f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=2000", "--dump-dom", url)
    assert completed.returncode == 0, completed.stderr[-2000:]
    dom = completed.stdout
    assert 'data-script="ran"' in dom
    assert 'data-sorted-by="median/s"' in dom and 'aria-sort="descending"' in dom
    rows = re.findall(r'<tr data-details="([^"]+)"[^>]*>', dom)
    assert rows[:2] == ["cell-raw-tcp-c--raw-tcp-c", "cell-bun--bun"]  # the C floor, then the fastest WebSocket pair
    assert re.search(r'<section class="details open" id="cell-bun--bun">', dom)
    assert re.search(r'<tr data-details="cell-bun--bun" class="selected">', dom)


@needs_browser
def test_in_a_browser_the_page_is_not_blank(reference_page, tmp_path):
    from PIL import Image

    screenshot = tmp_path / "page.png"
    completed = chromium(f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={screenshot}",
                         "--window-size=1280,900", reference_page.as_uri())
    assert completed.returncode == 0 and screenshot.exists(), completed.stderr[-2000:]
    image = Image.open(screenshot).convert("RGB")
    assert image.size == (1280, 900)
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, the heat map's colours, table rules
    heat_map_purple = sum(count for count, (r, g, b) in colours if r < 90 and g < 40 and b > 60)
    assert heat_map_purple > 500  # viridis' dark end painted the slowest cells


@needs_browser
def test_at_1280_pixels_the_default_matrix_and_the_page_fit_the_window(tmp_path):
    """A 1280-px window shows the whole default matrix's heat map, raw-TCP columns included, without scrolling
    sideways, and no table makes the page itself wider than the window (wide ones scroll inside their box)."""
    run = load(ROOT / "results" / "reference" / "2026-11-22-default-matrix-waits.json.xz")
    measure = ("<script>var box = document.querySelector('#heatmap').parentNode;"
               "document.body.setAttribute('data-page-width', document.documentElement.scrollWidth);"
               "document.body.setAttribute('data-heatmap', box.clientWidth + '/' + box.scrollWidth);</script>")
    page = tmp_path / "page.html"
    page.write_text(render_html(run, summarize_run(run)).replace("</body>", measure + "</body>"))
    completed = chromium(f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,900",
                         "--virtual-time-budget=2000", "--dump-dom", page.as_uri())
    assert completed.returncode == 0, completed.stderr[-2000:]
    page_width = int(re.search(r'data-page-width="(\d+)"', completed.stdout).group(1))
    visible, whole = map(int, re.search(r'data-heatmap="(\d+)/(\d+)"', completed.stdout).groups())
    assert page_width <= 1280 and visible == whole, (page_width, visible, whole)
    assert ">raw-tcp-bun<" in completed.stdout
