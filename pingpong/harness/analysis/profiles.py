"""CPU profiles of the two sides of a pair as figures per roundtrip: pure functions, but read/write_… at the end.

Formats read
- py-spy `record --format raw`: collapsed stacks, one line `frame;frame;frame COUNT`, root first, COUNT samples
  taken every interval_s. A Python frame `func (file.py:LINE)` becomes `func (file.py)`, so the samples of one
  function taken on different lines add up; every other frame (native ones with --native, `thread (0x…)` with
  --threads, `process …` with --subprocesses) is kept as it is. py-spy marks no sample as idle: record without
  --idle, so that only samples of threads on CPU are counted.
- V8 `.cpuprofile` (node --cpu-prof): a tree of nodes (id, callFrame{functionName, url, lineNumber}, children) and
  one node id per sample in `samples`; timeDeltas[i] is the µs from sample i−1 (from startTime for i = 0) to
  sample i. Convention: a sample lasts until the next one is taken, so sample i gets timeDeltas[i+1] µs and the
  last one endTime − its timestamp (as Chrome DevTools attributes them); a negative gap, which V8 can emit,
  counts as 0. A frame is `functionName (basename of url)`, "(anonymous)" for an empty name, the bare name for a
  frame without url ("(program)", "(garbage collector)"). hitCount is not used.

Stacks map (root, …, leaf) to the seconds sampled on CPU with that stack. Frames named "(root)" are removed and a
sample with an "(idle)" frame is dropped (off CPU); "(program)" (V8 busy outside JavaScript) and "(garbage
collector)" stay, being CPU the side spent. Frames are merged by label: two functions of one name in one file
are one function here.

Arithmetic
- per roundtrip: seconds × 10⁶ / roundtrips, the roundtrips completed in the sampled window: 100 samples of
  10 ms over 1000 roundtrips are 1 s / 1000 = 1000 µs per roundtrip.
- a function's self time is that of the stacks it ends; its total time that of the stacks it appears in, counted
  once per stack even where it recurses, so no total exceeds the sampled CPU.
- difference(a, b): in each round, a's µs per roundtrip minus b's (0 where a function is absent on one side);
  the median over the rounds, with stats.median_interval's distribution-free interval of that median (the range,
  with its real coverage, when rounds are few; none for one round).
Sampled time estimates CPU time: a function seen in k samples is known to about ±√k samples.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

from pingpong.harness.analysis.stats import MedianInterval, interval_label, median_interval

Stack = tuple[str, ...]  # (root, …, leaf), each frame a function label such as "recv (selector_events.py)"

SIDES = ("server", "client")
ROOT_FRAME = "(root)"  # V8's tree root: not a function, removed from every stack
IDLE_FRAME = "(idle)"  # V8's samples off CPU: dropped
ANONYMOUS_FUNCTION = "(anonymous)"
PY_SPY = "py-spy"
V8_CPU_PROFILER = "v8 cpu profiler"
DEFAULT_V8_INTERVAL_S = 0.001  # node --cpu-prof-interval's default, used when a profile has no gap to measure
SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
MICROSECONDS_PER_SECOND = 1_000_000
PYTHON_SOURCE_SUFFIXES = (".py", ".pyx", ".pyi", ".pyw")
COLLAPSED_SEPARATOR = ";"
UNRESOLVED_NATIVE_FRAME = "?"
PY_SPY_PROCESS_FRAME_PREFIX = "process "
# native calls that wait off CPU: a sample ending in one is not CPU the side spent
WAITING_NATIVE_CALLS = frozenset({"epoll_wait", "epoll_pwait", "epoll_pwait2", "clock_nanosleep", "nanosleep",
                                  "select", "__select", "pselect", "poll", "__poll", "ppoll", "futex_wait",
                                  "__futex_abstimed_wait_common", "__futex_abstimed_wait_common64",
                                  "pthread_cond_wait", "pthread_cond_timedwait", "sem_wait", "sem_timedwait",
                                  "__GI___poll"})


@dataclass(frozen=True)
class Profile:
    """One side's CPU samples over a window of a cell's run."""

    side: str  # "server" or "client"
    runtime: str  # "python", "node", …
    profiler: str  # e.g. "py-spy 0.4.0", "v8 cpu profiler"
    interval_s: float  # the sampling interval
    stacks: dict[Stack, float]  # (root, …, leaf) → seconds sampled on CPU with that stack
    roundtrips: int  # roundtrips completed in the sampled window
    wall_s: float  # the sampled window's length

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise ValueError(f"side is one of {SIDES}, not {self.side!r}")
        if self.interval_s <= 0 or self.wall_s < 0 or self.roundtrips < 0:
            raise ValueError("interval_s must be positive, wall_s and roundtrips not negative")
        if any(not stack or seconds < 0 for stack, seconds in self.stacks.items()):
            raise ValueError("every stack has at least one frame and seconds not negative")

    @property
    def sampled_s(self) -> float:
        """The seconds of CPU sampled in all stacks."""
        return sum(self.stacks.values())


@dataclass(frozen=True)
class FunctionCost:
    """One function's sampled CPU in a profile: self (as the leaf) and total (anywhere in the stack)."""

    label: str
    self_s: float
    total_s: float
    self_us_per_roundtrip: float
    total_us_per_roundtrip: float


