"""`python run_bench.py [COMMAND] [options]`: the entry point. Without a command it runs the matrix (`run`)."""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from pathlib import Path

from pingpong import SUITE_VERSION
from pingpong.harness.cluster import commands as cluster_commands
from pingpong.harness.commands import abuse, compare, compare_alternate, diagnose, report, run_profiles
from pingpong.harness.commands import run as matrix
from pingpong.harness.results.files import DEFAULT_RESULTS_DIR, prepare_results_dir
from pingpong.harness.settings.catalog import (DEFAULT_MANIFEST, PROJECT_ROOT, load_manifests, nothing_runnable,
                                               render_listing, select)
from pingpong.harness.settings.configuration import (DEFAULT_MATRIX_DURATION_S, DEFAULT_MATRIX_WARMUP_S,
                                                     ResolvedOptions, add_measuring_options, add_package_options,
                                                     add_round_options, build_configuration, resolve_options,
                                                     with_package_environments, with_tls_files)
from pingpong.harness.settings.manifest import Implementation, ManifestError, outside_entry_problem
from pingpong.harness.settings.usage import OneLineArgumentParser, UsageError
from pingpong.harness.system.stop_signals import stop_signals_raise_interrupt

EXIT_OK, EXIT_USAGE = 0, 2
COMMANDS = ("run", "measure", "list", "report", "diagnose", "compare", "abuse", "cluster-certs", "cluster")


