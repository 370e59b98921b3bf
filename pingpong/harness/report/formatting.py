"""The formatting every report shares: a run's axes and headline figure, rates, durations, ratios and differences
with their intervals, the two spreads' names (CV, ±), the WebSocket cost's wording, the workload's unit and title,
a sweep point's label. Pure functions; no exporter is imported here, so every exporter (markdown, csv_rows,
terminal, html, plots, sweep, workloads) can import this module."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from pingpong.harness.analysis.excess import Excess, flagged_excess
from pingpong.harness.analysis.stats import Difference, Ratio, paired_ratio, percent
from pingpong.harness.analysis.summary import SIDES, CellSummary, Summaries, workload_kind
from pingpong.harness.analysis.time_budget import TimeBudget
from pingpong.harness.results.records import RunResult
from pingpong.harness.settings.round_policy import OLD_ROUND_RULE


def axes(run: RunResult) -> tuple[list[str], list[str]]:
    """Servers (rows) and clients (columns) in the order the run first met them."""
    servers: list[str] = []
    clients: list[str] = []
    for cell in run.cells:
        if cell.server not in servers:
            servers.append(cell.server)
        if cell.client not in clients:
            clients.append(cell.client)
    return servers, clients


def axis_loops(summaries: Summaries) -> tuple[dict[str, str], dict[str, str]]:
    """The event loop each server (row) and each client (column) reported running on in its measured cells.

    A name that ran on more than one loop in the run (it reported different ones in different cells) gets them
    all, 'asyncio/uvloop'; one that never reported its loop, or was never measured, gets none.
    """
    found: tuple[dict[str, set[str]], dict[str, set[str]]] = ({}, {})
    for (server, client), summary in summaries.items():
        if not summary.measured:
            continue
        for names, name, loop in ((found[0], server, summary.server_loop), (found[1], client, summary.client_loop)):
            if loop:
                names.setdefault(name, set()).add(loop)
    servers, clients = ({name: "/".join(sorted(loops)) for name, loops in side.items()} for side in found)
    return servers, clients


def with_loop(name: str, loops: dict[str, str]) -> str:
    """'sanic (uvloop)': a row's or column's name with the loop it ran on, or the name alone when not known."""
    return f"{name} ({loops[name]})" if name in loops else name


def format_rate(value: float) -> str:
    return f"{value:,.0f}"


def format_duration_ns(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 1e9:
        return f"{value / 1e9:.2f} s"
    if value >= 1e6:
        return f"{value / 1e6:.2f} ms"
    return f"{value / 1e3:.0f} µs"


def matrix_cell_text(summary: CellSummary) -> str:
    """'3,712 CV 1.2% · p99 410 µs', with '(noisy)' past the noise threshold and failures spelled out."""
    status = summary.status
    if status == "skipped":
        return "—"
    if not summary.measured:
        first = (summary.failures or ("no attempt",))[0]
        return f"FAILED ({first.split(': ')[1] if ': ' in first else first})"
    rates = summary.roundtrips_per_s
    text = format_rate(rates.median)
    if rates.cv is not None:
        text += f" {cv_text(rates.cv)}"
    if summary.latency is not None and summary.latency.count:
        text += f" · p99 {format_duration_ns(summary.latency.p99_ns)}"
    if summary.noisy:
        text += " (noisy)"
    if summary.compression_negotiated:
        text += " ᶻ"
    if summary.flags:
        text += " ⚑"
    if summary.unsettled:
        text += " ᵐ"
    if status == "partial":
        text += f" ({len(summary.failures)} failed)"
    return text


def is_floor(run: RunResult, server: str) -> bool:
    """Whether a server is a raw-TCP floor (the same relay without WebSocket), as the run's manifest says."""
    return run.implementations.get("server", {}).get(server, {}).get("protocol") == "raw-tcp"


# The manifest set of the protocol's own floor (c-ws-floor: RFC 6455 in C with no library): WebSocket programs, so
# they pair with every other, but a floor, not a contender.
PROTOCOL_FLOOR_SET = "protocol-floor"