@dataclass(frozen=True)
class FunctionDifference:
    """One function's µs per roundtrip in profiles a minus those in profiles b, paired by round.

    The *_a and *_b figures are each side's median over the rounds; the differences are medians of the per-round
    differences (not the difference of those medians), each with its interval (None for fewer than 2 rounds).
    """

    label: str
    rounds: int
    self_us_a: float
    self_us_b: float
    self_difference_us: float
    self_interval: MedianInterval | None
    total_us_a: float
    total_us_b: float
    total_difference_us: float
    total_interval: MedianInterval | None

    def interval_label(self) -> str:
        """How both intervals are named (from the same rounds): '95% CI (order stats, …)', 'range of 5 (…)'."""
        interval = self.self_interval
        if interval is None:
            return interval_label(None, None, self.rounds)
        return interval_label(interval.kind, interval.coverage, interval.n, ranks=interval.ranks)


def python_frame_label(frame: str) -> str:
    """'recv (selector_events.py:123)' → 'recv (selector_events.py)'; an unresolved native frame '0x7f… (libc.so.6)'
    → '? (libc.so.6)', so that the same library's unnamed frames add up across processes; else unchanged."""
    if not frame.endswith(")") or " (" not in frame:
        return frame
    function, _, location = frame[:-1].rpartition(" (")
    source, colon, line = location.rpartition(":")
    if colon and line.isdigit() and source.endswith(PYTHON_SOURCE_SUFFIXES):
        return f"{function} ({source})"
    if function.startswith("0x") and all(digit in "0123456789abcdef" for digit in function[2:].lower()):
        return f"{UNRESOLVED_NATIVE_FRAME} ({location})"
    return frame


def py_spy_stack(frames: list[str]) -> Stack | None:
    """A py-spy sample's stack as the side's CPU: the 'process PID:"command"' frame that --subprocesses puts first is
    dropped (a side's processes add up, and a pid or a port differs from round to round), and a sample whose leaf
    is a call that waits (epoll_wait, a sleep, a futex) is dropped as off CPU: py-spy's idle detection misses
    some with --native."""
    if frames and frames[0].startswith(PY_SPY_PROCESS_FRAME_PREFIX):
        frames = frames[1:]
    stack = on_cpu_stack(python_frame_label(frame) for frame in frames)
    if stack is None:
        return None
    function, _, location = stack[-1].rstrip(")").partition(" (")
    if function in WAITING_NATIVE_CALLS and not location.endswith(PYTHON_SOURCE_SUFFIXES):
        return None
    return stack


def v8_frame_label(call_frame: Mapping[str, Any]) -> str:
    """'onMessage (ws_server.js)' from a V8 callFrame; '(anonymous)' for no name; the bare name without a url."""
    name = call_frame.get("functionName") or ANONYMOUS_FUNCTION
    url = str(call_frame.get("url") or "").rstrip("/")
    if not url:
        return name
    return f"{name} ({url.rsplit('/', 1)[-1]})"


def on_cpu_stack(frames: Iterable[str]) -> Stack | None:
    """The stack without '(root)' frames; None for a sample off CPU (an '(idle)' frame) or with no frame left."""
    stack = tuple(frame for frame in frames if frame and frame != ROOT_FRAME)
    if not stack or IDLE_FRAME in stack:
        return None
    return stack


