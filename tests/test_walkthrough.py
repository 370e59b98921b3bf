"""docs/contract.md's walkthrough, followed with a throwaway server and client written to a temporary folder."""

import json
import os
import subprocess
import sys

from tests.conftest import QUICK_RELAY_CHECK, ROOT

SERVER = '''"""A throwaway relay server on websockets, written by the walkthrough test."""

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from pingpong.kit import server_support

ROOMS = {}


async def relay(websocket):
    members = ROOMS.setdefault(server_support.room_of(websocket.request.path), set())
    members.add(websocket)
    try:
        async for message in websocket:
            for other in tuple(members):
                if other is not websocket:
                    try:
                        await other.send(message)
                    except ConnectionClosed:
                        pass
    finally:
        members.discard(websocket)


async def main(args):
    stop = server_support.stop_requested()
    async with serve(relay, args.host, args.port, compression=None, ping_interval=None):
        server_support.write_server_info("walkthrough", ["websockets"], args, {"compression_effective": None})
        await stop


if __name__ == "__main__":
    server_support.run(main, server_support.parse_args(__doc__, compression_choices=("default", "off")))
'''

CLIENT = '''"""A throwaway client on websockets and the shared driver, written by the walkthrough test."""

from websockets.asyncio.client import connect

from pingpong.kit import driver


async def open_connection(url, args):
    websocket = await connect(url, compression=None, ping_interval=None)
    return driver.Connection(send=websocket.send, recv=websocket.recv, close=websocket.close,
                             details={"extensions": None, "subprotocol": None,
                                      **driver.socket_details(websocket.transport.get_extra_info("socket"))})


if __name__ == "__main__":
    driver.main("walkthrough", ["websockets"], open_connection, lambda args: {"compression_offered": False})
'''

MANIFEST = '''[[server]]
name = "walkthrough"
runtime = "python"
protocol = "websocket"
command = ["{{python}}", "{folder}/walkthrough_server.py"]
requires = ["python-module:websockets"]
loops = ["auto"]
compression = ["default", "off"]
description = "TEST ONLY: the walkthrough's server"

[[client]]
name = "walkthrough"
runtime = "python"
protocol = "websocket"
command = ["{{python}}", "{folder}/walkthrough_client.py"]
requires = ["python-module:websockets"]
loops = ["auto"]
compression = ["default", "off"]
description = "TEST ONLY: the walkthrough's client"
'''


def run_bench(*args, **kwargs):
    # The walkthrough's files live in servers/ and clients/; these live in tmp_path, so they find the kit
    # through PYTHONPATH instead.
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "run_bench.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=environment, **kwargs)


def test_the_walkthrough_adds_a_server_and_a_client_that_run(tmp_path):
    """Steps 1–5: the two programs and a manifest are listed as available and measured against websockets."""
    (tmp_path / "walkthrough_server.py").write_text(SERVER)
    (tmp_path / "walkthrough_client.py").write_text(CLIENT)
    manifest = tmp_path / "my.toml"
    manifest.write_text(MANIFEST.format(folder=tmp_path))
    listed = json.loads(run_bench("--list", "--manifest", "manifest.toml", "--manifest", str(manifest),
                                  "--format", "json").stdout)
    ours = [row for row in listed if row["name"] == "walkthrough"]
    assert [(row["role"], row["available"]) for row in ours] == [("server", True), ("client", True)]
    completed = run_bench("--manifest", "manifest.toml", "--manifest", str(manifest),
                          "--servers", "walkthrough,websockets", "--clients", "walkthrough",
                          "--duration", "0.5", "--warmup", "0.2", "--repeat", "1", "--no-figures", *QUICK_RELAY_CHECK,
                          "--results-dir", str(tmp_path / "results"), "--format", "json")
    assert completed.returncode == 0, completed.stderr[-3000:]
    cells = {(c["server"], c["client"]): c for c in json.loads(completed.stdout)["cells"]}
    assert set(cells) == {("walkthrough", "walkthrough"), ("websockets", "walkthrough")}
    for cell in cells.values():
        assert cell["status"] == "ok" and cell["attempts"][0]["roundtrips"] > 0