def is_protocol_floor(run: RunResult, role: str, name: str) -> bool:
    """Whether a server or client is the protocol's floor (manifest set "protocol-floor"), as the run records it."""
    return PROTOCOL_FLOOR_SET in (run.implementations.get(role, {}).get(name, {}).get("sets") or ())


def is_contender(run: RunResult, key: tuple[str, str]) -> bool:
    """Whether a (server, client) pair is ranked: neither a raw-TCP floor nor with the protocol floor on a side."""
    server, client = key
    return not (is_floor(run, server) or is_protocol_floor(run, "server", server)
                or is_protocol_floor(run, "client", client))


def fastest_cell(run: RunResult, summaries: Summaries) -> tuple[str, str] | None:
    """The fastest measured WebSocket pair (the floors are not contenders); None when none was measured."""
    measured = [(s.roundtrips_per_s.median, key) for key, s in summaries.items()
                if s.measured and is_contender(run, key)]
    return max(measured)[1] if measured else None


def floors(run: RunResult, summaries: Summaries) -> list[tuple[tuple[str, str], float]]:
    """The measured raw-TCP floor cells and their median rates, in the run's order."""
    return [(key, s.roundtrips_per_s.median) for key, s in summaries.items() if s.measured and is_floor(run, key[0])]


def relative_to_fastest(run: RunResult, summaries: Summaries) -> dict[tuple[str, str], Ratio]:
    """Each measured cell's rate over the fastest cell's: the median of the per-round ratios, with its interval.

    A run measures every cell once per round, so a cell and the fastest are paired by round (stats.paired_ratio);
    a cell with no good round in common with the fastest is left out.
    """
    fastest = fastest_cell(run, summaries)
    if fastest is None:
        return {}
    reference = run.cell(*fastest).rates_by_round()
    return {(cell.server, cell.client): paired_ratio(cell.rates_by_round(), reference)
            for cell in run.cells if cell.rates_by_round().keys() & reference.keys()}


def usual_label(ratios: Iterable[Ratio | Difference]) -> str | None:
    """The label most of these ratios' intervals have (a table states it once); None when none has an interval."""
    labels = Counter(ratio.label() for ratio in ratios if ratio.low is not None)
    return labels.most_common(1)[0][0] if labels else None


def interval_legend(ratios: Iterable[Ratio | Difference]) -> str:
    """What a table's brackets are, with their coverage; brackets that differ (from another number of values)
    carry their own."""
    ratios = list(ratios)
    usual = usual_label(ratios)
    if usual is None:
        return "no intervals (one value each)"
    others = sum(ratio.low is not None and ratio.label() != usual for ratio in ratios)
    return f"brackets: {usual}" + (f"; {others} bracket(s) from another number of values give their own coverage"
                                   if others else "")


def format_ratio(ratio: Ratio, usual: str | None = None) -> str:
    """'0.95× [0.90–1.00]'; the bracket names its coverage when its label is not the table's usual one."""
    if ratio.low is None:
        return f"{ratio.value:.2f}×"
    own = f", {ratio.coverage_text()}" if ratio.label() != usual else ""
    return f"{ratio.value:.2f}× [{ratio.low:.2f}–{ratio.high:.2f}{own}]"


REFERENCE_TEXT = "(reference)"  # the cell others are divided by: its ratio to itself is 1 by construction


def format_ratio_to_reference(ratio: Ratio, usual: str | None = None, reference: bool = False) -> str:
    """format_ratio, but the reference cell itself reads '1.00× (reference)': no interval of its own."""
    return f"{ratio.value:.2f}× {REFERENCE_TEXT}" if reference else format_ratio(ratio, usual)


# The two spreads the reports show, named apart everywhere: "CV" is always the rounds' coefficient of variation
# (standard deviation / mean); "±" is always an interval's larger half-width over its median (a cell's precision).
CV_MEANING = "CV = the rounds' coefficient of variation (standard deviation / mean)"
HALF_WIDTH_MEANING = "±x% = the larger half-width of the median's interval, over the median"


def cv_text(cv: float | None) -> str:
    """'CV 4.1%': the coefficient of variation, never written with '±'; '–' when there is none."""
    return "–" if cv is None else f"CV {cv * 100:.1f}%"


