"""The contract's copies in JavaScript, C and the manifest agree with pingpong/contract.py, its one definition."""

import json
import os
import re
import select
import subprocess
import tomllib
import uuid
from pathlib import Path

import pytest

from pingpong import client_report, contract
from pingpong.harness.settings.manifest import check_availability, resolve_command
from pingpong.kit import raw_tcp
from tests.conftest import (CLIENTS, IMPLEMENTATIONS, QUICK_RELAY_SILENCE_S, ROOT, CellSettings, by_name,
                            client_report_of)

NODE_DRIVER_CORE = ROOT / "node" / "driver" / "core.js"
NODE_SERVER_SUPPORT = ROOT / "node" / "server_support.js"
NATIVE_CLIENT = ROOT / "native" / "raw_tcp_client.c"
NATIVE_SERVER = ROOT / "native" / "raw_tcp_server.c"
# The C programs, each (client, server): the raw-TCP floor and the protocol floor (RFC 6455 with no library)
C_PROGRAMS = [(NATIVE_CLIENT, NATIVE_SERVER),
              (ROOT / "native" / "ws_floor_client.c", ROOT / "native" / "ws_floor_server.c")]
ENVIRONMENT_NAMES = {contract.EVENTS_FD_ENV, contract.GO_FD_ENV, contract.START_FD_ENV, contract.INFO_FILE_ENV,
                     contract.NODE_MODULES_ENV, contract.NODE_EXTRA_CA_CERTS_ENV, contract.ACK_FD_ENV}


def node_exports(module: str) -> dict:
    """The constants a node/ module exports, read by a real node process."""
    script = (f"const m = require('./node/{module}'); const out = {{}};"
              "for (const [k, v] of Object.entries(m)) if (typeof v !== 'function') out[k] = v;"
              "console.log(JSON.stringify(out));")
    completed = subprocess.run(["node", "-e", script], cwd=ROOT, capture_output=True, text=True, check=True,
                               timeout=30)
    return json.loads(completed.stdout)


def test_node_driver_agrees_with_the_contract():
    """node/driver/ has the contract's compression modes, workloads, defaults, histogram range and report version."""
    driver = node_exports("driver")
    assert tuple(driver["COMPRESSION_CHOICES"]) == contract.COMPRESSION_MODES
    assert tuple(driver["WORKLOADS"]) == contract.WORKLOADS
    assert driver["EVENTS_FD_ENV"] == contract.EVENTS_FD_ENV
    assert driver["GO_FD_ENV"] == contract.GO_FD_ENV
    assert driver["START_FD_ENV"] == contract.START_FD_ENV
    assert driver["EVENTS"] == {"armed": contract.ARMED_EVENT, "ready": contract.READY_EVENT,
                                "windowStart": contract.WINDOW_START_EVENT, "windowEnd": contract.WINDOW_END_EVENT,
                                "go": contract.GO_LINE}
    assert driver["REPORT_FORMAT_VERSION"] == contract.CLIENT_REPORT_FORMAT_VERSION
    assert driver["HISTOGRAM"] == {"lowestDiscernibleValue": contract.HISTOGRAM_LOWEST_NS,
                                   "highestTrackableValue": contract.HISTOGRAM_HIGHEST_NS,
                                   "numberOfSignificantValueDigits": contract.HISTOGRAM_SIGNIFICANT_DIGITS}
    defaults = driver["DEFAULTS"]
    assert float(defaults["duration"]) == contract.DEFAULT_DURATION_S
    assert float(defaults["warmup"]) == contract.DEFAULT_WARMUP_S
    assert float(defaults["stall-timeout"]) == contract.DEFAULT_STALL_TIMEOUT_S
    assert int(defaults["payload-size"]) == contract.DEFAULT_PAYLOAD_SIZE
    assert int(defaults["pairs"]) == contract.DEFAULT_PAIRS
    assert (defaults["payload-kind"], defaults["loop"], defaults["compression"], defaults["workload"]) == (
        contract.DEFAULT_PAYLOAD_KIND, contract.DEFAULT_LOOP, contract.DEFAULT_COMPRESSION, contract.DEFAULT_WORKLOAD)
    assert tuple(node_exports("payloads.js")["PAYLOAD_KINDS"]) == contract.PAYLOAD_KINDS


