"""The suite's temporary folders: each names its owner, and what a killed owner left is removed by the next run."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pingpong.harness.system import work_dirs
from tests.conftest import ROOT

MAKE_AND_DIE = ("import os, sys\nfrom pathlib import Path\nfrom pingpong.harness.system import work_dirs\n"
                "folder = work_dirs.make('pingpong-cell-', Path(sys.argv[1]) if len(sys.argv) > 1 else None)\n"
                "(folder / 'server.log').write_text('left by a killed run')\n"
                "print(folder, flush=True)\nos._exit(0)  # as after kill -9: no clean-up runs\n")


def left_by_a_dead_process(parent: Path | None = None) -> Path:
    done = subprocess.run([sys.executable, "-c", MAKE_AND_DIE, *([str(parent)] if parent else [])], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    return Path(done.stdout.strip())


def test_only_the_folders_of_ended_owners_are_removed(tmp_path):
    dead = left_by_a_dead_process(tmp_path)
    alive = work_dirs.make("pingpong-server-", tmp_path)
    legacy = tmp_path / "pingpong-host-legacy"  # no owner file: made before it, or by someone else
    legacy.mkdir()
    other = tmp_path / "someone-else"
    other.mkdir()
    reused = work_dirs.make("pingpong-tls-", tmp_path)  # this pid, but another process's start time: pid reused
    (reused / work_dirs.OWNER_FILE).write_text(f"{os.getpid()} 12\n")
    garbled = work_dirs.make("pingpong-abuse-", tmp_path)  # not a file this module wrote: not ours to judge
    (garbled / work_dirs.OWNER_FILE).write_text("-1 twelve\n")
    handed_over = left_by_a_dead_process(tmp_path)
    work_dirs.disown(handed_over)  # as compare --alternate leaves its runs to the user
    assert work_dirs.owner_alive(dead) is False and work_dirs.owner_alive(alive) is True
    assert work_dirs.owner_alive(legacy) is None
    assert sorted(work_dirs.remove_orphans(tmp_path)) == sorted([dead, reused])
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [alive.name, legacy.name, other.name, garbled.name, handed_over.name])


def test_temporary_is_removed_on_the_way_out_and_a_prefix_must_be_ours(tmp_path):
    with work_dirs.temporary("pingpong-cell-") as folder:
        assert work_dirs.owner_alive(Path(folder)) is True
    assert not Path(folder).exists()
    with pytest.raises(ValueError):
        work_dirs.make("cell-", tmp_path)


def test_a_measuring_command_removes_what_a_killed_run_left():
    """A folder in the temporary folder whose owner died (as a kill -9 of the orchestrator leaves its cell's) is gone
    after the next run_bench.py command that starts processes, even one that then refuses its input."""
    left = left_by_a_dead_process()
    assert left.parent == Path(tempfile.gettempdir()) and left.exists()
    completed = subprocess.run([sys.executable, "run_bench.py", "diagnose", "nope", "node-ws"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2 and "unknown server 'nope'" in completed.stderr, completed.stderr
    assert not left.exists()