def parse_collapsed(text: str, interval_s: float, *, side: str, roundtrips: int, wall_s: float,
                    runtime: str = "python", profiler: str = PY_SPY) -> Profile:
    """A profile from py-spy's raw output (collapsed stacks, root first, one `frames COUNT` a line).

    Seconds of a stack = its samples (added up over lines that become one stack) × interval_s.
    """
    counts: dict[Stack, int] = defaultdict(int)
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line:
            continue
        frames, _, count = line.rpartition(" ")
        if not frames or not count.isdigit():
            raise ValueError(f"line {number} is not 'frame;frame COUNT': {line!r}")
        stack = py_spy_stack(frames.split(COLLAPSED_SEPARATOR))
        if stack is not None:
            counts[stack] += int(count)
    stacks = {stack: count * interval_s for stack, count in counts.items()}
    return Profile(side=side, runtime=runtime, profiler=profiler, interval_s=interval_s, stacks=stacks,
                   roundtrips=roundtrips, wall_s=wall_s)


def parse_cpuprofile(data: Mapping[str, Any], *, side: str, roundtrips: int, wall_s: float | None = None,
                     interval_s: float | None = None, runtime: str = "node",
                     profiler: str = V8_CPU_PROFILER, window_us: tuple[float, float] | None = None) -> Profile:
    """A profile from V8's .cpuprofile JSON (already loaded); sample i lasts timeDeltas[i+1] µs (see the top).

    wall_s defaults to endTime − startTime; interval_s to the median positive gap between samples. window_us, on
    the profile's own clock (startTime's), keeps only the samples taken inside it: a profile of a process's whole
    life (bun --cpu-prof) cut to the measured window.
    """
    nodes = {node["id"]: node for node in data["nodes"]}
    parent_of = {child: node_id for node_id, node in nodes.items() for child in node.get("children", ())}
    samples: list[int] = list(data.get("samples", ()))
    deltas_us: list[float] = list(data.get("timeDeltas", ()))
    if len(samples) != len(deltas_us):
        raise ValueError(f"{len(samples)} samples but {len(deltas_us)} timeDeltas")
    start_us, end_us = data["startTime"], data["endTime"]
    durations_us = [max(0.0, gap) for gap in deltas_us[1:]]  # sample i lasts until sample i+1 …
    if samples:
        durations_us.append(max(0.0, end_us - (start_us + sum(deltas_us))))  # … and the last one until endTime
    stack_of_node: dict[int, Stack | None] = {}

    def stack_of(node_id: int) -> Stack | None:
        if node_id not in stack_of_node:
            frames: list[str] = []
            current: int | None = node_id
            while current is not None:
                frames.append(v8_frame_label(nodes[current].get("callFrame", {})))
                current = parent_of.get(current)
            stack_of_node[node_id] = on_cpu_stack(reversed(frames))
        return stack_of_node[node_id]

    microseconds: dict[Stack, float] = defaultdict(float)
    taken_us = start_us
    for node_id, delta_us, duration_us in zip(samples, deltas_us, durations_us):
        taken_us += delta_us
        if window_us is not None and not window_us[0] <= taken_us < window_us[1]:
            continue
        stack = stack_of(node_id)
        if stack is not None:
            microseconds[stack] += duration_us
    positive_gaps = [gap for gap in deltas_us if gap > 0]
    if interval_s is None:
        interval_s = (statistics.median(positive_gaps) / MICROSECONDS_PER_SECOND if positive_gaps
                      else DEFAULT_V8_INTERVAL_S)
    if wall_s is None:
        wall_s = (end_us - start_us) / MICROSECONDS_PER_SECOND
    stacks = {stack: us / MICROSECONDS_PER_SECOND for stack, us in microseconds.items()}
    return Profile(side=side, runtime=runtime, profiler=profiler, interval_s=interval_s, stacks=stacks,
                   roundtrips=roundtrips, wall_s=wall_s)


def us_per_roundtrip(profile: Profile, seconds: float) -> float:
    """seconds of the profile's window as µs per roundtrip completed in it; ValueError when none completed."""
    if profile.roundtrips < 1:
        raise ValueError("a profile with no roundtrip has no figure per roundtrip")
    return seconds * MICROSECONDS_PER_SECOND / profile.roundtrips


def sampled_cpu_us_per_roundtrip(profile: Profile) -> float:
    """All the CPU sampled (every stack) in µs per roundtrip."""
    return us_per_roundtrip(profile, profile.sampled_s)


