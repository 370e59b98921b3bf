"""`run --profile SERVER:CLIENT[,...]`: after the rounds, the named cells profiled as `diagnose --profile` does.

Each named cell and a healthy pair (the same server with the fastest other client of its row in this run) get
--profile-rounds rounds of their own with both sides profiled over the window (commands/diagnose_profiles.py).
The comparison goes into the run's record (`profiles`, by cell), its Markdown and terminal reports; each cell's
flame graphs into a page of its own beside the run's files (`<stamp>-profile-<server>--<client>.html`), with its
speedscope JSON and folded stacks under `<stamp>-profiles/`. The rounds' budget does not include these attempts.
"""

from __future__ import annotations

import sys

from pingpong.harness.analysis.summary import summarize_run
from pingpong.harness.commands import diagnose_profiles
from pingpong.harness.report import profile_report
from pingpong.harness.results.files import ResultPaths
from pingpong.harness.results.records import RunResult, write_atomically
from pingpong.harness.settings.catalog import skip_reason
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.settings.usage import UsageError


def parse_profile_cells(text: str, servers: list[Implementation], clients: list[Implementation],
                        settings: CellSettings) -> list[tuple[Implementation, Implementation]]:
    """--profile's SERVER:CLIENT pairs among the run's servers and clients, or a one-line UsageError."""
    by_role = {"server": {s.name: s for s in servers}, "client": {c.name: c for c in clients}}
    cells = []
    for item in text.split(","):
        server_name, colon, client_name = item.strip().partition(":")
        if not colon or not server_name or not client_name:
            raise UsageError(f"--profile takes SERVER:CLIENT pairs separated by commas, not {item.strip()!r}")
        for role, name in (("server", server_name), ("client", client_name)):
            if name not in by_role[role]:
                raise UsageError(f"--profile {item.strip()}: {role} {name} is not among this run's {role}s "
                                 f"({', '.join(sorted(by_role[role]))})")
        pair = by_role["server"][server_name], by_role["client"][client_name]
        why_not = skip_reason(pair[0], pair[1], settings)
        if why_not:
            raise UsageError(f"--profile {item.strip()}: {why_not}")
        cells.append(pair)
    return cells


def profile_cells(run: RunResult, paths: ResultPaths, cells: list[tuple[Implementation, Implementation]],
                  implementations: list[Implementation], settings: CellSettings, rounds: int) -> None:
    """Profile each named cell beside its row's fastest other client; the comparisons go into run.profiles."""
    summaries = summarize_run(run)
    found = {}
    stem = paths.json.with_suffix("")
    for server, client in cells:
        key = f"{server.name} × {client.name}"
        summary = summaries.get((server.name, client.name))
        if summary is None or not summary.measured:
            found[key] = {"note": "the cell was not measured in this run, so it was not profiled"}
            continue
        try:
            healthy = diagnose_profiles.healthy_pair(implementations, server, client, None, (paths.json, summaries),
                                                     settings)
        except UsageError as exc:
            found[key] = {"note": str(exc).removeprefix("--profile: ")}
            continue
        print(f"profiling {key} beside {healthy[0].name} × {healthy[1].name}: {rounds} round(s) of their own",
              file=sys.stderr, flush=True)
        root = stem.parent / f"{stem.name}-profiles" / f"{server.name}--{client.name}"
        pairs = {diagnose_profiles.CELL: (server, client), diagnose_profiles.HEALTHY: healthy}
        attempts = diagnose_profiles.measure_profiled(pairs, settings, rounds, root)
        comparison = diagnose_profiles.compare_sides(
            attempts, {label: f"{pair[0].name} × {pair[1].name}" for label, pair in pairs.items()}, root)
        page = stem.parent / f"{stem.name}-profile-{server.name}--{client.name}.html"
        saved = diagnose_profiles.saved(comparison) | {
            "verdict": diagnose_profiles.profile_verdict(comparison), "page": page.name}
        markdown = "\n".join(profile_report.markdown_lines(saved, heading=f"# Profiles: {key}")) + "\n"
        write_atomically(page, profile_report.html_page(f"Profiles: {key}", markdown, comparison))
        found[key] = saved
    run.profiles = found
