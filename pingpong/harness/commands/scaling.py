"""`run_bench.py scaling SWEEP.json --cpus 16 --pairs 32 --client-processes 8`: from a --workers sweep measured here,
what each server would give with N CPUs on a host with more of them (analysis/scaling.py: the model, its laws and
its assumptions). The sweep is its index (…-sweep.json) or its points' results files, one per N, plain or compressed
(results/stored.py: an index's X.json is read from X.json.xz once it is compressed)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pingpong.harness.analysis.scaling import Host, scaling_models
from pingpong.harness.commands.report import read
from pingpong.harness.report.scaling import render_scaling
from pingpong.harness.results.records import RunResult
from pingpong.harness.results.stored import read_json, stored_path
from pingpong.harness.settings.configuration import integer_list
from pingpong.harness.settings.usage import UsageError

DESCRIPTION = ("From a --workers sweep measured here (N = 1 and more), the CPU each part of a roundtrip cost at each "
               "N, the universal scalability law fitted to the server's, and the rate each server would reach with "
               "N CPUs on a host of --cpus, with which side saturates first and the model's assumptions.")
SCALING_FORMAT_VERSION = 1


def positive_list(text: str) -> list[int]:
    try:
        return integer_list(text, minimum=1)
    except ValueError as problem:
        raise argparse.ArgumentTypeError(str(problem)) from None


def positive(text: str) -> int:
    values = positive_list(text)
    if "," in text:  # without one, the list has exactly one value
        raise argparse.ArgumentTypeError(f"{text!r}: give one whole number")
    return values[0]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, nargs="+", metavar="RESULTS.json",
                        help="a --workers sweep's index (…-sweep.json) or its points' results files")
    parser.add_argument("--cpus", type=positive, default=16, help="CPUs of the host to predict for (default 16)")
    parser.add_argument("--pairs", type=positive, default=32, help="pairs in flight there (default 32)")
    parser.add_argument("--client-processes", type=positive, default=8,
                        help="client processes there, one CPU each at most (default 8)")
    parser.add_argument("--at", type=positive_list, default=[1, 2, 4, 8], metavar="N,N,...",
                        help="the server CPUs (workers) to predict for (default 1,2,4,8)")
    parser.add_argument("--format", choices=("md", "json"), default="md", help="Markdown (default) or JSON")


def sweep_runs(paths: list[Path]) -> tuple[list[RunResult], list[str]]:
    """The runs of the sweep: a sweep index's points (their files beside it) or the files given; a UsageError when
    a file is neither."""
    runs, sources = [], []
    for path in paths:
        try:
            index = read_json(path)
        except FileNotFoundError:
            raise UsageError(f"{path} does not exist") from None
        except (OSError, ValueError):
            index = None
        if isinstance(index, dict) and index.get("kind") == "sweep":
            for point in index.get("points") or ():
                runs.append(read(path.parent / point["results"]))
                sources.append(str(stored_path(path.parent / point["results"])))
        else:
            runs.append(read(path))
            sources.append(str(path))
    return runs, sources


def run(options: argparse.Namespace) -> int:
    runs, sources = sweep_runs(options.results)
    too_many = [n for n in options.at if n >= options.cpus]
    if too_many:
        raise UsageError(f"--at {too_many[0]} leaves no CPU of --cpus {options.cpus} for a client: give N below it")
    models = scaling_models(runs, Host(options.cpus, options.pairs, options.client_processes), options.at)
    if not models:
        raise UsageError("no cell was measured at --workers 1: the model needs N = 1 (e.g. --workers 1,2,4)")
    if options.format == "json":
        sys.stdout.write(json.dumps({"format_version": SCALING_FORMAT_VERSION, "sources": sources,
                                     "models": [model.to_json() for model in models]}, indent=1) + "\n")
    else:
        sys.stdout.write(render_scaling(models, sources))
    return 0
