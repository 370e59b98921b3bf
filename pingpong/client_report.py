"""The client report, the one JSON object a client program prints on stdout, as a schema defined once and versioned.

A leaf, like pingpong/contract.py: it imports only the standard library and the contract, so the orchestrator and
the tests both read it. The schema is data (REPORT_FIELDS and MEASURED_FIELDS below: each field's type, where it is
required, and what it means), checked by a validator small enough to read. Every client program is held to it by
tests/test_contract.py: the Python and JavaScript drivers in every workload, the C floor and the compiled clients.

The fields and their meanings, as a table per workload, are in docs/contract.md ("The client report's fields"),
rendered from this schema by `python -m pingpong.client_report` and held to it by a test.

A report is one of REPORT_WORKLOADS, named by what the orchestrator asked the client for (report_workload() maps the
flags to it). Extra fields are allowed in two places only, where implementations really differ: `settings` (each
library's own settings, beside the contract's) and `libraries` (the names of what each links). Everywhere else a
field the schema does not name is a problem, and so is a field that belongs to another workload's report.
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass
from typing import Any

from pingpong import contract

# The format_version values this orchestrator reads; a report of any other is refused, not guessed at.
SUPPORTED_VERSIONS = (contract.CLIENT_REPORT_FORMAT_VERSION,)

# What a report is of: the contract's --workload, told apart further by the flags that change the report's shape.
PINGPONG = "pingpong"  # one or many pairs (--pairs N), closed loop; possibly beside --idle-connections
HANDSHAKE = "handshake"  # --workload handshake
OPEN_LOOP = "open-loop"  # --rate R
BROADCAST_SENDER = "broadcast-sender"  # --workload broadcast --broadcast-role sender
BROADCAST_RECEIVERS = "broadcast-receivers"  # --workload broadcast --broadcast-role receivers
IDLE_HOLDER = "idle-holder"  # --pairs 0 --idle-connections N
REPORT_WORKLOADS = (PINGPONG, HANDSHAKE, OPEN_LOOP, BROADCAST_SENDER, BROADCAST_RECEIVERS, IDLE_HOLDER)
ALL = REPORT_WORKLOADS
MEASURING = (PINGPONG, HANDSHAKE, OPEN_LOOP, BROADCAST_SENDER)  # the processes that warm up and time a window

# A list longer than this reports its first problems only (a broadcast's per-message lists hold thousands).
PROBLEMS_PER_LIST = 3


def report_workload(workload: str = contract.DEFAULT_WORKLOAD, rate: float | None = None,
                    broadcast_role: str = "sender", pairs: int = contract.DEFAULT_PAIRS) -> str:
    """The REPORT_WORKLOADS name of the report a client started with these contract flags prints."""
    if workload == "broadcast":
        return f"broadcast-{broadcast_role}"
    if workload == "handshake":
        return HANDSHAKE
    if pairs == 0:
        return IDLE_HOLDER
    return OPEN_LOOP if rate is not None else PINGPONG


# --- The types a field can have: each checks a value (appending one line per problem) and describes itself ---

def _shown(value: Any) -> str:
    """A value as JSON, cut short: what a problem line says was found."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class Integer:
    minimum: int | None = 0

    def describe(self) -> str:
        return "integer" if self.minimum is None else f"integer ≥ {self.minimum}"

    def check(self, value: Any, path: str, problems: list[str]) -> None:
        if type(value) is not int:
            problems.append(f"{path}: expected an integer, got {_shown(value)}")
        elif self.minimum is not None and value < self.minimum:
            problems.append(f"{path}: {value} is below the minimum {self.minimum}")


@dataclass(frozen=True)
class Number:
    minimum: float | None = 0

    def describe(self) -> str:
        return "number" if self.minimum is None else f"number ≥ {self.minimum:g}"

    def check(self, value: Any, path: str, problems: list[str]) -> None:
        if type(value) not in (int, float) or not math.isfinite(value):
            problems.append(f"{path}: expected a finite number, got {_shown(value)}")
        elif self.minimum is not None and value < self.minimum:
            problems.append(f"{path}: {value} is below the minimum {self.minimum:g}")


@dataclass(frozen=True)
class String:
    min_length: int = 0

    def describe(self) -> str:
        return "string" if not self.min_length else "non-empty string"

    def check(self, value: Any, path: str, problems: list[str]) -> None:
        if type(value) is not str:
            problems.append(f"{path}: expected a string, got {_shown(value)}")
        elif len(value) < self.min_length:
            problems.append(f"{path}: expected a non-empty string")


