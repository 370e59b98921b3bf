"""Manifest loading: valid entries load, each invalid one is named with its field."""

import os

import pytest

from pingpong.harness.settings.manifest import ManifestError, check_availability, load_manifest
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
    """The shipped manifest has the five seed servers and three seed clients, all available after setup.

    The compiled WebSocket programs (set native) are built by the same setup when their toolchains are here; CI
    installs them all, so there every one must be available. Elsewhere one may be missing, but only with the reason
    its build script wrote."""
    names = {(i.role, i.name) for i in IMPLEMENTATIONS}
    assert {("server", n) for n in ("sanic", "blacksheep", "aiohttp", "websockets", "node-ws")} <= names
    assert {("client", n) for n in ("websockets", "aiohttp", "node-ws")} <= names
    for implementation in IMPLEMENTATIONS:
        availability = check_availability(implementation, ROOT)
        if "native" in implementation.sets and not os.environ.get("CI"):
            assert availability.available or "could not be built here: " in availability.reason, availability
        else:
            assert availability.available, (implementation.name, availability.reason)


def test_the_compiled_websocket_programs_are_a_named_set_outside_the_default_matrix():
    """Go, Rust and C++ servers and clients, one each, and cpprestsdk's client, in set native only; the protocol
    floor's server and client in set native and protocol-floor; the plain programs (measured from outside) in set
    plain; the multi-process servers (feature workers) in set workers; every other entry in the default set; set
    lemire is Lemire's four servers and his two clients as written."""
    native = {(i.role, i.name) for i in IMPLEMENTATIONS if "native" in i.sets}
    protocol_floor = {(role, "c-ws-floor") for role in ("server", "client")}
    assert native == {(role, name) for role in ("server", "client")
                      for name in ("go-gorilla", "rust-tungstenite", "cpp-websocketpp")} | {
        ("client", "cpp-cpprestsdk")} | protocol_floor
    assert {(i.role, i.name) for i in IMPLEMENTATIONS if "protocol-floor" in i.sets} == protocol_floor
    plain = {i.name for i in IMPLEMENTATIONS if i.outside}
    assert plain == {"websockets-plain", "aiohttp-plain", "node-ws-plain"}
    lemire = {(i.role, i.name) for i in IMPLEMENTATIONS if "lemire" in i.sets}
    assert lemire == {("server", "sanic"), ("server", "blacksheep"), ("server", "aiohttp"), ("server", "node-ws"),
                      ("client", "websockets-plain"), ("client", "node-ws-plain")}
    for implementation in IMPLEMENTATIONS:
        key = (implementation.role, implementation.name)
        expected = ("native", "protocol-floor") if key in protocol_floor else ("native",) if key in native else (
            ("plain",) if implementation.outside else ("workers",) if "workers" in implementation.features
            else ("default",))
        assert set(implementation.sets) - {"lemire"} == set(expected), implementation.name
        if key in native:
            assert implementation.runtime == "native" and implementation.protocol == "websocket"
        # built on the first run that names them, by their language's set; the C floors come with npm ci
        expected_build = next((("sh", "native/build.sh", "websocket", language)
                               for language in ("go", "rust", "cpp") if implementation.name.startswith(language)), ())
        assert implementation.build == expected_build, implementation.name


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
    """npm ci's postinstall builds the C floors, raw TCP and the protocol's: the binaries exist and are executable."""
    for program in ("raw_tcp_server", "raw_tcp_client", "ws_floor_server", "ws_floor_client"):
        path = ROOT / "build" / program
        assert path.exists() and path.stat().st_mode & 0o111, f"{path} missing: npm ci should build it"