def test_node_driver_accepts_exactly_the_client_flags():
    """The options node/driver/core.js parses are the contract's client flags, no more, no fewer."""
    options = re.search(r"options: \{(.*?)\n      \},", NODE_DRIVER_CORE.read_text(), re.S).group(1)
    flags = {f"--{name}" for name in re.findall(r"^\s+'?([\w-]+)'?: \{ type", options, re.M)}
    assert flags == set(contract.CLIENT_FLAGS)


def test_node_server_support_agrees_with_the_contract():
    """node/server_support.js has the contract's server flags, compression modes, defaults and report version."""
    support = node_exports("server_support.js")
    assert tuple(support["COMPRESSION_CHOICES"]) == contract.COMPRESSION_MODES
    assert support["INFO_FILE_ENV"] == contract.INFO_FILE_ENV
    assert support["REPORT_FORMAT_VERSION"] == contract.SERVER_REPORT_FORMAT_VERSION
    assert support["DEFAULTS"] == {"host": contract.DEFAULT_HOST, "loop": contract.DEFAULT_LOOP,
                                   "compression": contract.DEFAULT_COMPRESSION}
    options = re.search(r"options: \{(.*?)\n      \},", NODE_SERVER_SUPPORT.read_text(), re.S).group(1)
    flags = {f"--{name}" for name in re.findall(r"^\s+'?([\w-]+)'?: \{ type", options, re.M)}
    assert flags == set(contract.SERVER_FLAGS)


def test_javascript_programs_read_only_the_contracts_environment_variables():
    """Every PINGPONG_* variable a node/ program reads is one the contract names."""
    for path in (ROOT / "node").rglob("*.js"):
        for name in re.findall(r"process\.env\.(PINGPONG_\w+)", path.read_text()):
            assert name in ENVIRONMENT_NAMES, f"{path.relative_to(ROOT)} reads {name}"


def with_local_headers(path) -> str:
    """A C program's text with the text of the project's headers it includes ("name.h", beside it)."""
    text = path.read_text()
    return text + "".join((path.parent / name).read_text() for name in re.findall(r'#include "([\w.]+)"', text))


def native_flags(path) -> set[str]:
    return set(re.findall(r'strcmp\(argv\[i\], "(--[\w-]+)"\)', path.read_text()))


@pytest.mark.parametrize("client_path,server_path", C_PROGRAMS, ids=lambda path: path.stem)
def test_native_programs_accept_only_contract_flags_with_its_defaults(client_path, server_path):
    """The C clients and servers parse a subset of the contract's flags, with the contract's defaults and names."""
    client, server = with_local_headers(client_path), with_local_headers(server_path)
    assert native_flags(client_path) <= set(contract.CLIENT_FLAGS)
    assert native_flags(server_path) <= set(contract.SERVER_FLAGS)
    assert {"--url", "--duration", "--warmup", "--payload-size", "--payload-kind"} <= native_flags(client_path)
    assert {"--host", "--port", "--loop", "--compression"} <= native_flags(server_path)
    for kind in contract.PAYLOAD_KINDS:
        assert f'strcmp(kind, "{kind}")' in client
    assert f'*kind = "{contract.DEFAULT_PAYLOAD_KIND}"' in client
    assert f"long size = {contract.DEFAULT_PAYLOAD_SIZE};" in client
    assert (f"double duration = {contract.DEFAULT_DURATION_S:g}, warmup = {contract.DEFAULT_WARMUP_S:g}, "
            f"stall_timeout = {contract.DEFAULT_STALL_TIMEOUT_S:g};") in client
    assert f'*host = "{contract.DEFAULT_HOST}"' in server
    assert f'getenv("{contract.EVENTS_FD_ENV}")' in client
    assert f'getenv("{contract.GO_FD_ENV}")' in client
    for event in (contract.READY_EVENT, contract.WINDOW_START_EVENT, contract.WINDOW_END_EVENT):
        assert f'emit_event(&events_fd, "{event}\\n")' in client
    assert f'strncmp(line, "{contract.GO_LINE}\\n", sizeof line)' in client
    assert f'getenv("{contract.INFO_FILE_ENV}")' in server
    assert f'{{\\"format_version\\": {contract.CLIENT_REPORT_FORMAT_VERSION}, \\"role\\": \\"client\\"' in client
    assert f'{{\\"format_version\\": {contract.SERVER_REPORT_FORMAT_VERSION}, \\"role\\": \\"server\\"' in server