@dataclass(frozen=True)
class Boolean:
    def describe(self) -> str:
        return "boolean"

    def check(self, value: Any, path: str, problems: list[str]) -> None:
        if type(value) is not bool:
            problems.append(f"{path}: expected true or false, got {_shown(value)}")


@dataclass(frozen=True)
class OneOf:
    """One of these exact values (JSON strings, numbers, true, false or null)."""

    values: tuple

    def describe(self) -> str:
        return " | ".join(json.dumps(value) for value in self.values)

    def check(self, value: Any, path: str, problems: list[str]) -> None:
        # type() too: in Python true == 1 and 0 == false, in JSON they differ
        if not any(type(value) is type(allowed) and value == allowed for allowed in self.values):
            problems.append(f"{path}: expected {self.describe()}, got {_shown(value)}")


NULL = OneOf((None,))


@dataclass(frozen=True)
class AnyOf:
    """A value of any one of these types, e.g. a string or null."""

    types: tuple

    def describe(self) -> str:
        return " or ".join(kind.describe() for kind in self.types)

    def check(self, value: Any, path: str, problems: list[str]) -> None:
        for kind in self.types:
            found: list[str] = []
            kind.check(value, path, found)
            if not found:
                return
        problems.append(f"{path}: expected {self.describe()}, got {_shown(value)}")


@dataclass(frozen=True)
class ListOf:
    item: Any

    def describe(self) -> str:
        return f"list of {self.item.describe()}"

    def check(self, value: Any, path: str, problems: list[str]) -> None:
        if type(value) is not list:
            problems.append(f"{path}: expected a list, got {_shown(value)}")
            return
        if self._all_valid_quickly(value):
            return
        found: list[str] = []
        for index, item in enumerate(value):
            self.item.check(item, f"{path}[{index}]", found)
        problems.extend(found[:PROBLEMS_PER_LIST])
        if len(found) > PROBLEMS_PER_LIST:
            problems.append(f"{path}: {len(found) - PROBLEMS_PER_LIST} more problems in this list")

    def _all_valid_quickly(self, value: list) -> bool:
        """The long lists (per-message times, value_counts) checked without a call per item: True when all are
        valid; False says only that the item-by-item check must name the problems."""
        if type(self.item) is Integer:
            low = self.item.minimum
            return set(map(type, value)) <= {int} and (low is None or not value or min(value) >= low)
        if type(self.item) is Pair and type(self.item.first) is Integer and type(self.item.second) is Integer:
            low_first, low_second = self.item.first.minimum, self.item.second.minimum
            return all(type(item) is list and len(item) == 2 and type(item[0]) is int and type(item[1]) is int
                       and (low_first is None or item[0] >= low_first)
                       and (low_second is None or item[1] >= low_second) for item in value)
        return False


@dataclass(frozen=True)
class Pair:
    """A list of exactly two items, of these types."""

    first: Any
    second: Any

    def describe(self) -> str:
        return f"[{self.first.describe()}, {self.second.describe()}]"

    def check(self, value: Any, path: str, problems: list[str]) -> None:
        if type(value) is not list or len(value) != 2:
            problems.append(f"{path}: expected a list of two, {self.describe()}, got {_shown(value)}")
            return
        self.first.check(value[0], f"{path}[0]", problems)
        self.second.check(value[1], f"{path}[1]", problems)


@dataclass(frozen=True)
class MapOf:
    """An object whose keys are names the implementation chooses, each with a value of one type."""

    value: Any

    def describe(self) -> str:
        return f"object of {self.value.describe()}"

    def check(self, value: Any, path: str, problems: list[str]) -> None:
        if type(value) is not dict:
            problems.append(f"{path}: expected an object, got {_shown(value)}")
            return
        for key, item in value.items():
            self.value.check(item, f"{path}.{key}", problems)


@dataclass(frozen=True)
class Field:
    name: str
    type: Any
    meaning: str
    required: bool = True


@dataclass(frozen=True)
class Record:
    """An object with these fields; others only when `extra` says why (the places implementations differ)."""

    fields: tuple[Field, ...]
    extra: str | None = None

    def describe(self) -> str:
        return "object"

    def check(self, value: Any, path: str, problems: list[str]) -> None:
        if type(value) is not dict:
            problems.append(f"{path}: expected an object, got {_shown(value)}")
            return
        known = {field.name: field for field in self.fields}
        for field in self.fields:
            if field.name in value:
                field.type.check(value[field.name], f"{path}.{field.name}", problems)
            elif field.required:
                problems.append(f"{path}.{field.name}: missing")
        if self.extra is None:
            problems.extend(f"{path}.{key}: not a field of this object" for key in value if key not in known)