def half_width_text(precision: float | None, coverage: float | None = None) -> str:
    """'±2.8%', or '±2.8% (96.9%)' with the interval's coverage: the one thing '±' means; '–' when there is none."""
    if precision is None:
        return "–"
    return f"±{precision:.1%}" + (f" ({percent(coverage)})" if coverage is not None else "")


def format_us(value: float) -> str:
    """A difference in µs with its sign, to 0.1 µs below 10: '+30', '-8.2', '+0.4', '0'."""
    text = f"{value:+.1f}" if abs(value) < 9.95 else f"{value:+.0f}"
    return "0" if text in ("-0.0", "+0.0") else text


def format_difference(difference: Difference, usual: str | None = None) -> str:
    """'+30 µs [+27, +33]'; the bracket names its coverage when its label is not the table's usual one."""
    if difference.low is None:
        return f"{format_us(difference.value)} µs"
    own = f", {difference.coverage_text()}" if difference.label() != usual else ""
    return f"{format_us(difference.value)} µs [{format_us(difference.low)}, {format_us(difference.high)}{own}]"


# The WebSocket cost (analysis/costs.py), µs per roundtrip beyond the floors: (CostSplit field, name, meaning), in
# the order they add up: server part + client part + other = end to end.
COST_PARTS = (
    ("server", "server part", "the WebSocket server's CPU µs per roundtrip less the server's in its two runtimes' "
                              "raw-TCP floors paired"),
    ("client", "client part", "the WebSocket client's CPU µs per roundtrip less the client's in the same floor pair"),
    ("other", "other", "end to end less both parts: the roundtrip's time outside either side's CPU (wake-ups, the "
                       "kernel's path between them) beyond the floors', less the CPU both sides spend at once on "
                       "their two CPUs (work off the roundtrip's path); below 0 when that overlap grew more"),
    ("end_to_end", "end to end", "the cell's roundtrip time (1e6 / its rate) less that of the same floor pair"),
)
NEGATIVE_COST_TEXT = ("A figure below 0 is shown as such: for a part, the floor spent more CPU per roundtrip than the "
                      "WebSocket side in this run (for end to end, the floors' roundtrip was the longer); when its "
                      "interval holds 0 it cannot be told from no cost.")


def rounds_text(run: RunResult) -> str:
    """How many rounds the run measured and how: '6–20 rounds, every cell alike while a round fits in 290 s
    (stopped: budget; measured against ±3%), one server process per round, order seed 7' (what stopped them: the
    run's rounds_outcome); files of the older rule say 'until ±3%'; older files, without a rounds record: '3
    repeats'."""
    rounds = run.configuration.get("rounds")
    repeat = run.configuration.get("repeat")
    if not rounds:
        return f"{repeat} repeat{'s' if repeat != 1 else ''}"
    stopped_by = run.rounds_outcome.stopped_by if run.rounds_outcome else None
    budget = f" within {rounds['budget_s']:g} s" if rounds.get("budget_s") is not None else ""
    if rounds.get("precision") is not None and rounds.get("rule", OLD_ROUND_RULE) == OLD_ROUND_RULE:
        text = (f"{rounds['min_rounds']}–{rounds['max_rounds']} rounds until ±{rounds['precision']:.1%}{budget}"
                + (f" (stopped: {stopped_by})" if stopped_by else "") + " (the older rule: its intervals cover "
                "less than they say)")
    elif rounds["max_rounds"] > rounds["min_rounds"]:
        target = f"; measured against ±{rounds['precision']:.1%}" if rounds.get("precision") is not None else ""
        text = (f"{rounds['min_rounds']}–{rounds['max_rounds']} rounds, every cell alike while a round fits{budget}"
                + (f" (stopped: {stopped_by}{target})" if stopped_by else f" ({target[2:]})" if target else ""))
    else:
        text = f"{rounds['min_rounds']} round{'s' if rounds['min_rounds'] != 1 else ''}"
    return (text + (", a fresh server per attempt" if rounds.get("fresh_server") else
                    ", one server process per server and round") + f", order seed {rounds.get('seed')}")