def test_native_programs_refuse_what_the_contract_does_not_offer_them(tmp_path):
    """Run for real: an unknown flag exits 2 naming it, and --compression on (no permessage-deflate in the floors)
    too, and TLS (none in the floors)."""
    for program, required in (("raw_tcp_client", ["--url", "tcp://127.0.0.1:1/x"]),
                              ("raw_tcp_server", ["--host", "127.0.0.1", "--port", "0"]),
                              ("ws_floor_client", ["--url", "ws://127.0.0.1:1/x"]),
                              ("ws_floor_server", ["--host", "127.0.0.1", "--port", "0"])):
        executable = ROOT / "build" / program
        unknown = subprocess.run([str(executable), *required, "--not-in-the-contract", "1"], capture_output=True,
                                 text=True, timeout=30)
        assert unknown.returncode == 2 and "--not-in-the-contract" in unknown.stderr
        compressed = subprocess.run([str(executable), *required, "--compression", "on"], capture_output=True,
                                    text=True, timeout=30)
        assert compressed.returncode == 2 and "usage" in compressed.stderr
        tls = ["--tls-ca", "ca.pem"] if "client" in program else ["--tls-cert", "cert.pem", "--tls-key", "key.pem"]
        encrypted = subprocess.run([str(executable), *required, *tls], capture_output=True, text=True, timeout=30)
        assert encrypted.returncode == 2 and "--tls-" in encrypted.stderr and encrypted.stdout == ""


JAVASCRIPT_FLOORS = [i for i in IMPLEMENTATIONS if i.protocol == "raw-tcp" and i.runtime in ("node", "bun")]


@pytest.mark.parametrize("floor", JAVASCRIPT_FLOORS, ids=lambda i: f"{i.role}-{i.name}")
def test_javascript_floors_refuse_what_raw_tcp_does_not_offer(floor):
    """Run for real: an unknown flag, --compression on and TLS exit 2 before anything listens or connects."""
    required = (["--url", "tcp://127.0.0.1:1/x"] if floor.role == "client"
                else ["--host", "127.0.0.1", "--port", "0"])
    tls = ["--tls-ca", "ca.pem"] if floor.role == "client" else ["--tls-cert", "cert.pem", "--tls-key", "key.pem"]
    for extra, message in ((["--not-in-the-contract", "1"], "--not-in-the-contract"),
                           (["--compression", "on"], "--compression on is not supported"), (tls, "no TLS")):
        completed = subprocess.run(resolve_command(floor, ROOT) + required + extra, cwd=ROOT, capture_output=True,
                                   text=True, timeout=30)
        assert completed.returncode == 2 and message in completed.stderr, (extra, completed.stderr)
        assert completed.stdout == ""


def test_javascript_framing_is_the_python_framing():
    """node/raw_tcp.js frames as pingpong/kit/raw_tcp.py does, and parses frames however the stream is cut."""
    payloads = [b"", b"a", bytes(range(256)) * 3, "é€😀".encode()]
    script = ("const { frame, FrameParser, MAX_FRAME } = require('./node/raw_tcp');"
              f"const payloads = {json.dumps([p.hex() for p in payloads])}.map((h) => Buffer.from(h, 'hex'));"
              "const stream = Buffer.concat(payloads.map(frame)); const cuts = [];"
              "for (let step = 1; step <= stream.length; step += 7) { const seen = [];"
              "  const parser = new FrameParser((data, start, end) => seen.push([data.toString('hex', start + 4, end),"
              "    data.subarray(start, end).equals(frame(Buffer.from(data.subarray(start + 4, end))))]));"
              "  for (let i = 0; i < stream.length; i += step) parser.feed(stream.subarray(i, i + step));"
              "  cuts.push(seen); }"
              "console.log(JSON.stringify({ stream: stream.toString('hex'), cuts, MAX_FRAME }));")
    completed = subprocess.run(["node", "-e", script], cwd=ROOT, capture_output=True, text=True, check=True,
                               timeout=30)
    node = json.loads(completed.stdout)
    assert node["stream"] == b"".join(raw_tcp.frame(p) for p in payloads).hex()
    assert node["MAX_FRAME"] == raw_tcp.MAX_FRAME
    assert node["cuts"] and all(seen == [[p.hex(), True] for p in payloads] for seen in node["cuts"])


