"""`diagnose SERVER CLIENT --profile`: CPU profiles of both sides of the cell and of a healthy pair, in rounds.

Each round runs one attempt of the cell and one of the healthy pair (by default the same server with the fastest
client of its row in the reference run; `--against SERVER CLIENT` names another), each with both sides profiled
for its window (system/profilers.py: py-spy for Python, V8's profiler for Node.js). These attempts are their own:
the profilers slow the pair down, so their rates are not the cell's. Each side's samples become µs per roundtrip
(the attempt's rate × the time the profiler sampled gives the roundtrips in the profile), per function by self and
by total time; the cell's functions are set against the healthy pair's round by round, with an interval from the
rounds. The profiles are saved beside the diagnosis as speedscope JSON (speedscope.app opens them), as folded
stacks, and drawn as flame graphs in the diagnosis's HTML page.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from pingpong.harness.analysis import profiles
from pingpong.harness.analysis.summary import Summaries
from pingpong.harness.measure.local import run_attempt
from pingpong.harness.results.records import Attempt
from pingpong.harness.settings.catalog import PROJECT_ROOT, find, skip_reason
from pingpong.harness.settings.cell import CellSettings
from pingpong.harness.settings.manifest import Implementation
from pingpong.harness.settings.usage import UsageError

PROFILE_WINDOW_S = 2.0  # at least: the profilers attach inside the window, so it is longer than a headline one
TOP_FUNCTIONS = 10
OUTER_FRAME_SHARE = 0.98  # by total time, frames above this share of the sampled CPU are the program's outer ones
SIDES = ("server", "client")
CELL, HEALTHY = "cell", "healthy"


def healthy_pair(implementations: list[Implementation], server: Implementation, client: Implementation,
                 against: list[str] | None, reference: tuple[Path, Summaries] | None,
                 baseline: CellSettings) -> tuple[Implementation, Implementation]:
    """The pair to profile beside the cell: --against's, else the same server with the fastest other client of
    its row in the reference run that can run here; a one-line UsageError when there is none."""
    if against:
        pair = find(implementations, "server", against[0]), find(implementations, "client", against[1])
        if (pair[0].name, pair[1].name) == (server.name, client.name):
            raise UsageError("--against names the cell itself; name a healthy pair to set it against")
        why_not = skip_reason(pair[0], pair[1], baseline)
        if why_not:
            raise UsageError(f"--against {pair[0].name} {pair[1].name}: {why_not}")
        return pair
    if reference is None:
        raise UsageError("--profile sets the cell against a healthy pair: give --against SERVER CLIENT, or run the "
                         "matrix first so that --reference (default results/latest.json) has this server's row")
    path, summaries = reference
    row = sorted(((summary.roundtrips_per_s.median, name) for (row_server, name), summary in summaries.items()
                  if row_server == server.name and name != client.name and summary.measured),
                 reverse=True)
    by_name = {i.name: i for i in implementations if i.role == "client"}
    for _, name in row:
        candidate = by_name.get(name)
        if candidate is not None and candidate.protocol == client.protocol and not candidate.outside \
                and not skip_reason(server, candidate, baseline):
            return server, candidate
    raise UsageError(f"--profile: {path} has no other measured client of server {server.name} that runs here; "
                     "give --against SERVER CLIENT")


def measure_profiled(pairs: dict[str, tuple[Implementation, Implementation]], baseline: CellSettings, rounds: int,
                     profile_root: Path) -> dict[str, list[Attempt]]:
    """rounds × one profiled attempt of each pair, interleaved round by round; their captures under profile_root."""
    attempts: dict[str, list[Attempt]] = {label: [] for label in pairs}
    window = max(baseline.duration_s, PROFILE_WINDOW_S)
    for number in range(1, rounds + 1):
        for label, (server, client) in pairs.items():
            folder = profile_root / f"{label}-round{number}"
            folder.mkdir(parents=True, exist_ok=True)
            settings = replace(baseline, duration_s=window, profile_dir=str(folder))
            attempt = run_attempt(server, client, settings, 900 + number, PROJECT_ROOT)
            attempts[label].append(attempt)
            said = (f"{attempt.roundtrips_per_s:,.0f} roundtrips/s under the profilers" if attempt.ok
                    else f"{attempt.status}: {attempt.reason}")
            print(f"[profile {number}/{rounds}] {label} pair {server.name} × {client.name}: {said}", file=sys.stderr,
                  flush=True)
    return attempts


def attached_roundtrips(attempt: Attempt, capture: dict[str, Any], attached_s_key: str) -> float:
    """The roundtrips of the window made while a tracer or profiler was attached: the window's share the clients'
    received bytes gave (window.window_share), else the window's mean rate over the attached time (which counts
    wrong when attaching moved the pair's pace: strace slows it, py-spy's attach may stall it)."""
    share = capture.get("window_share")
    if share is not None and attempt.roundtrips:
        return attempt.roundtrips * share
    return attempt.roundtrips_per_s * capture[attached_s_key]


def side_profile(attempt: Attempt, side: str) -> profiles.Profile | str:
    """One side's profile of a profiled attempt, or why there is none."""
    if not attempt.ok:
        return f"the attempt failed: {attempt.status}: {attempt.reason}"
    capture = (attempt.profiles or {}).get(side)
    if not capture:
        return "no profile was taken"
    if capture.get("error"):
        return capture["error"]
    roundtrips = round(attached_roundtrips(attempt, capture, "sampled_s"))
    if roundtrips < 1:
        return "no roundtrip completed while the profiler sampled"
    window = capture.get("window_wall_us")
    try:
        return profiles.read_profile_file(Path(capture["path"]), side=side, roundtrips=roundtrips,
                                          wall_s=capture["sampled_s"], interval_s=capture["interval_s"],
                                          runtime=capture["runtime"], profiler=capture["profiler"],
                                          window_us=tuple(window) if window else None)
    except (OSError, ValueError) as exc:
        return f"its profile could not be read: {exc}"