# Per workload kind (summary.workload_kind): the unit of a cell's rate, the report's title, what its latency times.
WORKLOAD_TEXTS = {
    "pingpong": ("roundtrips/s", "WebSocket ping-pong: roundtrips per second", "roundtrip"),
    "handshake": ("handshakes/s", "WebSocket handshakes: connections opened, one roundtrip, closed, per second",
                  "handshake-cycle"),
    "broadcast": ("deliveries/s", "WebSocket broadcast: messages delivered per second (one sender, each message to "
                                  "every receiver before the next)", "to-the-last-receiver"),
    "open-loop": ("answered/s", "WebSocket open-loop ping-pong: latency and roundtrips answered at a fixed offered "
                                "rate", "from-the-intended-send-time"),
}


def unit_for_kind(kind: str) -> str:
    return WORKLOAD_TEXTS.get(kind, WORKLOAD_TEXTS["pingpong"])[0]


def workload_title(config: dict) -> str:
    """The report's title: the workload, with its receivers, offered rate or idle connections."""
    kind = workload_kind(config)
    title = WORKLOAD_TEXTS.get(kind, WORKLOAD_TEXTS["pingpong"])[1]
    details = []
    if kind == "broadcast":
        details.append(f"{config.get('receivers', 1)} receivers")
    if kind == "open-loop":
        details.append(f"{config['rate']:g} messages/s offered per pair")
    if config.get("idle_connections"):
        details.append(f"{config['idle_connections']:,} idle connections held")
    return title + (f" ({'; '.join(details)})" if details else "")


def latency_name(config: dict) -> str:
    return WORKLOAD_TEXTS.get(workload_kind(config), WORKLOAD_TEXTS["pingpong"])[2]


def rate_unit(run: RunResult) -> str:
    return unit_for_kind(workload_kind(run.configuration))


class Headline:
    """What a matrix shows per cell for the run's workload: its rate (roundtrips, handshakes or deliveries per
    second), or, in an open loop, where every cell answers the rate it is offered, the p99 latency from the intended
    send time at that rate. The terminal, the HTML heat map and the PNG heat map all show this one figure."""

    def __init__(self, run: RunResult) -> None:
        config = run.configuration
        self.kind = workload_kind(config)
        self.latency = self.kind == "open-loop"
        self.unit = "p99" if self.latency else rate_unit(run)
        self.higher_is_better = not self.latency
        self.label = (f"p99 latency from the intended send time at {config.get('rate', 0):g} messages/s offered "
                      "per pair" if self.latency else f"median {self.unit}")

    def value(self, summary: CellSummary | None) -> float | None:
        """The figure of a measured cell (ns for a latency), None otherwise."""
        if summary is None or not summary.measured:
            return None
        if self.latency:
            return summary.latency.p99_ns if summary.latency is not None and summary.latency.count else None
        return summary.roundtrips_per_s.median

    def short(self, value: float) -> str:
        """The figure in at most 6 characters: '7.3k', '6.9ms', '412µs'."""
        if not self.latency:
            return short_rate(value)
        if value >= 1e9:
            return f"{value / 1e9:.1f}s"
        if value >= 1e6:
            return f"{value / 1e6:.1f}ms" if value < 99.95e6 else f"{value / 1e6:.0f}ms"
        return f"{value / 1e3:.0f}µs"

    def long(self, value: float) -> str:
        return format_duration_ns(value) if self.latency else format_rate(value)


def short_rate(value: float) -> str:
    """A rate in at most 5 characters: 850, 7.3k, 23.1k, 231k, 1.23M."""
    if value < 999.5:
        return f"{value:.0f}"
    if value < 99_950:
        return f"{value / 1e3:.1f}k"
    if value < 999_500:
        return f"{value / 1e3:.0f}k"
    return f"{value / 1e6:.2f}M"


def switches_text(environment: dict[str, Any]) -> str:
    """The measurement switches a run had set (environment.measurement_switches), as a sentence; "" when none."""
    switches = environment.get("measurement_switches") or {}
    if not switches:
        return ""
    named = ", ".join(f"{name}={value}" for name, value in sorted(switches.items()))
    return f" Measurement switches set: {named}."


