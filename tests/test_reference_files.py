"""results/reference/ stays small enough to clone and every file in it still opens: its JSON is stored compressed
(X.json.xz, read by pingpong/harness/results/stored.py), the folder is held to a budget, and each results file reads
with the suite's own loader, from Python and from the command line."""

import gzip
import lzma
import os
import subprocess
import sys

import pytest

from benchmarks.gate_power import DEFAULT_RUNS
from benchmarks.noise_structure import previous_cells
from pingpong.harness.commands import report as report_command
from pingpong.harness.commands.diagnose import load_reference
from pingpong.harness.results.files import resume
from pingpong.harness.results.records import SUITE, RunResult, load
from pingpong.harness.results.stored import json_stem, read_json, read_json_text, sibling, stored_path
from pingpong.harness.settings.usage import UsageError
from tests.conftest import ROOT

REFERENCE = ROOT / "results" / "reference"
BUDGET_BYTES = 40_000_000  # the whole folder, every file under it counted: issue 52's 40 MB, in decimal megabytes
PLAIN_JSON_LIMIT_BYTES = 200 * 1024  # a plain .json bigger than this is committed as .json.xz
REFERENCE_RUN = REFERENCE / "2026-11-21-default-matrix.json.xz"  # docs/diagnosing.md's reference run
# Sweeps whose index names its points by the stamped names they were measured under: the points were not committed
# (2026-11-21) or were committed renamed (2026-11-24: 2026-11-24-native-deflate-compression-{default,on}.json.xz).
SWEEPS_WITHOUT_THEIR_POINTS_NAMES = {"2026-11-21-pairs-sweep.json.xz", "2026-11-21-payload-sweep.json.xz",
                                     "2026-11-24-native-deflate-sweep.json.xz"}


def reference_files() -> list:
    return sorted(path for path in REFERENCE.rglob("*") if path.is_file())


def stored_json_files() -> list:
    """Every JSON file under results/reference/, plain or compressed."""
    return [path for path in reference_files() if path.name.endswith((".json", ".json.xz", ".json.gz"))]


def test_the_reference_folder_keeps_within_its_budget():
    """The sum of the sizes of every file under results/reference/ is at most 40 MB (40,000,000 bytes)."""
    sizes = {path: path.stat().st_size for path in reference_files()}
    total = sum(sizes.values())
    biggest = sorted(sizes, key=sizes.get, reverse=True)[:8]
    assert total <= BUDGET_BYTES, (
        f"results/reference/ holds {total / 1e6:.1f} MB, over its {BUDGET_BYTES / 1e6:.0f} MB budget; the "
        f"biggest: " + ", ".join(f"{path.relative_to(REFERENCE)} ({sizes[path] / 1e6:.2f} MB)" for path in biggest))


def test_no_big_plain_json_is_committed():
    """A study's raw JSON goes in as X.json.xz (xz -9e): no plain .json over 200 KiB under results/reference/."""
    big = [f"{path.relative_to(REFERENCE)} ({path.stat().st_size / 1024:.0f} KiB)" for path in reference_files()
           if path.suffix == ".json" and path.stat().st_size > PLAIN_JSON_LIMIT_BYTES]
    assert not big, f"compress these with xz -9e (they read as X.json.xz): {', '.join(big)}"


def test_every_json_file_reads_and_every_run_loads():
    """Each JSON file parses; each results file of a run loads as a RunResult; each sweep index's points are there
    (named X.json in the index, read from X.json.xz beside it), but for the three older sweeps that never had them."""
    runs, problems = 0, []
    for path in stored_json_files():
        name = str(path.relative_to(REFERENCE))
        try:
            data = read_json(path)
            if isinstance(data, dict) and data.get("suite") == SUITE:
                RunResult.from_dict(data)
                runs += 1
            elif isinstance(data, dict) and data.get("kind") == "sweep" and \
                    path.name not in SWEEPS_WITHOUT_THEIR_POINTS_NAMES:
                problems += [f"{name}: its point {point['results']} is missing" for point in data["points"]
                             if not stored_path(path.parent / point["results"]).is_file()]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"{name}: {type(exc).__name__}: {exc}")
    assert not problems, "\n".join(problems)
    assert runs >= 100  # 145 runs on 2026-11-27: the classification above still finds them