def _cost_rows(costs: list[profiles.MedianCost], by: str, sampled_us: float) -> list[dict[str, Any]]:
    """The top functions by self or total time; by total, leaving out the frames under which nearly everything
    ran (the program's entry, its event loop's run): at ≥ OUTER_FRAME_SHARE of the sampled CPU they say nothing."""
    key = (lambda cost: -cost.self_us_per_roundtrip) if by == "self" else (lambda cost: -cost.total_us_per_roundtrip)
    shown = [cost for cost in sorted(costs, key=key)
             if by == "self" or cost.total_us_per_roundtrip < OUTER_FRAME_SHARE * sampled_us]
    return [{"function": cost.label, "self_us_per_roundtrip": round(cost.self_us_per_roundtrip, 2),
             "total_us_per_roundtrip": round(cost.total_us_per_roundtrip, 2)} for cost in shown[:TOP_FUNCTIONS]]


def _pair_figures(side_profiles: list[profiles.Profile], measured_us: list[float]) -> dict[str, Any]:
    """One pair's side: sampled CPU per roundtrip beside the CPU measured in the same windows (how much of it the
    profiler saw), and its top functions."""
    costs = profiles.median_costs(side_profiles)
    sampled = statistics.median(profiles.sampled_cpu_us_per_roundtrip(p) for p in side_profiles)
    measured = statistics.median(measured_us) if measured_us else None
    return {"sampled_cpu_us_per_roundtrip": round(sampled, 2),
            "measured_cpu_us_per_roundtrip": None if measured is None else round(measured, 2),
            "sampled_share": None if not measured else round(sampled / measured, 3),
            "profiler": side_profiles[0].profiler, "runtime": side_profiles[0].runtime,
            "top_self": _cost_rows(costs, "self", sampled), "top_total": _cost_rows(costs, "total", sampled)}


def measured_cpu_us(attempt: Attempt, side: str) -> float | None:
    """The side's CPU per roundtrip as the window measured it (the profiled attempt's own, profiler and all)."""
    cpu_s = attempt.server_cpu_s if side == "server" else attempt.client_cpu_s
    return None if cpu_s is None or not attempt.roundtrips else cpu_s * 1e6 / attempt.roundtrips