def function_costs(profile: Profile) -> list[FunctionCost]:
    """Every function's self and total time, largest self first (then largest total, then label)."""
    self_s: dict[str, float] = defaultdict(float)
    total_s: dict[str, float] = defaultdict(float)
    for stack in sorted(profile.stacks):  # a fixed order of addition: the same sums whatever the dict's order
        seconds = profile.stacks[stack]
        self_s[stack[-1]] += seconds
        for label in set(stack):  # once per stack, however often it recurses
            total_s[label] += seconds
    costs = [FunctionCost(label=label, self_s=self_s.get(label, 0.0), total_s=total,
                          self_us_per_roundtrip=us_per_roundtrip(profile, self_s.get(label, 0.0)),
                          total_us_per_roundtrip=us_per_roundtrip(profile, total))
             for label, total in total_s.items()]
    return sorted(costs, key=lambda cost: (-cost.self_s, -cost.total_s, cost.label))


def top(profile: Profile, n: int, by: Literal["self", "total"] = "self") -> list[FunctionCost]:
    """The n functions with the most self (or total) time."""
    if by not in ("self", "total"):
        raise ValueError(f"by is 'self' or 'total', not {by!r}")
    costs = function_costs(profile)
    if by == "total":
        costs.sort(key=lambda cost: (-cost.total_s, -cost.self_s, cost.label))
    return costs[:n]


def difference(profiles_a: list[Profile], profiles_b: list[Profile]) -> list[FunctionDifference]:
    """Each function's µs per roundtrip in a minus b, round by round (profiles_a[i] and profiles_b[i] are round i).

    Sorted by the absolute median self difference, largest first (then absolute total difference, then label).
    """
    if len(profiles_a) != len(profiles_b) or not profiles_a:
        raise ValueError(f"one profile per round on each side: {len(profiles_a)} against {len(profiles_b)}")
    for a, b in zip(profiles_a, profiles_b):
        if a.side != b.side:
            raise ValueError(f"a round pairs a {a.side} profile with a {b.side} one")

    def by_label(profile: Profile) -> dict[str, FunctionCost]:
        return {cost.label: cost for cost in function_costs(profile)}

    rounds_a = [by_label(profile) for profile in profiles_a]
    rounds_b = [by_label(profile) for profile in profiles_b]
    labels = sorted({label for costs in rounds_a + rounds_b for label in costs})
    differences = [_function_difference(label, rounds_a, rounds_b) for label in labels]
    return sorted(differences, key=lambda found: (-abs(found.self_difference_us), -abs(found.total_difference_us),
                                                  found.label))


def _function_difference(label: str, rounds_a: list[dict[str, FunctionCost]],
                         rounds_b: list[dict[str, FunctionCost]]) -> FunctionDifference:
    absent = FunctionCost(label, 0.0, 0.0, 0.0, 0.0)
    costs_a = [costs.get(label, absent) for costs in rounds_a]
    costs_b = [costs.get(label, absent) for costs in rounds_b]
    self_a = [cost.self_us_per_roundtrip for cost in costs_a]
    self_b = [cost.self_us_per_roundtrip for cost in costs_b]
    total_a = [cost.total_us_per_roundtrip for cost in costs_a]
    total_b = [cost.total_us_per_roundtrip for cost in costs_b]
    self_differences = [a - b for a, b in zip(self_a, self_b)]
    total_differences = [a - b for a, b in zip(total_a, total_b)]
    return FunctionDifference(label=label, rounds=len(costs_a), self_us_a=statistics.median(self_a),
                              self_us_b=statistics.median(self_b),
                              self_difference_us=statistics.median(self_differences),
                              self_interval=median_interval(self_differences),
                              total_us_a=statistics.median(total_a), total_us_b=statistics.median(total_b),
                              total_difference_us=statistics.median(total_differences),
                              total_interval=median_interval(total_differences))


def profile_name(profile: Profile) -> str:
    """'server (python, py-spy 0.4.0)': how a profile is named in exports."""
    return f"{profile.side} ({profile.runtime}, {profile.profiler})"