# --- The report, format_version 1 ---

COUNT = Integer(0)
SECONDS = Number(0)
PER_SECOND = Number(0)
NANOSECONDS = Number(0)
NS_LIST = ListOf(Integer(0))

WINDOW = Record((
    Field("roundtrips", COUNT, "roundtrips (handshake cycles, broadcast messages) completed in the warmup"),
    Field("elapsed_s", SECONDS, "how long the warmup took"),
))
CPU = Record((
    Field("user_s", SECONDS, "user CPU time of the client process over the measured window"),
    Field("system_s", SECONDS, "system CPU time of the client process over the measured window"),
))
LATENCY = Record((
    Field("unit", OneOf(("ns",)), "the unit of every latency: nanoseconds"),
    Field("recorded", Boolean(), "whether latencies were recorded (false with --no-latency, and where none are: "
                                 "a holder, a broadcast receivers process)"),
    Field("hdr_histogram", AnyOf((String(1), NULL)),
          "the window's latencies as a compressed, base64 HdrHistogram (1 ns to 60 s, 3 significant digits); null "
          "when not recorded, or when value_counts holds them"),
    Field("value_counts", ListOf(Pair(Integer(1), Integer(1))),
          "the compiled clients and the C floor: the latencies as [value_ns, count] pairs, each value rounded to "
          "HdrHistogram's precision; the orchestrator folds them into a histogram", required=False),
))
CONNECTION = Record((
    Field("name", String(1), "which connection: A, B (A0, B0, ... with --pairs), S and R0, R1, ... (broadcast), "
                             "\"B (responder)\" and \"A (last opened)\" (handshake)"),
    Field("family", AnyOf((String(1), NULL)), "the address family, ipv4 or ipv6; null when the library did not "
                                               "expose its socket"),
    Field("local_address", String(1), "host:port of the client's end; absent where the library does not show it "
                                      "(the WHATWG WebSocket)", required=False),
    Field("peer_address", String(1), "host:port of the server's end; absent as local_address", required=False),
    Field("tcp_nodelay", AnyOf((Boolean(), NULL)), "TCP_NODELAY read back from the socket; null where the runtime "
                                                   "cannot read it (Node.js, Bun)"),
    Field("tcp_nodelay_source", String(1), "the JavaScript clients: why tcp_nodelay is null, and how the library "
                                           "sets it", required=False),
    Field("extensions", AnyOf((String(), NULL)), "the Sec-WebSocket-Extensions the server answered "
                                                 "(permessage-deflate when negotiated), or null; absent from the "
                                                 "JavaScript raw-TCP floors'", required=False),
    Field("subprotocol", AnyOf((String(), NULL)), "the negotiated subprotocol, or null; absent as extensions",
          required=False),
))
IDLE_CONNECTIONS = Record((
    Field("requested", COUNT, "--idle-connections"),
    Field("opened", COUNT, "how many opened (all of them, or the run failed)"),
    Field("open_s", SECONDS, "how long opening them took"),
    Field("nofile_limit", AnyOf((Pair(Integer(None), Integer(None)), NULL)),
          "the process's open-files limit as [soft, hard], after raising the soft one; null from the JavaScript "
          "driver, which cannot read it"),
))
OPEN_LOOP_FIGURES = Record((
    Field("rate_per_pair", Number(0), "--rate: pings per second each pair's A sends"),
    Field("offered_per_s", PER_SECOND, "rate_per_pair × pairs"),
    Field("sent", COUNT, "pings due in the window, all sent"),
    Field("answered", COUNT, "their pongs received (the report waits for every one, up to --stall-timeout)"),
    Field("answered_in_window", COUNT, "those received before the window's last ping was sent"),
    Field("achieved_per_s", PER_SECOND, "answered_in_window / --duration"),
    Field("send_lag_max_ns", NANOSECONDS, "how late, at most, a ping went out after its due time"),
    Field("send_lag_mean_ns", NANOSECONDS, "how late a ping went out, on average"),
))
RECEIVED_TIMES = (
    Field("first_ns", NS_LIST, "per message (warmup included), when the first of this process's receivers got "
                               "it, on CLOCK_MONOTONIC (shared by the host's processes)"),
    Field("last_ns", NS_LIST, "per message, when the last of this process's receivers got it"),
)
BROADCAST_SENDER_FIGURES = Record((
    Field("role", OneOf(("sender",)), "--broadcast-role"),
    Field("receivers", COUNT, "the receivers this process holds (--receivers)"),
    Field("ack_processes", COUNT, "--ack-processes: receivers processes acknowledging every message"),
    Field("send_ns", NS_LIST, "per message (warmup included), when S sent it, on CLOCK_MONOTONIC"),
    Field("window_first", COUNT, "the index of the window's first message in send_ns"),
    Field("window_count", COUNT, "the window's messages (= roundtrips)"),
    *RECEIVED_TIMES,
))
BROADCAST_RECEIVERS_FIGURES = Record((
    Field("role", OneOf(("receivers",)), "--broadcast-role"),
    Field("receivers", COUNT, "the receivers this process holds (--receivers)"),
    *RECEIVED_TIMES,
))
AB_WINDOW = Record((
    Field("recording", Boolean(), "whether this window recorded latencies"),
    Field("roundtrips", COUNT, "roundtrips in this window"),
    Field("roundtrips_per_s", PER_SECOND, "this window's rate"),
))
PAUSES = Record((
    Field("continued", COUNT, "SIGCONTs the process counted in its measured window: each is the end of a pause"),
    Field("latency_dropped", COUNT, "roundtrips of the window whose latency was not recorded because a SIGCONT came "
                                    "between their start and the end of the roundtrip after them (a pause fell in "
                                    "them; their roundtrips still count). A pause may also drop the roundtrip after "
                                    "the paused one: a runtime may run its SIGCONT handler late (the Node.js and Bun "
                                    "clients allow three roundtrips, dropping up to four). The Go client's count can "
                                    "come later still: it holds 32 roundtrips and drops the slowest of them per "
                                    "SIGCONT, one latency per pause"),
))
SETTINGS = Record((
    Field(contract.COMPRESSION_SETTING, OneOf(contract.COMPRESSION_MODES), "the --compression asked for"),
    Field(contract.TLS_SETTING, Boolean(), "whether it connected over wss://; absent from the C floor's (no TLS)",
          required=False),
    Field(contract.COMPRESSION_OFFERED_SETTING, AnyOf((Boolean(), String(1))),
          "whether it offers permessage-deflate; the WHATWG clients, which cannot choose, say so in a sentence; "
          "absent from the raw-TCP floors'", required=False),
    Field(contract.MALLOC_SETTING, OneOf(contract.MALLOC_MODES), "the Python programs: the PINGPONG_MALLOC mode "
                                                                 "they ran with", required=False),
    Field("latency_recorded", Boolean(), "the C floor and the compiled clients: whether latencies were recorded",
          required=False),
), extra="each library's own settings, under its own names (queue sizes, keepalive, thresholds, framing)")