def main(argv: list[str] | None = None) -> int:
    """Map every outcome to an exit code: 0 all cells measured, 1 a cell failed, 2 bad input, 130 interrupted.

    SIGTERM interrupts like Ctrl-C; a SIGINT ignored at start stays ignored (see stop_signals).
    """
    try:
        with stop_signals_raise_interrupt():
            return run(argv)
    except (UsageError, ManifestError) as exc:
        print(f"run_bench.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # outside a matrix's own handling (which saves what was measured)
        print("\nrun_bench.py: interrupted", file=sys.stderr)
        return matrix.EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout's reader left early (`| head`); the results files are written regardless
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that the exit's flush is quiet
        return EXIT_OK


def run(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    argv, run_options = compare_alternate.split_run_options(argv)  # compare --alternate A B ... -- RUN OPTIONS
    explicit = argv[:1] and (argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version"))
    options = build_parser().parse_args(argv if explicit else ["run", *argv])
    command_line = [sys.executable, "run_bench.py", *argv]
    if options.command == "diagnose":
        return diagnose.run(options, command_line)
    if options.command == "compare":
        if compare_alternate.asked(options, run_options):
            return compare_alternate.run(options, run_options)
        return compare.run(options)
    if options.command == "abuse":
        return abuse.run(options)
    if options.command == "report":
        return report.run(options)
    if options.command == "cluster-certs":
        from pingpong.harness.cluster.connection import make_certificates
        written = make_certificates(options.folder)
        print("\n".join(str(path) for path in written))
        return EXIT_OK
    if options.command == "cluster":
        return cluster_commands.run(options)
    if options.command == "list":
        print(render_listing(load_manifests(options.manifest or [DEFAULT_MANIFEST]), options.format))
        return EXIT_OK
    resolved = resolve_options(options)  # run: its options checked before any manifest is read
    implementations = load_manifests(list(resolved.manifests))
    if options.command == "measure":  # the user's own program, measured from outside, as the only client
        own = own_program(options)
        implementations = [*implementations, own]
        options.clients, options.list = own.name, False
    if options.list:
        print(render_listing(implementations, options.format))
        return EXIT_OK
    return measure_matrix(options, resolved, command_line, implementations)


def measure_matrix(options: argparse.Namespace, resolved: ResolvedOptions, command_line: list[str],
                   implementations) -> int:
    """The settings resolved into the run's configuration, then the matrix measured (once, or once per sweep
    point). options: what selects the servers and clients, and --cluster's connection."""
    servers = select(implementations, "server", options.servers, options.exclude)
    clients = select(implementations, "client", options.clients, options.exclude)
    if options.cluster and any(client.outside for client in clients):
        raise UsageError(f"--cluster with {', '.join(c.name for c in clients if c.outside)} (measured from outside): "
                         "not supported yet (its sockets are read on the orchestrator's host)")
    configuration = build_configuration(resolved, command_line, implementations, servers, clients)
    # skip_reason asks only whether TLS is on, so the files are made later (settings_at names them as planned)
    problem = nothing_runnable(servers, clients, [configuration.settings_at(point) for point in configuration.points])
    if problem:  # before any file is written: latest.json stays the last real run (diagnose's baseline)
        raise UsageError(problem)
    profiled = profiled_cells(options, configuration, servers, clients)
    prepare_results_dir(configuration.results_dir)
    configuration = with_package_environments(configuration)
    if options.cluster:
        return measure_on_cluster(options, configuration, implementations)
    with tempfile.TemporaryDirectory(prefix="pingpong-tls-") as tls_folder:
        if configuration.tls:
            configuration = with_tls_files(configuration, Path(tls_folder))
        profiling = None
        if profiled:
            profiling = functools.partial(run_profiles.profile_cells, cells=profiled, implementations=implementations,
                                          settings=configuration.settings_at(configuration.points[0]),
                                          rounds=options.profile_rounds)
        return matrix.run_points(configuration, profiling=profiling)


def profiled_cells(options: argparse.Namespace, configuration, servers: list[Implementation],
                   clients: list[Implementation]) -> list[tuple[Implementation, Implementation]]:
    """--profile's cells, checked before anything is measured (a one-line UsageError), or none."""
    if not options.profile:
        return []
    if options.cluster:
        raise UsageError("--profile with --cluster: not supported yet (the profilers attach to processes on this "
                         "machine; run diagnose --profile on a host)")
    if len(configuration.points) != 1:
        raise UsageError("--profile profiles cells of one matrix, not of a run over a list of settings")
    if options.profile_rounds < 1:
        raise UsageError("--profile-rounds must be at least 1")
    return run_profiles.parse_profile_cells(options.profile, servers, clients,
                                            configuration.settings_at(configuration.points[0]))


def own_program(options: argparse.Namespace) -> Implementation:
    """`measure -- CMD ...`: the user's command as a client measured from outside, or a one-line UsageError."""
    command = options.program[1:] if options.program[:1] == ["--"] else options.program
    if not command:
        raise UsageError("measure needs the program's command after --, with {url} where it takes the room's URL "
                         "(e.g. measure -- python my_client.py {url})")
    own = Implementation(name=options.name, role="client", runtime="native", protocol="websocket",
                         command=tuple(command), requires=(), loops=("auto",), compression=("default",),
                         description=f"your program: {' '.join(command)}", sets=("own",), measure="outside")
    problem = outside_entry_problem(own)
    if problem:
        raise UsageError(f"measure: {problem[0]} {problem[1]}")
    return own


def measure_on_cluster(options: argparse.Namespace, configuration, implementations) -> int:
    """--cluster: check the cluster (one line and exit 2 if it cannot be used), then the same rounds on its hosts."""
    from pingpong.harness.cluster import connection
    from pingpong.harness.cluster import measurer as cluster

    cluster.refuse_unsupported(configuration)
    connected = connection.Cluster(options.cluster, options.cluster_tls, options.insecure, options.cluster_timeout)
    try:
        measurer = cluster.ClusterMeasurer(connected)
        topology = connected.topology()
        topology["floor"] = cluster.measure_floor(measurer, implementations,
                                                  configuration.settings_at(configuration.points[0]))
        connection.log(f"{len(topology['hosts'])} hosts, link {topology['link']}, raw-TCP floor across it: "
                    f"{topology['floor'].get('p50_us', topology['floor'].get('error'))} µs p50")
        return matrix.run_points(configuration, measurer, topology)
    finally:
        connected.close()


def build_parser() -> argparse.ArgumentParser:
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
    report.add_arguments(commands.add_parser("report", help="show a saved run again, in any format",
                                             description=report.DESCRIPTION))
    diagnose.add_arguments(commands.add_parser(
        "diagnose", help="measure one server x client cell in depth, with A/B switches, and explain its rate",
        description="Measure one server x client cell in depth and explain its rate."))
    compare.add_arguments(commands.add_parser("compare", help="compare two runs cell by cell",
                                              description=compare.DESCRIPTION))
    abuse.add_arguments(commands.add_parser("abuse", help="rogue clients against every server: does a pair go on?",
                                            description=abuse.DESCRIPTION))
    certificates = commands.add_parser(
        "cluster-certs", help="make a CA and mutual-TLS certificates for a --cluster's scheduler, workers and you",
        description="Make a CA for a cluster and a certificate with key for each role (scheduler, worker, client), "
                    "all signed by it: the files --cluster-tls and the cluster commands take (docs/cluster.md).")
    certificates.add_argument("folder", type=Path, help="where to write them (created if missing)")
    cluster_commands.add_arguments(commands.add_parser(
        "cluster", help="start a --cluster's Dask scheduler or a worker on this host, until Ctrl-C",
        description=cluster_commands.DESCRIPTION))
    return parser


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    selection = parser.add_argument_group("what to run")
    selection.add_argument("--servers", help="comma-separated server names or sets (default: the default set; "
                                                      "native, default,native, all)")
    selection.add_argument("--clients", help="comma-separated client names or sets (default: the default set; "
                                                      "native, default,native, all)")
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
    cluster.add_argument("--insecure", action="store_true",
                         help="accept a plain tcp:// scheduler on a network address (anyone who reaches it can run "
                              "code on every worker)")
    output = parser.add_argument_group("output")
    output.add_argument("--format", choices=report.FORMATS, default="terminal",
                        help="what to print on stdout (default terminal: tables that fit 120 columns; "
                             "--list takes md, json or csv)")
    output.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR,
                        help="where <timestamp>.json/.md/.csv/.html and latest.* go (default results/)")
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
        parser.exit(EXIT_OK)