def test_the_reference_json_is_stored_compressed_beside_its_reports():
    """Each top-level X.json.xz has no plain X.json beside it, and its name gives its report's: X.md."""
    compressed = sorted(REFERENCE.glob("*.json.xz"))
    assert compressed and not [path for path in compressed if path.with_name(json_stem(path) + ".json").exists()]
    assert sibling(REFERENCE_RUN, ".md").is_file()


def test_the_report_command_shows_a_compressed_run():
    """`run_bench.py report X.json.xz` prints the matrix, naming the file it read."""
    completed = subprocess.run([sys.executable, "run_bench.py", "report", str(REFERENCE_RUN.relative_to(ROOT))],
                               cwd=ROOT, capture_output=True, text=True, timeout=120,
                               env={**os.environ, "COLUMNS": "120"})
    assert completed.returncode == 0, completed.stderr
    assert "Fastest WebSocket pairs" in completed.stdout and "bun" in completed.stdout
    assert "results/reference/2026-11-21-default-matrix.json.xz" in completed.stdout  # the file it read


def test_the_old_name_of_a_compressed_run_still_reads():
    """`report X.json` (and compare, scaling), the name the docs gave before the files were compressed, reads
    X.json.xz beside it."""
    assert report_command.read(REFERENCE_RUN.with_name(json_stem(REFERENCE_RUN) + ".json")) == load(REFERENCE_RUN)


def test_diagnose_and_the_benchmarks_read_the_compressed_files(tmp_path):
    """diagnose --reference (given the old name too, and recording the file it read), gate_power's default runs and
    noise_structure's --previous read the .json.xz files."""
    for given in (REFERENCE_RUN, REFERENCE_RUN.with_name(json_stem(REFERENCE_RUN) + ".json")):
        path, summaries = load_reference(given, tmp_path, "aiohttp", "node-ws")
        assert path == REFERENCE_RUN and summaries[("aiohttp", "node-ws")].measured
    assert all(path.is_file() for path in DEFAULT_RUNS)
    assert previous_cells([REFERENCE / "2026-11-25-noise-structure-1.json.xz"])


# -- the reader, on files made here


def test_plain_xz_and_gzip_files_read_alike(tmp_path):
    text = '{"suite": "x", "values": [1, 2, 3]}'
    (tmp_path / "a.json").write_text(text)
    (tmp_path / "b.json.xz").write_bytes(lzma.compress(text.encode(), preset=9 | lzma.PRESET_EXTREME))
    (tmp_path / "c.json.gz").write_bytes(gzip.compress(text.encode()))
    assert [read_json_text(tmp_path / name) for name in ("a.json", "b.json.xz", "c.json.gz")] == [text] * 3
    assert read_json(tmp_path / "b.json") == {"suite": "x", "values": [1, 2, 3]}  # b.json is gone: b.json.xz


def test_a_missing_name_without_a_compressed_copy_is_not_found_and_a_damaged_one_is_a_value_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_json_text(tmp_path / "missing.json")
    (tmp_path / "damaged.json.xz").write_bytes(lzma.compress(b'{"a": 1}')[:-8])
    with pytest.raises(ValueError, match="damaged.json.xz is not a readable .xz file"):
        read_json_text(tmp_path / "damaged.json.xz")
    (tmp_path / "plain.json").write_text("{}")
    (tmp_path / "plain.json.xz").write_bytes(lzma.compress(b'{"older": true}'))
    assert stored_path(tmp_path / "plain.json") == tmp_path / "plain.json"  # a plain file is read before its copy


def test_a_files_siblings_share_its_stem_whatever_its_suffixes():
    assert [sibling(REFERENCE / name, ".md").name for name in
            ("2026-11-27-default-paced-window-0.6s.json.xz", "x.json", "x.json.gz")] == [
        "2026-11-27-default-paced-window-0.6s.md", "x.md", "x.md"]


def test_a_compressed_run_loads_as_its_plain_json_does(tmp_path):
    """load() of X.json.xz is load() of the same bytes uncompressed."""
    plain = tmp_path / "run.json"
    plain.write_text(read_json_text(REFERENCE_RUN))
    assert load(plain) == load(REFERENCE_RUN)


def test_resume_refuses_a_compressed_run_in_one_line(tmp_path):
    """A resumed run rewrites its own file as plain JSON after every round, so it cannot continue in X.json.xz."""
    (tmp_path / "run.json.xz").write_bytes(REFERENCE_RUN.read_bytes())
    for given in ("run.json.xz", "run.json"):
        with pytest.raises(UsageError, match="is compressed; a run continues in a plain .json file"):
            resume(tmp_path / given, None, tmp_path)
