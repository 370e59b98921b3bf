"""The implementation manifest: which servers and clients exist, how to start them, whether they can run here."""

from __future__ import annotations

import functools
import importlib.util
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pingpong.contract import COMPRESSION_MODES, CPU_FEATURES, FEATURES, LOOPS

ROLES = ("server", "client")
RUNTIMES = ("python", "node", "bun", "native")
PROTOCOLS = ("websocket", "raw-tcp")
REQUIREMENT_KINDS = ("python-module", "node-package", "executable", "file")
DEFAULT_SET = "default"  # the set of an entry without `sets`: what a run measures when not told which
ALL_SET = "all"  # every implementation of the role, whatever its sets
# A built program that could not be built here: its build script writes why, in one line, to FILE + this suffix.
UNAVAILABLE_SUFFIX = ".unavailable"
# How a client's roundtrips are counted: "contract", by the client itself in its report (docs/contract.md);
# "outside", by the orchestrator, of a program that knows nothing of the contract (measure/outside.py)
MEASURE_MODES = ("contract", "outside")
URL_PLACEHOLDER = "{url}"  # in an outside program's command: the room's ws:// URL


class ManifestError(Exception):
    """The manifest cannot be read or an entry is invalid; the message names the file, entry and field."""


@dataclass(frozen=True)
class Implementation:
    """One server or client program as the manifest describes it."""

    name: str
    role: str
    runtime: str
    protocol: str
    command: tuple[str, ...]
    requires: tuple[str, ...]
    loops: tuple[str, ...]
    compression: tuple[str, ...]
    description: str = ""
    features: tuple[str, ...] = ()
    sets: tuple[str, ...] = (DEFAULT_SET,)  # named sets it belongs to (--servers native, default, ...)
    measure: str = "contract"  # MEASURE_MODES
    twin: str | None = None  # a plain program: the suite's driver client of the same library, shown beside it
    # The command (run from the project root) that builds its "file:" requirements, on the first run that names it
    # when one is missing (native_build.py); () when they come with the set-up
    build: tuple[str, ...] = ()

    @property
    def outside(self) -> bool:
        """A program measured from outside: it gets the room's URL and nothing else of the contract."""
        return self.measure == "outside"


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str | None = None  # why not, when unavailable


def load_manifest(path: Path) -> list[Implementation]:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"manifest {path} is not valid TOML: {exc}") from None
    unknown_tables = set(data) - set(ROLES)
    if unknown_tables:
        raise ManifestError(f"manifest {path}: unknown table(s) {', '.join(sorted(unknown_tables))}; "
                            f"expected [[server]] and [[client]]")
    implementations = []
    for role in ROLES:
        seen = set()
        for index, entry in enumerate(data.get(role, [])):
            implementation = _parse_entry(path, role, index, entry)
            if implementation.name in seen:
                raise ManifestError(f"manifest {path}: {role} '{implementation.name}' is listed twice")
            seen.add(implementation.name)
            implementations.append(implementation)
    return implementations


def _parse_entry(path: Path, role: str, index: int, entry: dict) -> Implementation:
    label = f"{role} '{entry.get('name')}'" if isinstance(entry.get("name"), str) else f"{role} entry #{index + 1}"

    def fail(field: str, problem: str) -> ManifestError:
        return ManifestError(f"manifest {path}: {label}: field '{field}' {problem}")

    def text(field: str, choices: tuple[str, ...] | None = None, required: bool = True) -> str:
        value = entry.get(field, None if required else "")
        if not isinstance(value, str) or (required and not value):
            raise fail(field, "is missing" if value is None else "must be a non-empty string")
        if choices and value not in choices:
            raise fail(field, f"is '{value}'; expected one of {', '.join(choices)}")
        return value

    def strings(field: str, choices: tuple[str, ...] | None = None) -> tuple[str, ...]:
        value = entry.get(field)
        if value is None:
            raise fail(field, "is missing")
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise fail(field, "must be a list of non-empty strings")
        for item in value:
            if choices and item not in choices:
                raise fail(field, f"has '{item}'; expected items from {', '.join(choices)}")
        return tuple(value)

    known = {"name", "runtime", "protocol", "command", "requires", "loops", "compression", "description", "features",
             "sets", "measure", "twin", "build"}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise fail(unknown[0], "is not a known field")
    implementation = Implementation(
        name=text("name"),
        role=role,
        runtime=text("runtime", RUNTIMES),
        protocol=text("protocol", PROTOCOLS),
        command=strings("command"),
        requires=strings("requires"),
        loops=strings("loops", LOOPS),
        compression=strings("compression", COMPRESSION_MODES),
        description=text("description", required=False),
        features=strings("features", FEATURES) if "features" in entry else (),
        sets=strings("sets") if "sets" in entry else (DEFAULT_SET,),
        measure=text("measure", MEASURE_MODES) if "measure" in entry else "contract",
        twin=text("twin") if "twin" in entry else None,
        build=strings("build") if "build" in entry else (),
    )
    if not implementation.command:
        raise fail("command", "is empty")
    if not implementation.loops or not implementation.compression or not implementation.sets:
        raise fail("loops" if not implementation.loops else "compression" if not implementation.compression
                   else "sets", "is empty")
    if implementation.outside:
        problem = outside_entry_problem(implementation)
        if problem:
            raise fail(*problem)
    elif implementation.twin is not None:
        raise fail("twin", "is for a program measured from outside (measure = \"outside\")")
    cpu_features = [feature for feature in implementation.features if feature in CPU_FEATURES]
    if cpu_features and role != "server" or len(cpu_features) > 1:
        raise fail("features", f"has {' and '.join(cpu_features)}: a server uses N CPUs one way (processes or "
                               f"threads), a client none of them")
    if "build" in entry and not implementation.build:
        raise fail("build", "is empty")
    if implementation.build and not any(r.startswith("file:") for r in implementation.requires):
        raise fail("build", "builds files: it needs a \"file:\" requirement to know when they are missing")
    if ALL_SET in implementation.sets:
        raise fail("sets", f"has '{ALL_SET}', which names every implementation already")
    for requirement in implementation.requires:
        kind, _, name = requirement.partition(":")
        if kind not in REQUIREMENT_KINDS or not name:
            raise fail("requires", f"has '{requirement}'; expected KIND:NAME with KIND one of "
                                   f"{', '.join(REQUIREMENT_KINDS)}")
    return implementation