def test_manifest_uses_only_the_contracts_vocabulary():
    """Every loop, compression mode and feature manifest.toml lists is one the contract defines."""
    for manifest in (ROOT / "manifest.toml", ROOT / "tests" / "manifest.toml"):
        data = tomllib.loads(manifest.read_text())
        for role in ("server", "client"):
            for entry in data.get(role, []):
                assert set(entry["loops"]) <= set(contract.LOOPS), entry["name"]
                assert set(entry["compression"]) <= set(contract.COMPRESSION_MODES), entry["name"]
                assert set(entry.get("features", [])) <= set(contract.FEATURES), entry["name"]


def test_every_implementation_reports_compression_offered_under_one_name():
    """No client program reports the offer under a former name; old names are only mapped when files load."""
    programs = [*(ROOT / "clients").glob("*_client.py"), *(ROOT / "node").glob("*_client.js")]
    for path in programs:
        text = path.read_text()
        for former in contract.FORMER_SETTING_NAMES:
            assert former not in text, f"{path.name} reports {former}"
    websocket_clients = [path for path in programs if "raw_tcp" not in path.name]
    for path in websocket_clients:
        assert contract.COMPRESSION_OFFERED_SETTING in path.read_text(), f"{path.name} does not report it"


def test_the_contract_is_a_leaf():
    """pingpong/contract.py imports nothing from the project, so both worlds can import it."""
    source = (ROOT / "pingpong" / "contract.py").read_text()
    assert not re.search(r"^\s*(from|import)\s", source, re.M)


# --- The client report: every client's JSON held to its one schema, pingpong/client_report.py ---

REPORT_SERVER_SETTINGS = CellSettings(duration_s=1, warmup_s=0, loop="auto", compression="default", payload_size=4,
                                      payload_kind="text-ascii", ready_timeout_s=20, stall_timeout_s=5, pin=False,
                                      relay_silence_s=QUICK_RELAY_SILENCE_S)
SHORT_RUN = ["--duration", "0.3", "--warmup", "0.1", "--stall-timeout", "5"]
# The Python driver (clients/websockets_client.py on pingpong/kit/driver) and the JavaScript one (node/ws_client.js
# on node/driver): every other client of their language measures through the same driver.
DRIVER_CLIENTS = ["websockets", "node-ws"]
CLIENT_TIMEOUT_S = 60
# A valid one-pair ping-pong report, as the Python driver prints it (histogram shortened): the validator's own tests
# break it one way at a time.
VALID_PINGPONG_REPORT = {
    "format_version": 1, "role": "client", "implementation": "websockets",
    "runtime": {"name": "cpython", "version": "3.11.7"}, "libraries": {"websockets": "17.4"},
    "settings": {"compression": "default", "tls": False, "malloc": "settled", "compression_offered": True,
                 "ping_interval": None, "max_size": 1048576, "max_queue": 16},
    "payload": {"kind": "text-ascii", "size": 4}, "workload": "pingpong", "error": None,
    "warmup": {"roundtrips": 230, "elapsed_s": 0.1}, "roundtrips": 811, "elapsed_s": 0.3003,
    "roundtrips_per_s": 2700.6, "latency": {"unit": "ns", "recorded": True, "hdr_histogram": "HISTFAAAAB..."},
    "cpu": {"user_s": 0.21, "system_s": 0.05}, "loop": "asyncio", "pairs": 1,
    "connections": [{"name": name, "extensions": None, "subprotocol": None, "family": "ipv4",
                     "local_address": f"127.0.0.1:{port}", "peer_address": "127.0.0.1:8765", "tcp_nodelay": True}
                    for name, port in (("A", 50000), ("B", 50001))],
    "pauses": {"continued": 12, "latency_dropped": 23},
    "errors": 0,
}