def compare_sides(attempts: dict[str, list[Attempt]], names: dict[str, str],
                  profile_root: Path) -> dict[str, Any]:
    """Per side: the cell's and the healthy pair's top functions, and the largest differences between them with
    an interval from the rounds (paired: the rounds where both have a profile); the merged profiles saved as
    speedscope JSON and folded stacks. JSON-ready, with the merged Profile objects under "_merged" for drawing."""
    found: dict[str, Any] = {"pairs": names, "rounds": len(attempts[CELL]),
                             "window_s": None, "sides": {}, "files": [], "_merged": {}}
    windows = [a.elapsed_s for pair in attempts.values() for a in pair if a.ok and a.elapsed_s]
    found["window_s"] = round(statistics.median(windows), 3) if windows else None
    # each pair's rate under the profilers, median over its rounds: a profile's µs per roundtrip is at most
    # 1e6 / rate of any one side's thread (a roundtrip's wall time), however contended the host was
    found["roundtrips_per_s"] = {label: round(statistics.median(rates), 1) if rates else None
                                 for label, pair in attempts.items()
                                 for rates in [[a.roundtrips_per_s for a in pair if a.ok and a.roundtrips_per_s]]}
    for side in SIDES:
        cell = [side_profile(a, side) for a in attempts[CELL]]
        healthy = [side_profile(a, side) for a in attempts[HEALTHY]]
        rounds = [(c, h, a, b) for c, h, a, b in zip(cell, healthy, attempts[CELL], attempts[HEALTHY])
                  if isinstance(c, profiles.Profile) and isinstance(h, profiles.Profile)]
        paired = [(c, h) for c, h, _, _ in rounds]
        if not paired:
            reasons = sorted({why for why in cell + healthy if isinstance(why, str)})
            found["sides"][side] = {"note": "; ".join(reasons) or "no profile"}
            continue
        cell_profiles, healthy_profiles = [c for c, _ in paired], [h for _, h in paired]
        differences = profiles.difference(cell_profiles, healthy_profiles)[:TOP_FUNCTIONS]
        found["sides"][side] = {
            "rounds": len(paired),
            CELL: _pair_figures(cell_profiles, [v for _, _, a, _ in rounds if (v := measured_cpu_us(a, side))]),
            HEALTHY: _pair_figures(healthy_profiles, [v for _, _, _, b in rounds if (v := measured_cpu_us(b, side))]),
            "differences": [_difference_row(d) for d in differences],
            "interval": differences[0].interval_label() if differences else None}
        for label, side_profiles in ((CELL, cell_profiles), (HEALTHY, healthy_profiles)):
            whole = profiles.merged(side_profiles)
            found["_merged"][(label, side)] = whole
            stem = profile_root / f"{label}-{side}"
            profiles.write_speedscope_file(whole, stem.with_suffix(".speedscope.json"))
            stem.with_suffix(".folded.txt").write_text(profiles.to_collapsed(whole), encoding="utf-8")
            found["files"] += [str(stem.with_suffix(".speedscope.json")), str(stem.with_suffix(".folded.txt"))]
    return found


def _difference_row(found: profiles.FunctionDifference) -> dict[str, Any]:
    def bounds(interval) -> list[float] | None:
        return None if interval is None else [round(interval.low, 2), round(interval.high, 2)]

    return {"function": found.label, "self_us_cell": round(found.self_us_a, 2),
            "self_us_healthy": round(found.self_us_b, 2), "self_difference_us": round(found.self_difference_us, 2),
            "self_interval": bounds(found.self_interval), "total_difference_us": round(found.total_difference_us, 2),
            "total_interval": bounds(found.total_interval)}


def profile_verdict(comparison: dict[str, Any]) -> list[str]:
    """One sentence per profiled side naming where the cell spends more than the healthy pair; pure."""
    healthy = comparison["pairs"][HEALTHY]
    sentences = []
    for side in SIDES:
        figures = comparison["sides"].get(side) or {}
        if "note" in figures or not figures:
            continue
        more = [row for row in figures["differences"] if row["self_difference_us"] > 0]
        cpu_cell = figures[CELL]["sampled_cpu_us_per_roundtrip"]
        cpu_healthy = figures[HEALTHY]["sampled_cpu_us_per_roundtrip"]
        sentence = (f"profiles, {side} side: {cpu_cell:,.0f} µs of sampled CPU per roundtrip against "
                    f"{cpu_healthy:,.0f} with {healthy}")
        if more:
            named = ", ".join(f"{row['function']} +{row['self_difference_us']:,.1f} µs"
                              + (f" [{row['self_interval'][0]:,.1f}–{row['self_interval'][1]:,.1f}]"
                                 if row["self_interval"] else "") for row in more[:3])
            sentence += f"; most of the difference, by self time: {named}"
        sentences.append(sentence)
    return sentences


def saved(comparison: dict[str, Any]) -> dict[str, Any]:
    """The comparison as written to the diagnosis's JSON (without the Profile objects)."""
    return {key: value for key, value in comparison.items() if not key.startswith("_")}
