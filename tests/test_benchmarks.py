"""The benchmark commands the docs cite still start: each answers --help, and their shared matrix settings build.

They measure for minutes, so the suite does not run them; a renamed setting broke every one of them once (the
matrix settings passed server_warmup_s after it had become jit_warmup_s), and nothing noticed.
"""

import subprocess
import sys

import pytest

from benchmarks.rounds_setup import implementations_by_role, matrix_settings
from pingpong.harness.settings.configuration import (DEFAULT_JIT_WARMUP_S, DEFAULT_MATRIX_DURATION_S,
                                                     DEFAULT_MATRIX_WARMUP_S)
from tests.conftest import ROOT

BENCHMARKS = sorted(path.stem for path in (ROOT / "benchmarks").glob("*.py")
                    if path.stem not in ("__init__", "rounds_setup", "netns_lab"))  # the last: the lab hosts, a library


def test_the_shared_settings_are_the_matrix_defaults():
    settings = matrix_settings()
    assert (settings.duration_s, settings.warmup_s, settings.jit_warmup_s) == (
        DEFAULT_MATRIX_DURATION_S, DEFAULT_MATRIX_WARMUP_S, DEFAULT_JIT_WARMUP_S)
    assert settings.pin and settings.payload_size == 4
    assert ("server", "raw-tcp-c") in implementations_by_role()


@pytest.mark.parametrize("module", BENCHMARKS)
def test_each_benchmark_answers_help(module):
    completed = subprocess.run([sys.executable, "-m", f"benchmarks.{module}", "--help"], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr[-800:]
    assert "usage:" in completed.stdout.lower()


def test_address_layout_counts_the_slow_processes_below_its_share_of_the_median():
    from benchmarks.address_layout import SLOW_BELOW, layout_figures
    attempts = {1: {"rate": 100.0, "server_us": 10.0, "client_us": 20.0},
                2: {"rate": 100.0 * SLOW_BELOW - 1, "server_us": 14.0, "client_us": 27.0},
                3: {"rate": 104.0, "server_us": 9.0, "client_us": 19.0}}
    figures = layout_figures(attempts)
    assert (figures["attempts"], figures["median"], figures["slow"]) == (3, 100.0, 1)
    assert (figures["server_us_per_roundtrip"], figures["client_us_per_roundtrip"]) == (10.0, 20.0)
    assert layout_figures({}) == {"attempts": 0}


def test_address_layout_refuses_an_unknown_cell_in_one_line():
    completed = subprocess.run([sys.executable, "-m", "benchmarks.address_layout", "--cells", "nosuch:websockets"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert completed.stderr.strip() == "address_layout: unknown implementations: nosuch"