def test_version_problem_names_a_missing_or_unknown_format_version():
    """A report without format_version, or with one this orchestrator does not read, is refused in one line."""
    readable = ", ".join(map(str, client_report.SUPPORTED_VERSIONS))
    assert client_report.SUPPORTED_VERSIONS == (contract.CLIENT_REPORT_FORMAT_VERSION,)
    assert client_report.version_problem(VALID_PINGPONG_REPORT) is None
    missing = {key: value for key, value in VALID_PINGPONG_REPORT.items() if key != "format_version"}
    assert client_report.version_problem(missing) == f"client report has no format_version (this orchestrator " \
                                                      f"reads {readable})"
    assert client_report.version_problem({**VALID_PINGPONG_REPORT, "format_version": 7}) == (
        f"client report format_version 7 is not one this orchestrator reads ({readable})")
    for impostor in ("1", True, 1.0, None):  # true == 1 and 1.0 == 1 in Python; not in the schema
        problem = client_report.version_problem({**VALID_PINGPONG_REPORT, "format_version": impostor})
        assert problem == f"client report format_version {json.dumps(impostor)} is not one this orchestrator " \
                          f"reads ({readable})"
    assert client_report.validate({**VALID_PINGPONG_REPORT, "format_version": 7}, "pingpong") == [
        f"client report format_version 7 is not one this orchestrator reads ({readable})"]


def test_validate_accepts_a_valid_report_and_names_every_problem_of_a_broken_one():
    """A missing required field, a wrong type at any depth, a field of another workload's report, an unknown
    field and an error count that contradicts error are each one line, path first."""
    assert client_report.validate(VALID_PINGPONG_REPORT, "pingpong") == []
    broken = {key: value for key, value in VALID_PINGPONG_REPORT.items() if key != "roundtrips"}
    broken["elapsed_s"] = "0.3"
    broken["latency"] = {**broken["latency"], "hdr_histogram": 5}
    broken["connections"] = [{**broken["connections"][0], "tcp_nodelay": "yes", "colour": "red"}]
    broken["holder"] = True
    broken["surprise"] = 1
    broken["errors"] = 1
    assert sorted(client_report.validate(broken, "pingpong")) == sorted([
        "roundtrips: missing (pingpong reports require it)",
        'elapsed_s: expected a finite number, got "0.3"',
        "latency.hdr_histogram: expected non-empty string or null, got 5",
        'connections[0].tcp_nodelay: expected boolean or null, got "yes"',
        "connections[0].colour: not a field of this object",
        "holder: not a field of pingpong reports (only of idle-holder)",
        "surprise: not a field of pingpong reports",
        "errors: 1 with error null (must be 0)",
    ])
    assert client_report.validate({**VALID_PINGPONG_REPORT, "roundtrips_per_s": float("nan")}, "pingpong") == [
        "roundtrips_per_s: expected a finite number, got NaN"]
    # What one workload requires, another does not have: this report is no open loop's.
    assert sorted(client_report.validate(VALID_PINGPONG_REPORT, "open-loop")) == [
        "open_loop: missing (open-loop reports require it)",
        "pauses: not a field of open-loop reports (only of pingpong)"]


def test_an_error_report_needs_only_the_fields_every_report_has():
    """A failed run reports why, without the measurement's fields; its header is still held to the schema."""
    failed = {key: VALID_PINGPONG_REPORT[key] for key in ("format_version", "role", "implementation", "runtime",
                                                          "libraries", "settings", "payload", "workload")}
    failed.update(error="payload mismatch: connection B expected ...", errors=1)
    for workload in client_report.REPORT_WORKLOADS:
        assert client_report.validate(failed, workload) == []
    assert client_report.validate({**failed, "error": ""}, "pingpong") == [
        "error: expected non-empty string or null, got \"\""]
    assert client_report.validate({**failed, "errors": 0}, "pingpong") == ["errors: 0 with error set (must be 1)"]
    without_payload = {key: value for key, value in failed.items() if key != "payload"}
    assert client_report.validate(without_payload, "handshake") == ["payload: missing (every report has it)"]


def test_report_workload_names_the_report_the_flags_ask_for():
    """The contract's flags map to the report's workload: the orchestrator validates what it asked for."""
    assert client_report.report_workload() == "pingpong"
    assert client_report.report_workload("pingpong", pairs=4) == "pingpong"
    assert client_report.report_workload("pingpong", rate=100.0) == "open-loop"
    assert client_report.report_workload("pingpong", pairs=0) == "idle-holder"
    assert client_report.report_workload("handshake") == "handshake"
    for role in contract.BROADCAST_ROLES:
        assert client_report.report_workload("broadcast", broadcast_role=role) == f"broadcast-{role}"
    assert set(client_report.REPORT_WORKLOADS) == {
        client_report.report_workload(workload, rate, role, pairs) for workload in contract.WORKLOADS
        for rate in (None, 1.0) for role in contract.BROADCAST_ROLES for pairs in (0, 1)
        if not (workload != "pingpong" and (rate or not pairs))}
    with pytest.raises(ValueError, match="unknown report workload 'broadcast'"):
        client_report.validate(VALID_PINGPONG_REPORT, "broadcast")