def topology_line(cluster: dict[str, Any]) -> str:
    """Where a --cluster run's sides ran, the link between them, and the raw-TCP floor's round trip across it (a
    run's topology)."""
    hosts = cluster.get("hosts") or []

    def named(role: str) -> str:
        return ", ".join(f"{host['address']} ({host.get('hostname')})" for host in hosts if host["role"] == role)
    floor = cluster.get("floor") or {}
    floor_text = (f"raw-TCP floor across it {floor['p50_us']:g} µs p50 round trip "
                  f"({floor['roundtrips_per_s']:,.0f} roundtrips/s)" if "p50_us" in floor
                  else f"raw-TCP floor not measured ({floor.get('error')})")
    return (f"Cluster {cluster.get('scheduler')}: servers on {named('server')}; clients on {named('client')}; "
            f"link {cluster.get('link')}; {floor_text}.")


NODELAY_TEXT = {True: "on", False: "OFF", None: "?"}


def faults_text(summary) -> str:
    """Minor page faults per roundtrip, server/client ('?' for a side not sampled)."""
    values = (summary.cpu(side).minor_faults_per_roundtrip for side in ("server", "client"))
    return "/".join("?" if value is None else f"{value:.2f}" for value in values)


def time_budgets(summaries: Summaries) -> list[tuple[tuple[str, str], str, TimeBudget]]:
    """Every measured side's time budget: ((server, client), side, budget), cells in the summaries' order."""
    return [(key, side, budget) for key, summary in summaries.items() for side in SIDES
            if summary.measured and (budget := summary.time_budget(side)) is not None]


def time_budget_text(budget: TimeBudget) -> str:
    """A side's budget on one line: '412 µs = main thread 110.0 + run delay 5.0 + blocked 297; other threads 10.1
    beside it; CPU user 80.1 + system 40.0; switches 1.02 voluntary, 0.02 involuntary per roundtrip'. Files from
    before the threads' split: '412 µs = user 80.1 + system 40.0 + run delay 5.0 + blocked 287; ...'."""
    cpu = (f"CPU {budget.cpu_us:.1f} (no user/system split)" if budget.user_us is None
           else f"user {budget.user_us:.1f} + system {budget.system_us:.1f}")
    switches = (f"switches {budget.voluntary_switches:.2f} voluntary, {budget.involuntary_switches:.2f} involuntary "
                f"per roundtrip")
    if budget.main_thread_cpu_us is None:
        return (f"{budget.roundtrip_us:.1f} µs = {cpu} + run delay {budget.run_delay_us:.1f} + blocked "
                f"{budget.blocked_us:.1f}; {switches}")
    return (f"{budget.roundtrip_us:.1f} µs = main thread {budget.main_thread_cpu_us:.1f} + run delay "
            f"{budget.run_delay_us:.1f} + blocked {budget.blocked_us:.1f}; other threads "
            f"{budget.other_threads_cpu_us:.1f} beside it; all threads' CPU {budget.cpu_us:.1f}"
            f"{'' if budget.user_us is None else f' = {cpu}'}; {switches}")


def percentiles(latency) -> tuple[int | None, ...]:
    """p50, p90, p99, p99.9 and max in ns of a summary.Latency; all None when nothing was recorded."""
    if latency is None:
        return (None,) * 5
    return (latency.p50_ns, latency.p90_ns, latency.p99_ns, latency.p99_9_ns, latency.max_ns)


def short_extensions(extensions: str | None) -> str:
    """'permessage-deflate; server_max_window_bits=12; ...' as 'deflate (server_max_window_bits=12, ...)'."""
    if not extensions:
        return "none"
    name, *parameters = [part.strip() for part in extensions.split(";")]
    name = "deflate" if name == "permessage-deflate" else name
    return f"{name} ({', '.join(parameters)})" if parameters else name


def format_optional(value: float | None, pattern: str) -> str:
    """The value in the pattern, or '–' when there is none."""
    return "–" if value is None else pattern.format(value)