@pytest.mark.parametrize("change,message", [
    (('runtime = "python"', 'runtime = "ruby"'), "server 'x': field 'runtime' is 'ruby'"),
    (('loops = ["auto"]', 'loops = ["fast"]'), "field 'loops' has 'fast'"),
    (('command = ["{python}", "-m", "servers.x"]', 'command = "python x.py"'), "field 'command' must be a list"),
    (('requires = []', 'requires = ["pip:x"]'), "field 'requires' has 'pip:x'"),
    (('protocol = "websocket"\n', ''), "field 'protocol' is missing"),
    (('compression = ["default"]', 'compression = ["default"]\ncolour = "red"'), "field 'colour' is not a known"),
    (('compression = ["default"]', 'compression = ["default"]\nsets = []'), "field 'sets' is empty"),
    (('compression = ["default"]', 'compression = ["default"]\nsets = ["all"]'), "field 'sets' has 'all'"),
    (('compression = ["default"]', 'compression = ["default"]\nfeatures = ["workers", "threads"]'),
     "field 'features' has workers and threads: a server uses N CPUs one way"),
    (('compression = ["default"]', 'compression = ["default"]\nbuild = []'), "field 'build' is empty"),
    (('compression = ["default"]', 'compression = ["default"]\nbuild = ["make"]'),
     "field 'build' builds files: it needs a \"file:\" requirement"),
    (('[[server]]', '[[client]]'), None),  # a client: valid without a CPU feature ...
    (('[[server]]\n', '[[client]]\nfeatures = ["threads"]\n'), "client 'x': field 'features' has threads"),
])
def test_invalid_entries_name_entry_and_field(tmp_path, change, message):
    if message is None:
        assert load_manifest(write(tmp_path, VALID.replace(*change)))[0].name == "x"
        return
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


def test_a_program_that_could_not_be_built_says_why(tmp_path):
    """A missing built file is unavailable with its build script's one line (FILE.unavailable), else 'not built'."""
    entry = VALID.replace("requires = []", 'requires = ["file:build/x_server"]')
    implementation = load_manifest(write(tmp_path, entry))[0]
    (tmp_path / "build").mkdir()
    assert check_availability(implementation, tmp_path).reason == (
        "'build/x_server' has not been built (npm ci builds it: sh native/build.sh)")
    built_on_first_use = load_manifest(write(tmp_path, entry + 'build = ["sh", "build_x.sh"]\n'))[0]
    assert check_availability(built_on_first_use, tmp_path).reason == (
        "'build/x_server' has not been built yet: the first run that names it builds it (sh build_x.sh)")
    (tmp_path / "build" / "x_server.unavailable").write_text("cargo not found on PATH (install Rust)\n")
    assert check_availability(implementation, tmp_path).reason == (
        "'build/x_server' could not be built here: cargo not found on PATH (install Rust); once that is fixed, "
        "sh native/build.sh builds it again")
    assert check_availability(built_on_first_use, tmp_path).reason == (
        "'build/x_server' could not be built here: cargo not found on PATH (install Rust); once that is fixed, the "
        "next run that names it builds it again (sh build_x.sh)")
    (tmp_path / "build" / "x_server").write_bytes(b"")
    assert check_availability(implementation, tmp_path).available


def test_sets_select_their_members_and_the_default_set_is_the_default(tmp_path):
    """No --servers: the default set; a set name stands for its members of the role; 'all' for every one."""
    from pingpong.harness.settings.catalog import load_manifests, select
    from pingpong.harness.settings.usage import UsageError

    other = VALID.replace('name = "x"', 'name = "y"') + 'sets = ["extra"]\n'
    client = VALID.replace("[[server]]", "[[client]]")
    implementations = load_manifests([write(tmp_path, VALID + other + client)])
    names = lambda role, wanted: [i.name for i in select(implementations, role, wanted)]  # noqa: E731
    assert names("server", None) == ["x"]
    assert names("server", "extra") == ["y"]
    assert names("server", "extra,default") == ["y", "x"]
    assert names("server", "all") == ["x", "y"]
    assert names("server", "y,extra") == ["y"]
    assert names("client", None) == ["x"]
    with pytest.raises(UsageError, match="--clients extra: no client belongs to it"):
        select(implementations, "client", "extra")
    with pytest.raises(UsageError, match="or a set: default, extra, all"):
        select(implementations, "server", "nope")
    clash = VALID + VALID.replace('name = "x"', 'name = "extra"') + 'sets = ["x"]\n'
    with pytest.raises(ManifestError, match="set 'x' is also the name of an implementation"):
        load_manifests([write(tmp_path, clash)])