# Every report has these, an error report too.
REPORT_FIELDS = (
    Field("format_version", Integer(1), "the version of this schema the report follows (SUPPORTED_VERSIONS)"),
    Field("role", OneOf(("client",)), "always \"client\" (a server's report says \"server\")"),
    Field("implementation", String(1), "the client's name, as in manifest.toml"),
    Field("runtime", Record((Field("name", String(1), "python, node, bun, go, rust, c, ..."),
                             Field("version", String(1), "the runtime's version")),),
          "the runtime the client ran on"),
    Field("libraries", MapOf(String()), "each library the client used, by name, and its version",),
    Field("settings", SETTINGS, "the settings it ran with: the contract's, then its library's own"),
    Field("payload", Record((Field("kind", OneOf(contract.PAYLOAD_KINDS), "--payload-kind"),
                             Field("size", Integer(1), "--payload-size, in bytes"))), "what each message held"),
    Field("workload", OneOf(contract.WORKLOADS), "--workload; absent from the C floor's (it runs pingpong only)",
          required=False),
    Field("error", AnyOf((String(1), NULL)), "null on success; else why the run failed, in one line (the process "
                                             "exits 1)"),
    Field("errors", OneOf((0, 1)), "0 on success, 1 when error is set"),
)
REPORT_FIELD_NAMES = {field.name for field in REPORT_FIELDS}


@dataclass(frozen=True)
class Measured:
    """A field of a successful report: required in some workloads' reports, allowed in others, absent elsewhere.

    An error report may hold any of them (what the client knew when it failed), and needs none."""

    name: str
    type: Any
    meaning: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()


