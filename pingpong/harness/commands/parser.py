"""run_bench.py's command line: every command and its options, as argparse reads them.

Its own module so that cli (which runs the commands) and compare_alternate (which reads the run options after --
as `run` reads them) both import it. A command's own module (diagnose, compare, abuse, ...) is imported only when
its options are read, so that `run` and a mistyped option do not pay for the others' imports (numpy, websockets).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pingpong import SUITE_VERSION
from pingpong.harness.analysis.published import SETUPS
from pingpong.harness.results.files import DEFAULT_RESULTS_DIR, FORMATS
from pingpong.harness.settings.catalog import PROJECT_ROOT
from pingpong.harness.settings.configuration import (DEFAULT_MATRIX_DURATION_S, DEFAULT_MATRIX_WARMUP_S,
                                                     add_measuring_options, add_package_options, add_round_options)
from pingpong.harness.settings.usage import OneLineArgumentParser

COMMANDS = ("run", "measure", "list", "report", "diagnose", "compare", "scaling", "abuse", "cluster-certs",
            "cluster")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command, with the options of `command` (None: of every command; `--help` lists them all anyway)."""
    parser = OneLineArgumentParser(
        prog="run_bench.py",
        description="WebSocket ping-pong benchmark: every server x every client, roundtrips per second.",
        epilog="Without a command, run_bench.py runs the matrix: 'run_bench.py [options]' is "
               "'run_bench.py run [options]' (see 'run_bench.py run --help').")
    parser.add_argument("--version", action=VersionAction, help="print the suite's version and commit, then exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineArgumentParser)
    add_run_arguments(commands.add_parser(
        "run", help="measure the server x client matrix, print it, save it under results/ (the default)",
        description="WebSocket ping-pong benchmark: every server x every client, roundtrips per second."))
    own = commands.add_parser(
        "measure", help="measure your own client program from outside against the servers: measure -- CMD {url}",
        description="Measure your own client program from outside (docs/contract.md: a program as written): its "
                    "command, after --, gets the room's URL where it says {url}; it opens two connections and "
                    "ping-pongs until it is ended. Prints its row of the matrix and saves the run under results/.")
    add_run_arguments(own)
    own.add_argument("--name", default="own", help="the program's name in the results (default own)")
    own.add_argument("program", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                     help="the program's command, with {url}")
    listing = commands.add_parser("list", help="list implementations and whether they run here",
                                  description="List implementations and whether they run here.")
    listing.add_argument("--manifest", type=Path, action="append",
                         help="manifest file(s) to read; repeat to add more (default: manifest.toml)")
    listing.add_argument("--format", choices=("md", "json", "csv"), default="md",
                         help="a table (md), JSON or CSV")
    listing.set_defaults(list=True)
    own_modules = {
        "report": commands.add_parser("report", help="show a saved run again, in any format"),
        "diagnose": commands.add_parser(
            "diagnose", help="measure one server x client cell in depth, with A/B switches, and explain its rate",
            description="Measure one server x client cell in depth and explain its rate."),
        "compare": commands.add_parser("compare", help="compare two runs cell by cell"),
        "scaling": commands.add_parser(
            "scaling", help="from a --workers sweep, what N server CPUs would give on a bigger host (a fitted model)"),
        "abuse": commands.add_parser("abuse", help="rogue clients against every server: does a pair go on?"),
    }
    certificates = commands.add_parser(
        "cluster-certs", help="make a CA and mutual-TLS certificates for a --cluster's scheduler, workers and you",
        description="Make a CA for a cluster and a certificate with key for each role (scheduler, worker, client), "
                    "all signed by it: the files --cluster-tls and the cluster commands take (docs/cluster.md).")
    certificates.add_argument("folder", type=Path, help="where to write them (created if missing)")
    own_modules["cluster"] = commands.add_parser(
        "cluster", help="start a --cluster's Dask scheduler or a worker on this host, until Ctrl-C")
    for name, subparser in own_modules.items():
        if command in (None, name):
            add_own_module_arguments(name, subparser)
    return parser


def add_own_module_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """The options and description of a command whose module defines them, imported here, when it is read."""
    if command == "report":
        from pingpong.harness.commands import report as module
    elif command == "diagnose":
        from pingpong.harness.commands import diagnose as module
    elif command == "compare":
        from pingpong.harness.commands import compare as module
    elif command == "scaling":
        from pingpong.harness.commands import scaling as module
    elif command == "abuse":
        from pingpong.harness.commands import abuse as module
    else:
        from pingpong.harness.cluster import commands as module
    module.add_arguments(parser)
    if getattr(module, "DESCRIPTION", None):
        parser.description = module.DESCRIPTION


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    selection = parser.add_argument_group("what to run")
    selection.add_argument("--servers", help="comma-separated server names or sets (default: the default set; "
                                                      "native, default,native, all)")
    selection.add_argument("--clients", help="comma-separated client names or sets (default: the default set; "
                                                      "native, default,native, all)")
    selection.add_argument("--setup", choices=sorted(SETUPS),
                           help="a published set-up: its servers, clients, --python and the releases of its time "
                                "(each where not given), and its table beside the run's (lemire-2023: the seed's "
                                "own, Python 3.9 and the releases of November 2023)")
    selection.add_argument("--exclude", metavar="NAME[,NAME...]",
                           help="leave these servers or clients out (a name that is both leaves both)")
    selection.add_argument("--list", action="store_true", help="list implementations and whether they run here")
    selection.add_argument("--manifest", type=Path, action="append",
                           help="manifest file(s) to read; repeat to add more (default: manifest.toml)")
    add_measuring_options(parser, duration=DEFAULT_MATRIX_DURATION_S, warmup=DEFAULT_MATRIX_WARMUP_S, repeat=None)
    add_round_options(parser)
    add_package_options(parser)
    profiling = parser.add_argument_group("profiles of both sides (docs/diagnosing.md)")
    profiling.add_argument("--profile", metavar="SERVER:CLIENT[,...]",
                           help="after the rounds, profile these cells and their row's fastest other client in "
                                "rounds of their own (py-spy, V8's profiler): top functions, differences, flame graphs")
    profiling.add_argument("--profile-rounds", type=int, default=3, metavar="N",
                           help="rounds of profiled attempts per --profile cell (default 3)")
    cluster = parser.add_argument_group("across machines (docs/cluster.md)")
    cluster.add_argument("--cluster", metavar="tls://HOST:PORT",
                         help="place servers and clients on the workers of this Dask scheduler (resources server=1 "
                              "and client=1); without it everything runs here and no Dask process starts")
    cluster.add_argument("--cluster-tls", type=Path, metavar="DIR",
                         help="the cluster's ca.pem, client.pem and client-key.pem (run_bench.py cluster-certs)")
    cluster.add_argument("--cluster-timeout", type=float, default=10.0, metavar="S",
                         help="give up connecting to the scheduler after this many seconds (default 10)")
    cluster.add_argument("--cluster-lease", type=float, metavar="S",
                         help="each host's agent ends what it started when this run has not renewed its lease for S "
                              "seconds (a kill -9, a lost link; renewed every second; default 10)")
    cluster.add_argument("--insecure", action="store_true",
                         help="accept a plain tcp:// scheduler on a network address (anyone who reaches it can run "
                              "code on every worker)")
    output = parser.add_argument_group("output")
    output.add_argument("--format", choices=FORMATS, default="terminal",
                        help="what to print on stdout (default terminal: tables that fit the terminal or COLUMNS, "
                             "at most 120; --list takes md, json or csv)")
    output.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR,
                        help="where <timestamp>.json/.md/.csv/.html and latest.* go (default results/)")
    output.add_argument("--no-figures", dest="figures", action="store_false",
                        help="draw no PNG figures (about a second a matrix with matplotlib); the results' files are "
                             "saved as always, and `report` reads them")
    output.add_argument("--resume", type=Path, metavar="FILE",
                        help="continue the interrupted run saved in FILE: measure only its missing attempts "
                             "(the options must match the ones it was made with)")


class VersionAction(argparse.Action):
    """--version: the suite's version and the commit it runs from (looked up only when asked)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from pingpong.harness.settings.environment import suite_commit

        commit, dirty = suite_commit(PROJECT_ROOT)
        print(f"run_bench.py {SUITE_VERSION} (commit {commit[:12] if commit else 'unknown'}"
              f"{', modified' if dirty else ''})")
        parser.exit(0)
