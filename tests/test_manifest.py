"""Manifest loading: valid entries load, each invalid one is named with its field."""

import pytest

from pingpong.harness.manifest import ManifestError, check_availability, load_manifest
from tests.conftest import IMPLEMENTATIONS, ROOT

VALID = """
[[server]]
name = "x"
runtime = "python"
protocol = "websocket"
command = ["{python}", "-m", "servers.x"]
requires = []
loops = ["auto"]
compression = ["default"]
"""


def write(tmp_path, text):
    path = tmp_path / "m.toml"
    path.write_text(text)
    return path


def test_project_manifest_lists_the_seed_matrix():
    """The shipped manifest has the five seed servers and three seed clients, all available after setup."""
    names = {(i.role, i.name) for i in IMPLEMENTATIONS}
    assert {("server", n) for n in ("sanic", "blacksheep", "aiohttp", "websockets", "node-ws")} <= names
    assert {("client", n) for n in ("websockets", "aiohttp", "node-ws")} <= names
    for implementation in IMPLEMENTATIONS:
        assert check_availability(implementation, ROOT).available, implementation.name


def test_beyond_the_seed_anchors_are_listed():
    """picows, Bun, Node's built-in client and the four raw-TCP floors are registered with their protocols."""
    protocols = {(i.role, i.name): i.protocol for i in IMPLEMENTATIONS}
    for role, name in [("server", "picows"), ("server", "bun"), ("client", "picows"), ("client", "bun"),
                       ("client", "node-builtin")]:
        assert protocols[(role, name)] == "websocket"
    for role in ("server", "client"):
        for name in ("raw-tcp-python", "raw-tcp-c", "raw-tcp-node", "raw-tcp-bun"):
            assert protocols[(role, name)] == "raw-tcp", name


def test_c_floor_is_built_by_the_setup():
    """npm ci's postinstall builds the C floor: both binaries exist and are executable."""
    for program in ("raw_tcp_server", "raw_tcp_client"):
        path = ROOT / "build" / program
        assert path.exists() and path.stat().st_mode & 0o111, f"{path} missing: npm ci should build it"


@pytest.mark.parametrize("change,message", [
    (('runtime = "python"', 'runtime = "ruby"'), "server 'x': field 'runtime' is 'ruby'"),
    (('loops = ["auto"]', 'loops = ["fast"]'), "field 'loops' has 'fast'"),
    (('command = ["{python}", "-m", "servers.x"]', 'command = "python x.py"'), "field 'command' must be a list"),
    (('requires = []', 'requires = ["pip:x"]'), "field 'requires' has 'pip:x'"),
    (('protocol = "websocket"\n', ''), "field 'protocol' is missing"),
    (('compression = ["default"]', 'compression = ["default"]\ncolour = "red"'), "field 'colour' is not a known"),
])
def test_invalid_entries_name_entry_and_field(tmp_path, change, message):
    with pytest.raises(ManifestError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_manifest(write(tmp_path, VALID.replace(*change)))


def test_unparseable_and_duplicate(tmp_path):
    with pytest.raises(ManifestError, match="not valid TOML"):
        load_manifest(write(tmp_path, "[[server]\nname="))
    with pytest.raises(ManifestError, match="listed twice"):
        load_manifest(write(tmp_path, VALID + VALID))


def test_missing_module_makes_an_implementation_unavailable_with_the_reason(tmp_path):
    implementation = load_manifest(write(tmp_path, VALID.replace("requires = []",
                                                                 'requires = ["python-module:no_such_mod"]')))[0]
    availability = check_availability(implementation, ROOT)
    assert not availability.available and "no_such_mod" in availability.reason
