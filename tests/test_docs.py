"""The documentation stays readable and true: no line wider than 120 characters, the README short, links alive, and
every shell block either run by a test (the runs of docs/cluster.md's are in test_cluster.py) or marked as an
illustration."""

import ast
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import QUICK_RELAY_CHECK, ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "results" / "reference" / "README.md"]


def test_no_line_of_the_documentation_is_wider_than_120_characters():
    # Counted in UTF-8 bytes, as byte-counting editors and linters see them (µ, ×, ± and – take 2-3 each); a table
    # row cannot wrap, so it is held to 120 characters.
    wide = [f"{path.relative_to(ROOT)}:{number} ({len(line.encode())} bytes)" for path in DOCUMENTS
            for number, line in enumerate(path.read_text().splitlines(), 1)
            if (len(line) if line.startswith("|") else len(line.encode())) > 120]
    assert not wide, wide


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert "uv pip install --compile-bytecode -r requirements.txt && npm ci && python run_bench.py" in text
    assert "python -m pytest" in text and "python -m pytest" in (ROOT / ".ci" / "run").read_text()


def test_the_set_up_installs_the_uv_that_requirements_txt_pins():
    """README's set-up and CI's install uv first, then requirements.txt with it: the same uv as requirements.txt."""
    pinned = re.search(r"^uv==(\S+)", (ROOT / "requirements.txt").read_text(), re.MULTILINE).group(1)
    for path in (ROOT / "README.md", ROOT / ".ci" / "run"):
        assert re.findall(r"install (?:--\S+ )*(?:-q )?uv==(\S+)", path.read_text()) == [pinned], path


def test_every_relative_link_leads_to_a_file():
    broken = []
    for path in DOCUMENTS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if not target.startswith(("http://", "https://")) and not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} → {target}")
    assert not broken, broken


# -- every shell block is run by a test, or marked as an illustration

SHELL_FENCE = re.compile(r"\s*```(sh|bash|shell)\s*")
ILLUSTRATION = re.compile(r"\s*<!-- illustration: (\S.*\S) -->\s*")

# (document, a substring of its block's first command, unique among the blocks): the test that runs the block
RUN_BY = {
    ("docs/cluster.md", "run_bench.py cluster-certs cluster-tls"):
        "tests/test_docs.py::test_the_cluster_certificates_are_made_as_documented",
    ("docs/cluster.md", "run_bench.py cluster scheduler"):
        "tests/test_cluster.py::test_the_documented_commands_run_a_cluster",
    ("docs/cluster.md", "run_bench.py cluster worker"):
        "tests/test_cluster.py::test_the_documented_commands_run_a_cluster",
    ("docs/cluster.md", "run_bench.py --cluster tls://"):
        "tests/test_cluster.py::test_the_documented_commands_run_a_cluster",
    ("docs/diagnosing.md", "run_bench.py diagnose aiohttp node-ws --reference"):
        "tests/test_docs.py::test_the_documented_diagnosis_runs",
    ("docs/diagnosing.md", "run_bench.py diagnose aiohttp node-ws --profile"):
        "tests/test_docs.py::test_the_documented_profiled_diagnosis_runs",
    ("docs/diagnosing.md", "run_bench.py --compression default"):
        "tests/test_docs.py::test_the_documented_compression_comparison_runs",
    ("docs/workloads.md", "run_bench.py scaling results/reference"):
        "tests/test_scaling.py::test_the_documented_command_predicts_each_cell_at_each_n",
}


@dataclass
class ShellBlock:
    document: str  # relative to ROOT
    line: int  # the opening fence's
    commands: list[str]  # a command per line, continuation lines joined, comment-only and blank lines left out
    illustration: str | None  # why it is not run, from the marker line directly before the fence

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


def shell_blocks(path: Path) -> list[ShellBlock]:
    lines = path.read_text().splitlines()
    blocks, number = [], 0
    while number < len(lines):
        if not SHELL_FENCE.fullmatch(lines[number]):
            number += 1
            continue
        marker = ILLUSTRATION.fullmatch(lines[number - 1]) if number else None
        end = next(index for index in range(number + 1, len(lines)) if lines[index].strip().startswith("```"))
        commands, pending = [], ""
        for text in lines[number + 1:end]:
            text = pending + text.strip()
            pending = ""
            if text.endswith("\\"):
                pending = text[:-1].rstrip() + " "
            elif text and not text.startswith("#"):
                commands.append(text)
        blocks.append(ShellBlock(str(path.relative_to(ROOT)), number + 1, commands,
                                 marker.group(1) if marker else None))
        number = end + 1
    return blocks


def all_shell_blocks() -> list[ShellBlock]:
    return [block for path in DOCUMENTS for block in shell_blocks(path)]


def documented_commands(document: str, first_command: str) -> list[str]:
    """The commands of the block RUN_BY names by (document, first_command), for the test that runs them."""
    assert (document, first_command) in RUN_BY, (document, first_command)
    (block,) = [b for b in shell_blocks(ROOT / document) if b.commands and first_command in b.commands[0]]
    return block.commands


def as_argv(command: str, replacements: dict[str, str] | None = None) -> list[str]:
    """A documented command as argv: the replacements made in its text, its trailing comment dropped, `python` as
    this interpreter and `run_bench.py` as this checkout's (so that it runs from any folder)."""
    for old, new in (replacements or {}).items():
        command = command.replace(old, new)
    argv = shlex.split(command, comments=True)
    substitutes = {"python": sys.executable, "run_bench.py": str(ROOT / "run_bench.py")}
    return [substitutes.get(word, word) for word in argv]