def test_the_contract_documents_the_report_as_the_schema_defines_it():
    """docs/contract.md holds the table python -m pingpong.client_report prints: the fields are defined once."""
    assert client_report.markdown() in (ROOT / "docs" / "contract.md").read_text()


def test_the_client_report_schema_is_a_leaf():
    """pingpong/client_report.py imports only the standard library and the contract, so both worlds can import it."""
    source = (ROOT / "pingpong" / "client_report.py").read_text()
    project_imports = re.findall(r"^\s*(?:from|import)\s+(pingpong\S*)(.*)$", source, re.M)
    assert project_imports == [("pingpong", " import contract")]


def node_driver_sources() -> list:
    """The JavaScript driver's source files (node/driver/)."""
    return sorted((ROOT / "node" / "driver").glob("*.js"))


def test_node_driver_writes_the_report_version_the_orchestrator_reads():
    """The JavaScript driver defines REPORT_FORMAT_VERSION once, as pingpong/contract.py does, and its main() writes
    it into the report."""
    sources = {path.relative_to(ROOT): path.read_text() for path in node_driver_sources()}
    definitions = [(path, int(value)) for path, text in sources.items()
                   for value in re.findall(r"^const REPORT_FORMAT_VERSION = (\d+);", text, re.M)]
    assert len(definitions) == 1, definitions
    assert definitions[0][1] == contract.CLIENT_REPORT_FORMAT_VERSION
    assert contract.CLIENT_REPORT_FORMAT_VERSION in client_report.SUPPORTED_VERSIONS
    assert "format_version: REPORT_FORMAT_VERSION," in sources[Path("node/driver/main.js")]


