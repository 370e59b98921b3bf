"""A published table beside any saved run (what `--setup NAME` writes after a one-point run), for a sweep's points
or a run made before: python -m benchmarks.beside_published RESULTS.json[.xz] [--setup lemire-2023].
Writes RESULTS-<setup>.json and .md beside the file (X.json.xz: beside X) and prints the Markdown."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pingpong.harness.analysis import published
from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.results.records import load, write_atomically
from pingpong.harness.results.stored import json_stem, stored_path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--setup", default="lemire-2023", choices=sorted(published.SETUPS))
    args = parser.parse_args()
    path = stored_path(args.results)
    run = load(path)
    measured = {key: summary.roundtrips_per_s.median if summary.roundtrips_per_s else None
                for key, summary in summarize_run(run).items()}
    table = published.beside(published.SETUPS[args.setup], measured)
    table["results_file"] = path.name
    stem = path.parent / f"{json_stem(path)}-{args.setup}"
    markdown = published.render_markdown(table, path.name)
    write_atomically(stem.with_suffix(".json"), json.dumps(table, indent=1))
    write_atomically(stem.with_suffix(".md"), markdown)
    print(markdown, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
