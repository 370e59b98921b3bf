"""What the benchmarks of the round engine share: their command line, the cells, the matrix's default settings."""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator

from pingpong.harness.analysis.stats import paired_ratio
from pingpong.harness.settings.cell import DEFAULT_PLACEMENT, PLACEMENTS, CellSettings
from pingpong.harness.settings.configuration import (DEFAULT_JIT_WARMUP_S, DEFAULT_MATRIX_DURATION_S,
                                                     DEFAULT_MATRIX_WARMUP_S)
from pingpong.harness.settings.manifest import Implementation, load_manifest
from pingpong.harness.system import processes

ROOT = Path(__file__).resolve().parent.parent
AGREE_WITHIN = 0.03  # two modes agree on a cell when its paired ratio's interval overlaps 1 +- this


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


def paced_cells_problem(cell_pairs: list[tuple[str, ...]],
                        implementations: dict[tuple[str, str], Implementation]) -> str | None:
    """What keeps a benchmark of paced matrix attempts from measuring these --cells, in one line (without the
    benchmark's name), or None: a pair that is not SERVER:CLIENT, an implementation the manifest lacks, the host
    sentinel not built, or the raw-windows switch set (such a benchmark sets the windows' pacing itself)."""
    from pingpong.contract import RAW_WINDOWS_ENV
    from pingpong.harness.system import host_sentinel

    malformed = [":".join(pair) for pair in cell_pairs if len(pair) != 2]
    if malformed:
        return f"--cells: {malformed[0]!r} is not SERVER:CLIENT"
    unknown = [name for server, client in cell_pairs for role, name in (("server", server), ("client", client))
               if (role, name) not in implementations]
    if unknown:
        return f"--cells: unknown implementations: {', '.join(unknown)}"
    if not host_sentinel.SENTINEL.exists():
        return f"{host_sentinel.SENTINEL.name} is not built (sh native/build.sh)"
    if os.environ.get(RAW_WINDOWS_ENV) is not None:
        return f"{RAW_WINDOWS_ENV} is set; this benchmark sets the windows' pacing itself"
    return None


def paced_cells(name: str, cell_pairs: list[tuple[str, ...]], placement: str, also: str | None = None) -> tuple[
        dict[tuple[str, str], Implementation], CellSettings, set[int] | None] | None:
    """The set-up of a benchmark of paced matrix attempts: its cells refused in one line on stderr ("name: ...",
    paced_cells_problem's reasons, else the benchmark's own `also`), or built on first use with the matrix's settings
    in this placement: (implementations by role, settings, the server's CPUs); None when refused."""
    from pingpong.harness.settings.cell import cpus_for
    from pingpong.harness.settings.native_build import build_on_first_use

    implementations = implementations_by_role()
    problem = paced_cells_problem(cell_pairs, implementations) or also
    if problem:
        print(f"{name}: {problem}", file=sys.stderr)
        return None
    build_on_first_use([implementations[(role, pair_name)] for pair in cell_pairs
                        for role, pair_name in zip(("server", "client"), pair)], ROOT)
    settings = matrix_settings(placement)
    server_cpus, _ = cpus_for(settings)
    return implementations, settings, server_cpus


def implementations_by_role() -> dict[tuple[str, str], Implementation]:
    return {(i.role, i.name): i for i in load_manifest(ROOT / "manifest.toml")}


def matrix_settings(placement: str = DEFAULT_PLACEMENT) -> CellSettings:
    """The matrix's default window, warmup and JIT warmup, 4-byte text, default compression and loop, pinned (by
    placement, the run's default unless given)."""
    return CellSettings(duration_s=DEFAULT_MATRIX_DURATION_S, warmup_s=DEFAULT_MATRIX_WARMUP_S, loop="auto",
                        compression="default", payload_size=4, payload_kind="text-ascii", ready_timeout_s=20,
                        stall_timeout_s=10, pin=True, jit_warmup_s=DEFAULT_JIT_WARMUP_S, placement=placement)


def add_placement_option(parser: argparse.ArgumentParser) -> None:
    """--placement, as run_bench.py's, for the benchmarks that measure a cell in either placement."""
    parser.add_argument("--placement", choices=PLACEMENTS, default=DEFAULT_PLACEMENT,
                        help="where the two sides run, as run_bench.py's --placement (default auto: one CPU)")


def paired_agreement(server: str, client: str, numerator: dict[int, float], denominator: dict[int, float],
                     label: str) -> dict:
    """One cell measured two ways in the same rounds: the paired ratio numerator / denominator, and whether the two
    agree within the noise (its interval overlaps 1 ± AGREE_WITHIN); one line on stderr says so."""
    ratio = paired_ratio(numerator, denominator)
    agree = ratio.low is not None and ratio.low <= 1 + AGREE_WITHIN and ratio.high >= 1 - AGREE_WITHIN
    interval = f"{ratio.low:.3f}–{ratio.high:.3f}" if ratio.low is not None else "no interval"
    print(f"{server} × {client}: {label} = {ratio.value:.3f} ({interval}, {ratio.label()}); "
          f"{'agree' if agree else 'DIFFER'}", file=sys.stderr)
    return {"ratio": asdict(ratio), "agree": agree}


def count_agreeing(cells: list[dict]) -> int:
    """How many of the cells (paired_agreement's entries) agree; one line on stderr says so."""
    agreeing = sum(cell["agree"] for cell in cells)
    print(f"{agreeing} of {len(cells)} cells agree within the noise (±{AGREE_WITHIN:.0%})", file=sys.stderr)
    return agreeing


def server_rounds(name: str, cells: list[tuple[str, str]], variants: list[Any], rounds: int, seed: int,
                  implementations: dict[tuple[str, str], Implementation], settings: CellSettings,
                  server_cpus: set[int] | None) -> Iterator[tuple[int, str, Any, str, Any]]:
    """The benchmarks' rounds: each round starts every server once (in a shuffled order) and yields its cells in
    every variant, shuffled, as (round, server, the started server, client, variant); it stops after its last. A
    server that does not start ends the benchmark in one line. Every variant of a cell thus shares the host's drift
    and the server process."""
    from pingpong.harness.measure.server import start_server  # the measuring layer, for the benchmarks that run it

    generator = random.Random(seed)
    for round_number in range(1, rounds + 1):
        servers = sorted({server for server, _ in cells})
        generator.shuffle(servers)
        for server_name in servers:
            jobs = [(client, variant) for server, client in cells if server == server_name for variant in variants]
            generator.shuffle(jobs)
            with tempfile.TemporaryDirectory(prefix=f"pingpong-{name}-") as work:
                started = start_server(implementations[("server", server_name)], settings, ROOT, Path(work),
                                       server_cpus)
                try:
                    if started.problem:
                        raise SystemExit(f"{name}: {server_name}: {started.problem.reason}")
                    for client, variant in jobs:
                        yield round_number, server_name, started, client, variant
                finally:
                    with processes.interrupts_deferred():
                        processes.stop(started.process)
        print(f"round {round_number}/{rounds} done", file=sys.stderr, flush=True)
