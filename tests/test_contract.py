"""The contract's copies in JavaScript, C and the manifest agree with pingpong/contract.py, its one definition."""

import json
import re
import subprocess
import tomllib

import pytest

from pingpong import contract
from pingpong.harness.manifest import resolve_command
from pingpong.kit import raw_tcp
from tests.conftest import IMPLEMENTATIONS, ROOT

NODE_DRIVER = ROOT / "node" / "driver.js"
NODE_SERVER_SUPPORT = ROOT / "node" / "server_support.js"
NATIVE_CLIENT = ROOT / "native" / "raw_tcp_client.c"
NATIVE_SERVER = ROOT / "native" / "raw_tcp_server.c"
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
    """node/driver.js has the contract's compression modes, workloads, defaults, histogram range and report version."""
    driver = node_exports("driver.js")
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
    """The options node/driver.js parses are the contract's client flags, no more, no fewer."""
    options = re.search(r"options: \{(.*?)\n      \},", NODE_DRIVER.read_text(), re.S).group(1)
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
    for path in (ROOT / "node").glob("*.js"):
        for name in re.findall(r"process\.env\.(PINGPONG_\w+)", path.read_text()):
            assert name in ENVIRONMENT_NAMES, f"{path.name} reads {name}"


def native_flags(path) -> set[str]:
    return set(re.findall(r'strcmp\(argv\[i\], "(--[\w-]+)"\)', path.read_text()))


def test_native_programs_accept_only_contract_flags_with_its_defaults():
    """The C client and server parse a subset of the contract's flags, with the contract's defaults and names."""
    client, server = NATIVE_CLIENT.read_text(), NATIVE_SERVER.read_text()
    assert native_flags(NATIVE_CLIENT) <= set(contract.CLIENT_FLAGS)
    assert native_flags(NATIVE_SERVER) <= set(contract.SERVER_FLAGS)
    assert {"--url", "--duration", "--warmup", "--payload-size", "--payload-kind"} <= native_flags(NATIVE_CLIENT)
    assert {"--host", "--port", "--loop", "--compression"} <= native_flags(NATIVE_SERVER)
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
    """Run for real: an unknown flag exits 2 naming it, and --compression on (no permessage-deflate in raw TCP) too."""
    for program, required in (("raw_tcp_client", ["--url", "tcp://127.0.0.1:1/x"]),
                              ("raw_tcp_server", ["--host", "127.0.0.1", "--port", "0"])):
        executable = ROOT / "build" / program
        unknown = subprocess.run([str(executable), *required, "--not-in-the-contract", "1"], capture_output=True,
                                 text=True, timeout=30)
        assert unknown.returncode == 2 and "--not-in-the-contract" in unknown.stderr
        compressed = subprocess.run([str(executable), *required, "--compression", "on"], capture_output=True,
                                    text=True, timeout=30)
        assert compressed.returncode == 2 and "usage" in compressed.stderr


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
              "  const parser = new FrameParser((whole, payload) => seen.push(payload.toString('hex')));"
              "  for (let i = 0; i < stream.length; i += step) parser.feed(stream.subarray(i, i + step));"
              "  cuts.push(seen); }"
              "console.log(JSON.stringify({ stream: stream.toString('hex'), cuts, MAX_FRAME }));")
    completed = subprocess.run(["node", "-e", script], cwd=ROOT, capture_output=True, text=True, check=True,
                               timeout=30)
    node = json.loads(completed.stdout)
    assert node["stream"] == b"".join(raw_tcp.frame(p) for p in payloads).hex()
    assert node["MAX_FRAME"] == raw_tcp.MAX_FRAME
    assert node["cuts"] and all(seen == [p.hex() for p in payloads] for seen in node["cuts"])


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
