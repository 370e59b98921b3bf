"""What the benchmarks of the round engine share: their command line, the cells, the matrix's default settings."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

from pingpong.harness.configuration import (DEFAULT_MATRIX_DURATION_S, DEFAULT_MATRIX_WARMUP_S,
                                            DEFAULT_JIT_WARMUP_S)
from pingpong.harness.manifest import Implementation, load_manifest
from pingpong.harness.runner import CellSettings

ROOT = Path(__file__).resolve().parent.parent


def parse_arguments(description: str, default_cells: str,
                    more_options: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """--rounds, --cells (server:client pairs, comma-separated), --seed, and the benchmark's own more_options adds;
    the cells parsed into pairs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--cells", default=default_cells, help="server:client pairs, comma-separated")
    parser.add_argument("--seed", type=int, default=1)
    if more_options is not None:
        more_options(parser)
    arguments = parser.parse_args()
    arguments.cell_pairs = [tuple(pair.split(":")) for pair in arguments.cells.split(",")]
    return arguments


def implementations_by_role() -> dict[tuple[str, str], Implementation]:
    return {(i.role, i.name): i for i in load_manifest(ROOT / "manifest.toml")}


def matrix_settings() -> CellSettings:
    """The matrix's default window, warmup and JIT warmup, 4-byte text, default compression and loop, pinned."""
    return CellSettings(duration_s=DEFAULT_MATRIX_DURATION_S, warmup_s=DEFAULT_MATRIX_WARMUP_S, loop="auto",
                        compression="default", payload_size=4, payload_kind="text-ascii", ready_timeout_s=20,
                        stall_timeout_s=10, pin=True, jit_warmup_s=DEFAULT_JIT_WARMUP_S)