MEASURED_FIELDS = (
    Measured("loop", String(1), "the event loop it ran on (asyncio, uvloop, libuv, bun, go-netpoll, tokio, asio, "
                                "blocking); the JavaScript driver reports it in an error report too", ALL),
    Measured("roundtrips", COUNT, "roundtrips in the measured window (handshake cycles; broadcast messages every "
                                  "receiver got; answered pings in an open loop; 0 for a holder)", ALL),
    Measured("elapsed_s", SECONDS, "the window's length (a receivers process: from its first receipt to its last)",
             ALL),
    Measured("roundtrips_per_s", PER_SECOND, "roundtrips / elapsed_s: the headline figure", ALL),
    Measured("latency", LATENCY, "the window's latencies (roundtrip, handshake cycle, broadcast cycle, or open-loop "
                                 "latency from each ping's due time)", ALL),
    Measured("connections", ListOf(CONNECTION), "the measured connections, as the library and the kernel describe "
                                                "them (a broadcast lists S and its first 10 receivers; a holder none)",
             ALL),
    Measured("warmup", WINDOW, "the unmeasured warmup before the window", MEASURING),
    Measured("pairs", Integer(0), "--pairs: pairs driven at once (1 for handshake and a broadcast sender, 0 for a "
                                  "holder); absent from the C floor's, meaning 1",
             (HANDSHAKE, OPEN_LOOP, BROADCAST_SENDER, IDLE_HOLDER), (PINGPONG,)),
    Measured("cpu", CPU, "the client's own CPU over the window; the Python driver reports it for one closed-loop "
                         "pair only, the others for every measuring process", (), MEASURING),
    Measured("per_pair_roundtrips", ListOf(COUNT), "with --pairs N > 1: each pair's roundtrips (the Python driver "
                                                   "leaves it out of an open loop's)", (), (PINGPONG, OPEN_LOOP)),
    Measured("per_pair_hdr_histograms", ListOf(String(1)),
             "with --pairs N > 1 in a closed loop, latencies recorded: each pair's roundtrip latencies, in the order "
             "of per_pair_roundtrips, each encoded as latency.hdr_histogram (its count is that pair's roundtrips)",
             (), (PINGPONG,)),
    Measured("per_pair_value_counts", ListOf(ListOf(Pair(Integer(1), Integer(1)))),
             "the compiled clients' per_pair_hdr_histograms: each pair's latencies as latency.value_counts, in the "
             "order of per_pair_roundtrips; the orchestrator encodes them into per_pair_hdr_histograms when it reads "
             "the report", (), (PINGPONG,)),
    Measured("pauses", PAUSES, "what the orchestrator's pauses did to the measured window (for each slice of the "
                               "host sentinel the cell is kept off its CPU, by the sentinel in the real-time class "
                               "or with SIGSTOP, and is sent a SIGCONT after it: docs/methodology.md, \"The host's "
                               "pace in the window\")", (PINGPONG,)),
    Measured("ab_windows", ListOf(AB_WINDOW), "--ab-windows N: the 2N windows alternating recording on and off",
             (), (PINGPONG,)),
    Measured("idle_connections", IDLE_CONNECTIONS, "--idle-connections N: the connections held unused in ROOM-idle",
             (IDLE_HOLDER,), (PINGPONG, OPEN_LOOP)),
    Measured("holder", OneOf((True,)), "true: this process only held idle connections (--pairs 0)", (IDLE_HOLDER,)),
    Measured("handshakes", COUNT, "handshake cycles in the window (= roundtrips)", (HANDSHAKE,)),
    Measured("open_loop", OPEN_LOOP_FIGURES, "--rate: the offered and achieved rates and the send lag", (OPEN_LOOP,)),
    Measured("broadcast", BROADCAST_SENDER_FIGURES, "the sender's per-message times", (BROADCAST_SENDER,)),
    Measured("broadcast", BROADCAST_RECEIVERS_FIGURES, "a receivers process's per-message times",
             (BROADCAST_RECEIVERS,)),
    Measured("connections_total", COUNT, "every connection the process held (connections lists 10 receivers at "
                                         "most)", (BROADCAST_SENDER, BROADCAST_RECEIVERS)),
)
SCHEMAS = {1: (REPORT_FIELDS, MEASURED_FIELDS)}  # format_version -> its fields; a new version adds an entry


