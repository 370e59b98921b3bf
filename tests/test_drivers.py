"""The client driver contract: one JSON object on stdout, errors reported and non-zero exit, same payloads."""

import json
import subprocess
import sys

import pytest

from pingpong.harness.settings.manifest import resolve_command
from pingpong.harness.system import processes
from pingpong.kit.payloads import PAYLOAD_KINDS, make_payload, wire_bytes
from tests.conftest import CLIENTS, ROOT, url_scheme


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_client_reports_connection_failure_as_json_and_exit_1(client):
    """With nothing listening, the driver prints one JSON object with an error and exits 1."""
    port = processes.free_port()
    completed = subprocess.run(resolve_command(client, ROOT) + ["--url", f"{url_scheme(client)}://127.0.0.1:{port}/x",
                                                                  "--duration", "0.5", "--warmup", "0"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1
    lines = completed.stdout.strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert report["errors"] == 1 and report["error"]
    assert report["implementation"] == client.name


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_client_rejects_bad_numbers_with_exit_2(client):
    """A nonsense duration is refused before connecting, with exit code 2."""
    completed = subprocess.run(resolve_command(client, ROOT) + ["--url", f"{url_scheme(client)}://127.0.0.1:1/x",
                                                                  "--duration", "-1"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert completed.stdout == ""


def test_node_payloads_match_python_byte_for_byte():
    """node/payloads.js generates exactly the bytes pingpong/kit/payloads.py does, for every kind and many sizes."""
    sizes = [1, 2, 3, 4, 5, 7, 16, 100, 1023, 4096]
    script = ("const p = require('./node/payloads.js'); const out = {};"
              f"for (const k of p.PAYLOAD_KINDS) for (const n of {sizes}) for (const w of [0, 1]) {{"
              "const m = p.makePayload(k, n, w); out[`${k}/${n}/${w}`] = [m.bytes.toString('hex'), m.binary]; }"
              "console.log(JSON.stringify(out));")
    completed = subprocess.run(["node", "-e", script], cwd=ROOT, capture_output=True, text=True, check=True)
    node = json.loads(completed.stdout)
    for kind in PAYLOAD_KINDS:
        for size in sizes:
            for which in (0, 1):
                payload = make_payload(kind, size, which)
                assert len(wire_bytes(payload)) == size
                assert node[f"{kind}/{size}/{which}"] == [wire_bytes(payload).hex(), kind == "binary"]
    assert make_payload("binary", 8, 0) != make_payload("binary", 8, 1)


def test_ping_and_pong_differ_from_the_first_byte():
    """Ping and pong differ, so an echo back to the sender can never pass as the reply."""
    for kind in PAYLOAD_KINDS:
        for size in (1, 4, 64):
            assert wire_bytes(make_payload(kind, size, 0))[0] != wire_bytes(make_payload(kind, size, 1))[0]


def test_python_driver_runs_outside_the_orchestrator(tmp_path):
    """A driver is a standalone program: run by hand against a server, it prints its report."""
    from tests.conftest import by_name

    port = processes.free_port()
    server = processes.start("srv", resolve_command(by_name("server", "node-ws"), ROOT) + ["--port", str(port)],
                             ROOT, tmp_path)
    try:
        from pingpong.harness.measure.probe import wait_until_ready

        wait_until_ready(f"ws://127.0.0.1:{port}", server, 20)
        completed = subprocess.run([sys.executable, "-m", "clients.websockets_client", "--url",
                                    f"ws://127.0.0.1:{port}/", "--duration", "0.3", "--warmup", "0",
                                    "--no-latency"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    finally:
        processes.stop(server)
    report = json.loads(completed.stdout)
    assert completed.returncode == 0 and report["roundtrips"] > 0
    assert report["latency"] == {"unit": "ns", "recorded": False, "hdr_histogram": None}