def to_speedscope(profile: Profile) -> dict[str, Any]:
    """A speedscope file (one 'sampled' profile, weights in seconds), stacks in sorted order, frames as first met."""
    frame_index: dict[str, int] = {}
    samples: list[list[int]] = []
    weights: list[float] = []
    for stack in sorted(profile.stacks):
        samples.append([frame_index.setdefault(label, len(frame_index)) for label in stack])
        weights.append(profile.stacks[stack])
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "name": profile_name(profile),
        "exporter": "pingpong",
        "activeProfileIndex": 0,
        "shared": {"frames": [{"name": label} for label in frame_index]},
        "profiles": [{"type": "sampled", "name": profile_name(profile), "unit": "seconds", "startValue": 0,
                      "endValue": sum(weights), "samples": samples, "weights": weights}],
    }


def to_collapsed(profile: Profile) -> str:
    """Brendan Gregg's folded stacks, sorted, weights in whole µs; stacks under 0.5 µs are left out and a ';' in
    a label is written ':' so that each line stays one stack."""
    lines = []
    for stack in sorted(profile.stacks):
        microseconds = round(profile.stacks[stack] * MICROSECONDS_PER_SECOND)
        if microseconds > 0:
            frames = COLLAPSED_SEPARATOR.join(label.replace(COLLAPSED_SEPARATOR, ":") for label in stack)
            lines.append(f"{frames} {microseconds}\n")
    return "".join(lines)


def read_profile_file(path: Path, *, side: str, roundtrips: int, wall_s: float | None = None,
                      interval_s: float | None = None, runtime: str | None = None,
                      profiler: str | None = None, window_us: tuple[float, float] | None = None) -> Profile:
    """A .cpuprofile (V8, Bun), or a folder holding one (bun --cpu-prof names its file itself), or any other file
    as py-spy's collapsed stacks, which need interval_s and wall_s. window_us: see parse_cpuprofile."""
    if Path(path).is_dir():
        found = sorted(Path(path).glob("*.cpuprofile"))
        if len(found) != 1:
            raise ValueError(f"{path} holds {len(found)} .cpuprofile files; one was expected (did the process exit?)")
        path = found[0]
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix == ".cpuprofile":
        return parse_cpuprofile(json.loads(text), side=side, roundtrips=roundtrips, wall_s=wall_s,
                                interval_s=interval_s, runtime=runtime or "node", profiler=profiler or V8_CPU_PROFILER,
                                window_us=window_us)
    if interval_s is None or wall_s is None:
        raise ValueError(f"{path}: collapsed stacks carry neither their interval nor their window; give both")
    return parse_collapsed(text, interval_s, side=side, roundtrips=roundtrips, wall_s=wall_s,
                           runtime=runtime or "python", profiler=profiler or PY_SPY)


def write_speedscope_file(profile: Profile, path: Path) -> None:
    """The profile as a speedscope JSON file (open it at speedscope.app or with `speedscope FILE`)."""
    Path(path).write_text(json.dumps(to_speedscope(profile), indent=1) + "\n", encoding="utf-8")


def merged(profiles: list[Profile]) -> Profile:
    """Several windows' profiles of one side as one: their stacks' seconds, roundtrips and windows added up."""
    if not profiles:
        raise ValueError("nothing to merge")
    stacks: dict[Stack, float] = defaultdict(float)
    for profile in profiles:
        for stack, seconds in profile.stacks.items():
            stacks[stack] += seconds
    first = profiles[0]
    return Profile(side=first.side, runtime=first.runtime, profiler=first.profiler, interval_s=first.interval_s,
                   stacks=dict(stacks), roundtrips=sum(p.roundtrips for p in profiles),
                   wall_s=sum(p.wall_s for p in profiles))


@dataclass(frozen=True)
class MedianCost:
    """A function's µs per roundtrip in one pair's profiles of one side: the medians over the rounds."""

    label: str
    self_us_per_roundtrip: float
    total_us_per_roundtrip: float


def median_costs(profiles: list[Profile]) -> list[MedianCost]:
    """Each function's median self and total µs per roundtrip over rounds (0 in a round it is absent from), by
    self, largest first."""
    rounds = [{cost.label: cost for cost in function_costs(profile)} for profile in profiles]
    labels = sorted({label for costs in rounds for label in costs})
    found = [MedianCost(label,
                        statistics.median(costs[label].self_us_per_roundtrip if label in costs else 0.0
                                          for costs in rounds),
                        statistics.median(costs[label].total_us_per_roundtrip if label in costs else 0.0
                                          for costs in rounds))
             for label in labels]
    return sorted(found, key=lambda cost: (-cost.self_us_per_roundtrip, -cost.total_us_per_roundtrip, cost.label))