def point_label(entry: dict[str, Any], swept: list[str]) -> str:
    """A sweep point by its swept settings: '1024 B, loop uvloop', '10 pairs', '2000/s offered'."""
    parts = []
    for dimension in swept:
        value = entry[dimension]
        parts.append(f"{value} B" if dimension == "payload_size" else
                     f"{value} pair{'s' if value != 1 else ''}" if dimension == "pairs" else
                     ("TLS" if value else "plain") if dimension == "tls" else
                     f"loop {value}" if dimension == "loop" else
                     f"compression {value}" if dimension == "compression" else
                     f"malloc {value}" if dimension == "malloc" else
                     f"young generation {value}" if dimension == "young_generation" else
                     f"placement {value}" if dimension == "placement" else
                     f"room placement {value}" if dimension == "room_placement" else
                     f"interpreter {value}" if dimension == "python" else
                     f"{value} worker{'s' if value != 1 else ''}" if dimension == "workers" else
                     f"{value} receiver{'s' if value != 1 else ''}" if dimension == "receivers" else
                     f"{value:,} idle" if dimension == "idle_connections" else
                     ("closed loop" if value is None else f"{value:g}/s offered") if dimension == "rate" else
                     str(value))
    return ", ".join(parts) or "—"


def interpreter_text(config: dict[str, Any], env: dict[str, Any]) -> str | None:
    """With --python: what the Python implementations ran on, how its environment took the pins, what did not
    install, and a JIT's warm-up; None otherwise (they ran on the orchestrator's own, named on the Machine line)."""
    asked = config.get("python")
    if not asked:
        return None
    environment = ((env.get("package_environments") or {}).get("python_by_interpreter") or {}).get(asked) or {}
    interpreter = environment.get("interpreter") or {}
    parts = [f"the Python implementations ran on {interpreter.get('label', asked)} (--python {asked})"]
    if environment.get("policy") == "pins as ceilings":
        parts.append("requirements.txt's pins as ceilings (the newest release up to each that installs on it)")
    if environment.get("failed"):
        parts.append(f"not installed on it: {', '.join(sorted(environment['failed']))}")
    if config.get("python_jit_warmup_s"):
        parts.append(f"its sides warm up at least {config['python_jit_warmup_s']:g} s for its JIT")
    return "; ".join(parts)


def per_worker_text(config: dict[str, Any]) -> str:
    """" (P per worker, --load-per-worker)" when the run's load was given per worker, else ""."""
    workers = int(config.get("workers") or 1)
    if not config.get("load_per_worker"):
        return ""
    return f" ({config.get('pairs', 1) // workers} per worker, --load-per-worker)"


def young_generation_text(config: dict[str, Any]) -> str:
    """The settings line's words on V8's young generation: "; V8's young generation held ..." when the run held it
    (--young-generation fixed), else "" (grows, or a file from before the setting: as Node.js has it)."""
    if config.get("young_generation") != "fixed":
        return ""
    return "; V8's young generation held at 1 MiB a semi-space in every Node.js process (--young-generation fixed)"


def placement_text(config: dict[str, Any]) -> str:
    """Where a run's two sides ran, from its configuration: its --placement, or (files from before it) pinned or not."""
    placement = config.get("placement")
    if placement is None or not config.get("pinned", True) and placement == "auto":
        return "server and client pinned to separate CPUs" if config.get("pinned") else "not pinned"
    helpers = ("; a client's helper threads warm up on the orchestrator's CPU, all its threads on the pair's for the "
               "window" if config.get("warmup_helpers") == "spare" and placement in ("auto", "same-cpu") else "")
    return {"auto": "placement auto (one pair: server and client on one CPU, the orchestrator on another; more: "
                    "each side on CPUs of its own)",
            "same-cpu": "server and client on one CPU, the orchestrator on another (by room with workers: each "
                        "worker beside its rooms' clients)",
            "split": "server and client on CPUs of their own",
            "helpers-across": "server and client on CPUs of their own, each side's helper threads (a thread pool) "
                              "on the other's",
            "unpinned": "not pinned"}.get(placement, f"placement {placement}") + helpers


def excess_by_cell(run: RunResult, summaries: Summaries) -> dict[tuple[str, str], Excess]:
    """Each flagged cell's µs per roundtrip beyond its healthy pair (analysis/excess.py), among the contenders."""
    runtimes = {(role, name): entry.get("runtime") for role, entries in run.implementations.items()
                for name, entry in entries.items()}
    contenders = {server for server, _ in summaries
                  if not is_floor(run, server) and not is_protocol_floor(run, "server", server)}
    return flagged_excess(run, summaries, runtimes, contenders)
