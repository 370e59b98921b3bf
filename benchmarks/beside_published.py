"""A published table beside any saved run (what `--setup NAME` writes after a one-point run), for a sweep's points
or a run made before: python -m benchmarks.beside_published RESULTS.json[.xz] [--setup lemire-2023].
Writes RESULTS-<setup>.json and .md beside the file (X.json.xz: beside X) and prints the Markdown."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pingpong.harness.analysis.published import SETUPS
from pingpong.harness.commands.run import write_beside_published


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--setup", default="lemire-2023", choices=sorted(SETUPS))
    args = parser.parse_args()
    _, markdown = write_beside_published(SETUPS[args.setup], args.results)
    print(markdown, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