def start_reporting_client(client: str, arguments: list[str], env: dict[str, str] | None = None,
                           pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    return subprocess.Popen(resolve_command(by_name("client", client), ROOT) + arguments, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, pass_fds=pass_fds)


def client_outcome(process: subprocess.Popen) -> tuple[int, dict, str]:
    """A client's exit code, its one JSON report and its stderr; killed if it outlives CLIENT_TIMEOUT_S."""
    return client_report_of(process, CLIENT_TIMEOUT_S)


def run_reporting_client(client: str, arguments: list[str], **options) -> tuple[int, dict, str]:
    return client_outcome(start_reporting_client(client, arguments, **options))


def fresh_room(shared_servers, server: str) -> str:
    """A room of its own on the module's shared server (started, probed and verified as a run starts it)."""
    started = shared_servers.get(by_name("server", server), REPORT_SERVER_SETTINGS)
    assert started.problem is None, started.problem
    return f"{started.base_url}/{uuid.uuid4().hex[:12]}"


def assert_valid(report: dict, workload: str) -> None:
    problems = client_report.validate(report, workload)
    assert not problems, (problems, report)


def skip_unless_available(client):
    availability = check_availability(client, ROOT)
    if not availability.available:
        pytest.skip(f"{client.name}: {availability.reason}")


# What each workload's run asks for; the one-pair ping-pong is run for every client below.
WORKLOAD_RUNS = {
    "pairs-beside-idle": ("pingpong", ["--pairs", "2", "--idle-connections", "3"]),
    "handshake": ("handshake", ["--workload", "handshake"]),
    "open-loop": ("open-loop", ["--rate", "200", "--pairs", "2"]),
    "idle-holder": ("idle-holder", ["--pairs", "0", "--idle-connections", "3"]),
}


@pytest.mark.parametrize("run", WORKLOAD_RUNS)
@pytest.mark.parametrize("client", DRIVER_CLIENTS)
def test_both_drivers_report_every_workload_as_the_schema_says(client, run, shared_servers):
    """Run for real: the Python and the JavaScript driver's reports of many pairs beside idle connections, the
    handshake loop, an open loop and an idle holder each validate against their workload's schema."""
    workload, arguments = WORKLOAD_RUNS[run]
    code, report, stderr = run_reporting_client(client, ["--url", fresh_room(shared_servers, "websockets"),
                                                         *arguments, *SHORT_RUN])
    assert code == 0 and report["error"] is None, stderr
    assert_valid(report, workload)


@pytest.mark.parametrize("client", DRIVER_CLIENTS)
def test_both_drivers_report_a_broadcast_as_the_schema_says(client, shared_servers):
    """Run for real: a receivers process acking on a real pipe and the sender reading its acks; each of the two
    reports validates against its role's schema."""
    url = fresh_room(shared_servers, "websockets")
    ack_read, ack_write = os.pipe()
    events_read, events_write = os.pipe()
    receivers = None
    try:
        receivers = start_reporting_client(client, ["--url", url, "--workload", "broadcast", "--broadcast-role",
                                                    "receivers", "--receivers", "2", *SHORT_RUN],
                                           env={contract.ACK_FD_ENV: str(ack_write),
                                                contract.EVENTS_FD_ENV: str(events_write)},
                                           pass_fds=(ack_write, events_write))
        os.close(ack_write)
        os.close(events_write)
        events = b""
        while f"{contract.READY_EVENT}\n".encode() not in events:  # its receivers are in the room: the sender may go
            assert select.select([events_read], [], [], 30)[0], f"no ready within 30 s; got {events!r}"
            chunk = os.read(events_read, 4096)
            assert chunk, f"the receivers process ended before it was ready; got {events!r}"
            events += chunk
        sender = run_reporting_client(client, ["--url", url, "--workload", "broadcast", "--receivers", "1",
                                               "--ack-processes", "1", *SHORT_RUN],
                                      env={contract.ACK_FD_ENV: str(ack_read)}, pass_fds=(ack_read,))
    finally:
        os.close(ack_read)
        os.close(events_read)
        outcome = client_outcome(receivers) if receivers is not None else None
    for (code, report, stderr), workload in ((sender, "broadcast-sender"), (outcome, "broadcast-receivers")):
        assert code == 0 and report["error"] is None, stderr
        assert_valid(report, workload)
    assert outcome[1]["roundtrips"] == len(sender[1]["broadcast"]["send_ns"])


@pytest.mark.parametrize("client", DRIVER_CLIENTS)
def test_both_drivers_report_a_failure_as_the_schema_says(client, shared_servers):
    """Run for real against a server that changes one byte of every message after its 20th: the run fails as a
    payload mismatch, and its error report validates."""
    code, report, stderr = run_reporting_client(client, ["--url", fresh_room(shared_servers,
                                                                             "faulty-flip-one-byte-mid-run"),
                                                         *SHORT_RUN])
    assert code == 1 and report["errors"] == 1 and report["error"].startswith("payload mismatch"), stderr
    assert_valid(report, "pingpong")


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_every_client_reports_a_ping_pong_as_the_schema_says(client, shared_servers):
    """Run for real: every client of the manifest (the Python and JavaScript clients on their drivers, the C floor,
    the compiled Go, Rust and C++ clients) reports one pair's ping-pong as the schema says; an unbuilt or
    uninstalled one is skipped with the reason."""
    skip_unless_available(client)
    server = "websockets" if client.protocol == "websocket" else "raw-tcp-python"
    code, report, stderr = run_reporting_client(client.name, ["--url", fresh_room(shared_servers, server),
                                                              *SHORT_RUN])
    assert code == 0 and report["error"] is None, stderr
    assert_valid(report, "pingpong")


@pytest.mark.parametrize("client", [c for c in CLIENTS if c.runtime == "native" and "pairs" in c.features],
                         ids=lambda c: c.name)
def test_a_compiled_clients_pairs_report_as_the_schema_says(client, shared_servers):
    """Run for real: a compiled client's --pairs 2 report, with each pair's value counts, validates as ping-pong."""
    skip_unless_available(client)
    code, report, stderr = run_reporting_client(client.name, ["--url", fresh_room(shared_servers, "websockets"),
                                                              "--pairs", "2", *SHORT_RUN])
    assert code == 0 and report["error"] is None, stderr
    assert len(report["per_pair_value_counts"]) == len(report["per_pair_roundtrips"]) == report["pairs"] == 2
    assert_valid(report, "pingpong")