def test_every_shell_block_is_run_by_a_test_or_marked_as_an_illustration():
    """A block is marked `<!-- illustration: WHY -->` on the line before its fence, or RUN_BY names the test that
    runs it: a command nobody runs is a procedure nobody knows works."""
    problems, matched = [], {key: [] for key in RUN_BY}
    for block in all_shell_blocks():
        if not block.commands:
            problems.append(f"{block.where}: an empty shell block")
            continue
        keys = [key for key in RUN_BY if key[0] == block.document and key[1] in block.commands[0]]
        for key in keys:
            matched[key].append(block.where)
        if block.illustration and keys:
            problems.append(f"{block.where}: marked as an illustration and run by {RUN_BY[keys[0]]}: which is it?")
        elif not block.illustration and not keys:
            problems.append(f"{block.where} ({block.commands[0][:60]!r}): neither run by a test (RUN_BY in "
                            f"tests/test_docs.py) nor marked '<!-- illustration: WHY -->' on the line before it")
    problems += [f"RUN_BY {key}: matches {where or 'no block'}, not exactly one" for key, where in matched.items()
                 if len(where) != 1]
    assert not problems, "\n".join(problems)


def test_every_test_that_runs_a_documented_block_exists():
    missing = []
    for test in sorted(set(RUN_BY.values())):
        module, _, function = test.partition("::")
        path = ROOT / module
        defined = ({node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}
                   if path.is_file() else set())
        if not function.startswith("test_") or function not in defined:
            missing.append(test)
    assert not missing, missing


def test_the_cluster_certificates_are_made_as_documented(tmp_path):
    """docs/cluster.md's first block, in an empty folder: the files the cluster commands and --cluster-tls take."""
    (command,) = documented_commands("docs/cluster.md", "run_bench.py cluster-certs cluster-tls")
    done = subprocess.run(as_argv(command), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "cluster-tls"
    written = {path.name for path in folder.iterdir()}
    assert {"ca.pem", "ca-key.pem"} <= written
    for role in ("scheduler", "worker", "client"):
        assert {f"{role}.pem", f"{role}-key.pem"} <= written
        assert (folder / f"{role}-key.pem").stat().st_mode & 0o077 == 0  # the keys are the owner's only
    assert done.stdout.splitlines() == [str(Path("cluster-tls") / name) for name in
                                        ["ca.pem"] + [f"{role}{kind}.pem" for role in ("scheduler", "worker", "client")
                                                      for kind in ("", "-key")]]


FAST = ["--repeat", "1", "--duration", "0.5", "--warmup", "0.2", "--jit-warmup", "0", *QUICK_RELAY_CHECK]


@pytest.mark.timeout(300)
def test_the_documented_diagnosis_runs(tmp_path):
    """docs/diagnosing.md's diagnose, from the checkout, with its reference run; shortened: one repeat of a short
    window, one switch, no strace, its results in a temporary folder."""
    (command,) = documented_commands("docs/diagnosing.md", "run_bench.py diagnose aiohttp node-ws --reference")
    done = subprocess.run(as_argv(command) + FAST + ["--switches", "compression-off", "--no-strace",
                                                      "--results-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    (saved,) = tmp_path.glob("diagnose-aiohttp-node-ws-*.json")
    document = json.loads(saved.read_text())
    assert document["reference"] == "results/reference/2026-11-21-default-matrix.json.xz"
    assert document["report"]["context"]["expected_roundtrips_per_s"]  # the reference run's row and column
    assert set(document["cells"]) == {"baseline", "compression-off"}


@pytest.mark.timeout(300)
def test_the_documented_profiled_diagnosis_runs(tmp_path):
    """docs/diagnosing.md's profiled diagnosis, from the checkout, with its reference run; shortened: one repeat,
    one switch, no strace, one profiled round. The healthy pair is aiohttp × aiohttp, its row's fastest other client
    in the reference run; the Node.js client's profile is V8's, the Python server's py-spy's."""
    (command,) = documented_commands("docs/diagnosing.md", "run_bench.py diagnose aiohttp node-ws --profile")
    done = subprocess.run(as_argv(command) + FAST + ["--profile-rounds", "1", "--switches", "compression-off",
                                                      "--no-strace", "--results-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    (saved,) = tmp_path.glob("diagnose-aiohttp-node-ws-*.json")
    profiles = json.loads(saved.read_text())["report"]["profiles"]
    assert profiles["pairs"] == {"cell": "aiohttp × node-ws", "healthy": "aiohttp × aiohttp"}
    assert profiles["sides"]["client"]["cell"]["profiler"] == "v8 cpu profiler (inspector)"
    assert profiles["sides"]["server"]["cell"]["profiler"].startswith("py-spy ")
    assert list(tmp_path.glob("diagnose-aiohttp-node-ws-*.html"))


@pytest.mark.timeout(300)
def test_the_documented_compression_comparison_runs(tmp_path):
    """docs/diagnosing.md's two runs and their comparison, from the checkout, into a temporary folder; each run
    shortened to one cell, one round of a short window."""
    first, second, comparison = documented_commands("docs/diagnosing.md", "run_bench.py --compression default")
    folders = {"results/default": str(tmp_path / "default"), "results/off": str(tmp_path / "off")}
    for command in (first, second):
        done = subprocess.run(as_argv(command, folders) + ["--servers", "aiohttp", "--clients", "node-ws", *FAST],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run(as_argv(comparison, folders), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "aiohttp" in done.stdout and "node-ws" in done.stdout
    runs = [json.loads((tmp_path / name / "latest.json").read_text()) for name in ("default", "off")]
    assert [run["configuration"]["compression"] for run in runs] == ["default", "off"]
