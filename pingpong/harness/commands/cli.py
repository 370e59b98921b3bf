"""`python run_bench.py [COMMAND] [options]`: the entry point. Without a command it runs the matrix (`run`)."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

from pingpong.harness.analysis.published import SETUPS
from pingpong.harness.commands.parser import COMMANDS, build_parser
from pingpong.harness.results.files import prepare_results_dir
from pingpong.harness.settings.catalog import (DEFAULT_MANIFEST, PROJECT_ROOT, load_manifests, nothing_runnable,
                                               render_listing, select)
from pingpong.harness.settings.configuration import (ResolvedOptions, build_configuration, resolve_options,
                                                     with_package_environments, with_tls_files)
from pingpong.harness.settings.manifest import Implementation, ManifestError, outside_entry_problem
from pingpong.harness.settings.native_build import build_on_first_use
from pingpong.harness.settings.usage import UsageError
from pingpong.harness.system import work_dirs
from pingpong.harness.system.stop_signals import EXIT_INTERRUPTED, stop_signals_raise_interrupt

EXIT_OK, EXIT_USAGE = 0, 2
STARTS_PROCESSES = ("run", "measure", "diagnose", "abuse")  # make work folders (compare --alternate: its own)


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
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout's reader left early (`| head`); the results files are written regardless
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that the exit's flush is quiet
        return EXIT_OK


def run(argv: list[str] | None) -> int:
    """One command. Its own module is imported here, when it runs: the others' imports are not paid for."""
    argv = sys.argv[1:] if argv is None else argv
    run_options = None
    if argv[:1] == ["compare"]:  # compare --alternate A B ... -- RUN OPTIONS
        from pingpong.harness.commands import compare_alternate
        argv, run_options = compare_alternate.split_run_options(argv)
    explicit = argv[:1] and (argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version"))
    command = (argv[0] if argv[0] in COMMANDS else None) if explicit else "run"
    options = build_parser(command).parse_args(argv if explicit else ["run", *argv])
    command_line = [sys.executable, "run_bench.py", *argv]
    if options.command in STARTS_PROCESSES:
        work_dirs.remove_orphans()  # the folders a killed run (kill -9) could not remove
    if options.command == "diagnose":
        from pingpong.harness.commands import diagnose
        return diagnose.run(options, command_line)
    if options.command == "compare":
        from pingpong.harness.commands import compare, compare_alternate
        if compare_alternate.asked(options, run_options):
            return compare_alternate.run(options, run_options)
        return compare.run(options)
    if options.command == "scaling":
        from pingpong.harness.commands import scaling
        return scaling.run(options)
    if options.command == "abuse":
        from pingpong.harness.commands import abuse
        return abuse.run(options)
    if options.command == "report":
        from pingpong.harness.commands import report
        return report.run(options)
    if options.command == "cluster-certs":
        from pingpong.harness.cluster.connection import make_certificates
        written = make_certificates(options.folder)
        print("\n".join(str(path) for path in written))
        return EXIT_OK
    if options.command == "cluster":
        from pingpong.harness.cluster import commands as cluster_commands
        return cluster_commands.run(options)
    if options.command == "list":
        print(render_listing(load_manifests(options.manifest or [DEFAULT_MANIFEST]), options.format))
        return EXIT_OK
    if getattr(options, "setup", None):  # its servers, clients, interpreter and releases, where not given
        for name, value in SETUPS[options.setup].options().items():
            if getattr(options, name, None) is None:
                setattr(options, name, value)
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
    from pingpong.harness.commands import run as matrix  # the measuring and the reports: imported when a run starts

    servers = select(implementations, "server", options.servers, options.exclude)
    clients = select(implementations, "client", options.clients, options.exclude)
    if options.cluster and any(client.outside for client in clients):
        raise UsageError(f"--cluster with {', '.join(c.name for c in clients if c.outside)} (measured from outside): "
                         "not supported yet (its sockets are read on the orchestrator's host)")
    if not options.cluster:  # the compiled programs it names that no run has built yet (a cluster's hosts: theirs)
        build_on_first_use([*servers, *clients], PROJECT_ROOT)
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
    with work_dirs.temporary("pingpong-tls-") as tls_folder:
        if configuration.tls:
            configuration = with_tls_files(configuration, Path(tls_folder))
        profiling = None
        if profiled:
            from pingpong.harness.commands import run_profiles
            profiling = functools.partial(run_profiles.profile_cells, cells=profiled, implementations=implementations,
                                          settings=configuration.settings_at(configuration.points[0]),
                                          rounds=options.profile_rounds)
        code = matrix.run_points(configuration, profiling=profiling)
    if getattr(options, "setup", None) and len(configuration.points) == 1 and code != EXIT_INTERRUPTED:
        stem, markdown = matrix.write_beside_published(SETUPS[options.setup], configuration.results_dir / "latest.json")
        print(markdown.rstrip("\n"), file=sys.stderr)
        print(f"beside the published table: {stem}.json and {stem}.md", file=sys.stderr)
    return code


def profiled_cells(options: argparse.Namespace, configuration, servers: list[Implementation],
                   clients: list[Implementation]) -> list[tuple[Implementation, Implementation]]:
    """--profile's cells, checked before anything is measured (a one-line UsageError), or none."""
    if not options.profile:
        return []
    from pingpong.harness.commands import run_profiles
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
    from pingpong.harness.commands import run as matrix

    cluster.refuse_unsupported(configuration)
    connected = connection.Cluster(options.cluster, options.cluster_tls, options.insecure, options.cluster_timeout,
                                   options.cluster_lease)
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
