"""--tls: wss:// end to end with a certificate made for the run, across runtimes; nothing left on disk."""

import json
import os

import pytest

from tests.conftest import QUICK_RELAY_CHECK
from tests.test_run_bench import NO_FIGURES, run_bench

# the cells' TLS settings and roundtrips are checked, no rate: a short window, no extra warmup for Node.js's compiler
FAST = ["--duration", "0.2", "--warmup", "0.1", "--repeat", "1", "--jit-warmup", "0", *NO_FIGURES,
        *QUICK_RELAY_CHECK]


@pytest.mark.timeout(660)  # its run_bench is allowed 600 s
def test_tls_cells_run_end_to_end_with_a_throwaway_certificate(tmp_path):
    """Python, Node.js and Bun servers and clients speak wss:// trusting only the run's CA; raw TCP is skipped."""
    completed = run_bench("--tls", "--servers", "aiohttp,node-ws,bun,raw-tcp-c", "--clients",
                          "websockets,node-builtin,bun,raw-tcp-c", *FAST, "--results-dir", str(tmp_path),
                          "--host-figure", "off",  # the floor's host figure (~8 s) is not what this test checks
                          "--format", "json", timeout=600)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["configuration"]["tls"] is True
    measured = [cell for cell in result["cells"] if not cell["skipped"]]
    assert len(measured) == 9
    for cell in measured:
        attempt = cell["attempts"][0]
        assert attempt["status"] == "ok", attempt
        assert attempt["server_info"]["settings"]["tls"] is True
        assert attempt["client_report"]["settings"]["tls"] is True
        assert attempt["roundtrips"] > 0
    skipped = {(c["server"], c["client"]): c["skipped"] for c in result["cells"] if c["skipped"]}
    assert skipped[("raw-tcp-c", "raw-tcp-c")] == "server raw-tcp-c does not support --tls"
    ca_file = result["configuration"]["tls_ca"]
    assert ca_file.endswith("ca.pem") and not os.path.exists(ca_file)  # the throwaway CA is gone with the run
    assert "TLS (wss://)" in (tmp_path / "latest.md").read_text()


def test_a_tls_server_refuses_plain_websocket_clients(tmp_path):
    """The probe's plain ws:// handshake cannot reach a server started with a certificate: TLS is really on."""
    from pathlib import Path

    from pingpong.harness.measure import probe
    from pingpong.harness.settings.manifest import resolve_command
    from pingpong.harness.system import processes
    from pingpong.kit.tls import make_tls_files
    from tests.conftest import ROOT, by_name

    files = make_tls_files(Path(tmp_path))
    port = processes.free_port()
    server = processes.start("srv", resolve_command(by_name("server", "node-ws"), ROOT) + [
        "--port", str(port), "--tls-cert", files.cert, "--tls-key", files.key], ROOT, tmp_path)
    try:
        probe.wait_until_ready(f"wss://127.0.0.1:{port}", server, 20, files.ca)
        assert probe.verify_relay(f"wss://127.0.0.1:{port}", files.ca) is None
        plain = probe.verify_relay(f"ws://127.0.0.1:{port}")
        assert plain is not None and plain.startswith("relay verification:")
    finally:
        processes.stop(server)