def outside_entry_problem(implementation: Implementation) -> tuple[str, str] | None:
    """What makes an entry unfit to be measured from outside, as (field, problem), or None."""
    if implementation.role != "client":
        return "measure", "is 'outside', which only a client can be"
    if implementation.protocol != "websocket":
        return "protocol", "must be websocket for a program measured from outside"
    if not any(URL_PLACEHOLDER in part for part in implementation.command):
        return "command", f"has no {URL_PLACEHOLDER}, where the program measured from outside gets the room's URL"
    if implementation.features:
        return "features", "must be empty: a program measured from outside runs one plain ping-pong pair"
    return None


def runtime_executable(runtime: str, project_root: Path) -> str | None:
    """The interpreter a runtime name stands for, or None when it is not on this machine."""
    if runtime == "python":
        return sys.executable
    if runtime == "node":
        return shutil.which("node")
    if runtime == "native":  # a program built by the setup step, named by its path in the command
        return "native"
    if runtime == "bun":
        local = project_root / "node_modules" / ".bin" / "bun"
        return str(local) if local.exists() else shutil.which("bun")
    return None


def check_availability(implementation: Implementation, project_root: Path, python: str | None = None,
                       python_name: str = "that environment") -> Availability:
    """Whether the implementation runs here; python: the interpreter its "{python}" runs on, when not the running
    one (--python, --python-packages), whose environment is asked for its modules; python_name names it."""
    if runtime_executable(implementation.runtime, project_root) is None:
        return Availability(False, f"runtime '{implementation.runtime}' not found")
    for requirement in implementation.requires:
        kind, _, name = requirement.partition(":")
        if kind == "python-module" and python is not None and implementation.runtime == "python":
            if not importable(python, name):
                return Availability(False, f"Python module '{name}' is not in the environment of {python_name}")
            continue
        if kind == "python-module" and importlib.util.find_spec(name) is None:
            return Availability(False, f"Python module '{name}' is not installed (pip install -r requirements.txt)")
        if kind == "node-package" and not (project_root / "node_modules" / name / "package.json").exists():
            return Availability(False, f"npm package '{name}' is not installed (npm ci)")
        if kind == "executable" and shutil.which(name) is None and runtime_executable(name, project_root) is None:
            return Availability(False, f"executable '{name}' not found on PATH")
        if kind == "file" and not (project_root / name).exists():
            return Availability(False, unbuilt_reason(project_root / name, name, implementation.build))
    return Availability(True)


@functools.lru_cache(maxsize=None)
def importable(python: str, module: str) -> bool:
    """Whether that interpreter finds the module (asked once per pair: a run asks the same few many times)."""
    try:
        completed = subprocess.run([python, "-c", "import importlib.util, sys; "
                                    "sys.exit(importlib.util.find_spec(sys.argv[1]) is None)", module],
                                   capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return completed.returncode == 0


def unbuilt_reason(path: Path, name: str, build: tuple[str, ...] = ()) -> str:
    """Why a built program is missing: its build script's one line (FILE.unavailable), else that it was not built
    (and what builds it: the entry's build command on its first use, else the set-up's)."""
    try:
        written = (path.parent / (path.name + UNAVAILABLE_SUFFIX)).read_text().strip().splitlines()
    except OSError:
        written = []
    if written and written[0].strip():
        again = (f"; once that is fixed, the next run that names it builds it again ({' '.join(build)})" if build
                 else "; once that is fixed, sh native/build.sh builds it again")
        return f"'{name}' could not be built here: {written[0].strip()}{again}"
    if build:
        return f"'{name}' has not been built yet: the first run that names it builds it ({' '.join(build)})"
    return f"'{name}' has not been built (npm ci builds it: sh native/build.sh)"


def resolve_command(implementation: Implementation, project_root: Path, python: str | None = None) -> list[str]:
    """The command with its runtime placeholders replaced by real executables ("{root}" = the project folder).

    python: another interpreter for "{python}" (a --python-packages environment's).
    """
    replacements = {f"{{{runtime}}}": runtime_executable(runtime, project_root) for runtime in RUNTIMES}
    if python:
        replacements["{python}"] = python
    replacements["{root}"] = str(project_root)
    return [replacements.get(part) or part.replace("{root}", str(project_root)) for part in implementation.command]