def version_problem(report: dict) -> str | None:
    """Why the orchestrator cannot read this report's format_version (missing or unknown), in one line; else None."""
    readable = ", ".join(str(version) for version in SUPPORTED_VERSIONS)
    if not isinstance(report, dict):
        return f"client report is not a JSON object (this orchestrator reads format_version {readable})"
    if "format_version" not in report:
        return f"client report has no format_version (this orchestrator reads {readable})"
    version = report["format_version"]
    if type(version) is not int or version not in SUPPORTED_VERSIONS:
        return f"client report format_version {_shown(version)} is not one this orchestrator reads ({readable})"
    return None


def validate(report: dict, workload: str) -> list[str]:
    """Every way report departs from its format_version's schema for this workload (one of REPORT_WORKLOADS), one
    line each as "path: problem"; empty when it is valid. An error report (error set) needs only REPORT_FIELDS."""
    if workload not in REPORT_WORKLOADS:
        raise ValueError(f"unknown report workload {workload!r}; one of {', '.join(REPORT_WORKLOADS)}")
    problem = version_problem(report)
    if problem:
        return [problem]
    report_fields, measured_fields = SCHEMAS[report["format_version"]]
    problems: list[str] = []
    for field in report_fields:
        if field.name in report:
            field.type.check(report[field.name], field.name, problems)
        elif field.required:
            problems.append(f"{field.name}: missing (every report has it)")
    failed = report.get("error") is not None
    if type(report.get("errors")) is int and report["errors"] in (0, 1) and report["errors"] != int(failed):
        problems.append(f"errors: {report['errors']} with error {'set' if failed else 'null'} (must be "
                        f"{1 if failed else 0})")
    here = {field.name: field for field in measured_fields if workload in field.required + field.optional}
    for name, value in report.items():
        if name in REPORT_FIELD_NAMES:
            continue
        if name in here:
            here[name].type.check(value, name, problems)
            continue
        elsewhere = [kind for field in measured_fields if field.name == name
                     for kind in field.required + field.optional]
        problems.append(f"{name}: not a field of {workload} reports" + (f" (only of {', '.join(elsewhere)})"
                                                                          if elsewhere else ""))
    if not failed:
        problems.extend(f"{field.name}: missing ({workload} reports require it)" for field in here.values()
                        if workload in field.required and field.name not in report)
    return problems


# --- The table docs/contract.md holds (python -m pingpong.client_report prints it) ---

DOC_WIDTH = 114  # characters; a few are 2-3 bytes (≥, ×), and the docs hold lines to 120


def _field_lines(name: str, kind: Any, meaning: str, required: bool, indent: str) -> list[str]:
    optional = "" if required else ", optional"
    text = f"{indent}- `{name}` ({kind.describe()}{optional}): {meaning}"
    lines = textwrap.wrap(text, DOC_WIDTH, subsequent_indent=indent + "  ", break_on_hyphens=False)
    if isinstance(kind, ListOf):
        kind = kind.item
    if isinstance(kind, Record):
        for field in kind.fields:
            lines += _field_lines(field.name, field.type, field.meaning, field.required, indent + "  ")
        if kind.extra:
            lines += textwrap.wrap(f"{indent}  - and {kind.extra}", DOC_WIDTH, subsequent_indent=indent + "    ")
    return lines


def markdown() -> str:
    """The report's fields for docs/contract.md: which appear in which workload's report, and what each means."""
    version = max(SUPPORTED_VERSIONS)
    report_fields, measured_fields = SCHEMAS[version]
    lines = [f"Every report (format_version {version}), an error report too, has these fields:", ""]
    for field in report_fields:
        lines += _field_lines(field.name, field.type, field.meaning, field.required, "")
    lines += [""] + textwrap.wrap("A successful report adds these, by workload (report_workload() names them from "
                                  "the flags); R: required, o: optional, blank: absent. An error report may hold "
                                  "any of them, and needs none.", DOC_WIDTH)
    lines += ["", "| field | " + " | ".join(kind.replace("-", " ") for kind in REPORT_WORKLOADS) + " |",
              "|---|" + ":-:|" * len(REPORT_WORKLOADS)]
    for field in measured_fields:
        marks = ["R" if kind in field.required else "o" if kind in field.optional else " "
                 for kind in REPORT_WORKLOADS]
        lines.append(f"| `{field.name}` | " + " | ".join(marks) + " |")
    lines += [""]
    for field in measured_fields:
        lines += _field_lines(field.name, field.type, field.meaning, True, "")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
