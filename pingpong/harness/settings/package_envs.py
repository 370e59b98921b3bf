"""Other package versions than the pinned ones, on demand: isolated, cached environments for old releases.

`--python-packages "aiohttp==3.9.1 uvicorn==0.24.0.post1"` builds a virtual environment from requirements.txt with
those pins replaced (or added); `--node-packages "ws@8.14.2"` builds a node_modules folder from package.json's
dependencies with those versions. Both live in the user's cache folder (see cache_folder), named by a hash of what
is in them, so a second run with the same versions reuses them, from any checkout. Every Python implementation of
the run uses the environment's interpreter; every JavaScript implementation loads its packages from the environment
(node/dependencies.js). The packages are installed by uv where the harness has it, else by pip (installer()).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pingpong.harness.settings.usage import UsageError

CACHE_FOLDER_ENV = "PINGPONG_CACHE_DIR"


def cache_folder() -> Path:
    """Where the environments are kept: $PINGPONG_CACHE_DIR, else $XDG_CACHE_HOME (or ~/.cache) /
    websocket-pingpong-bench/envs. Outside the checkout, so a fresh clone (a CI run, a newcomer's second clone)
    reuses what an earlier one built; each folder's name is a hash of its contents, so no two setups mix."""
    if os.environ.get(CACHE_FOLDER_ENV):
        return Path(os.environ[CACHE_FOLDER_ENV])
    user_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return user_cache / "websocket-pingpong-bench" / "envs"
PYTHON_SPEC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9,._-]+\])?\s*(==|>=|<=|~=|!=|<|>)\s*\S+$")
NODE_SPEC = re.compile(r"^(@?[a-z0-9][a-z0-9._-]*(?:/[a-z0-9][a-z0-9._-]*)?)@(\S+)$")
INSTALL_TIMEOUT_S = 900
OPTIONAL_NODE_DEPENDENCIES = ("bun",)  # runtimes, not libraries: left out of a node environment unless asked for


class EnvironmentBuildError(Exception):
    """An environment could not be built: the message is the installer's last words, on one line."""


@dataclass(frozen=True)
class PackageEnvironment:
    kind: str  # python or node
    specs: tuple[str, ...]
    path: str  # the venv folder, or the folder holding node_modules
    executable_or_modules: str  # the venv's python, or the node_modules folder
    versions: dict[str, str]  # what is installed in it, by package name
    policy: str = "pinned"  # how requirements.txt's pins were taken: "pinned", or "pins as ceilings" (Python only)
    failed: dict[str, str] = field(default_factory=dict)  # packages that did not install: why, on one line
    interpreter: dict[str, str] | None = None  # --python: the interpreter it was made from (Interpreter.recorded)
    installer: str = "pip"  # what installed its packages: uv or pip (installer(); pip before 2026-11-28)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_specs(text: str, option: str, pattern: re.Pattern, example: str) -> list[str]:
    """The whitespace-separated specs of --python-packages / --node-packages, each checked against pattern."""
    specs = text.split()
    if not specs:
        raise UsageError(f"{option} needs at least one package, e.g. \"{example}\"")
    for spec in specs:
        if not pattern.match(spec):
            raise UsageError(f"{option}: {spec!r} is not a package like \"{example}\"")
    return specs


def parse_python_specs(text: str) -> list[str]:
    return parse_specs(text, "--python-packages", PYTHON_SPEC, "aiohttp==3.9.1")


def parse_node_specs(text: str) -> list[str]:
    return parse_specs(text, "--node-packages", NODE_SPEC, "ws@8.14.2")


# What only the orchestrator and the tests import (figures, the cluster mode, the terminal, profilers, pytest), with
# what they alone pull in: an environment's processes are servers, clients and workers (pingpong/kit, servers/,
# clients/), which import none of it, so it is left out of their environments (a build takes half the time).
HARNESS_ONLY_PACKAGES = frozenset({
    "pytest", "pytest-timeout", "pytest-xdist", "execnet", "iniconfig", "pluggy",
    "matplotlib", "contourpy", "cycler", "fonttools", "kiwisolver", "numpy", "pillow", "pyparsing", "python-dateutil",
    "dask", "distributed", "cloudpickle", "fsspec", "partd", "locket", "toolz", "zict", "tornado", "msgpack",
    "sortedcontainers", "tblib", "importlib-metadata", "zipp", "lazy-importer",
    "rich", "markdown-it-py", "mdurl", "pygments", "py-spy", "uv",
    # --tls: the orchestrator makes the certificates (kit/tls.py imports trustme only there); processes read files
    "trustme", "cryptography", "cffi", "pycparser",
})


def requirement_name(line: str) -> str | None:
    """The normalized package name a requirements.txt line pins; None for a comment or a blank line; pure."""
    match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)", line.split("#", 1)[0].strip())
    return normalize(match.group(1)) if match else None


def process_requirements(requirements: str) -> str:
    """requirements.txt's pins less those of HARNESS_ONLY_PACKAGES: what an environment's processes need, a pin a
    line without comments (the environments are keyed by this text, so a comment edited in requirements.txt leaves
    them as they are); pure."""
    lines = (re.sub(r"(^|\s)#.*", "", line).strip() for line in requirements.splitlines())  # pip's comments only
    kept = [line for line in lines if line and requirement_name(line) not in HARNESS_ONLY_PACKAGES]
    return "\n".join(kept) + "\n"


def override_requirements(requirements: str, specs: list[str]) -> str:
    """requirements.txt's text with the lines of the specs' packages replaced, and other specs appended; pure."""
    wanted = {normalize(PYTHON_SPEC.match(spec).group(1)): spec for spec in specs}
    lines = []
    for line in requirements.splitlines():
        name = requirement_name(line)
        if name in wanted:
            lines.append(wanted.pop(name) + "  # overridden by --python-packages")
        else:
            lines.append(line)
    lines += [f"{spec}  # added by --python-packages" for spec in wanted.values()]
    return "\n".join(lines) + "\n"


def override_dependencies(dependencies: dict[str, str], specs: list[str]) -> dict[str, str]:
    """package.json's dependencies with the specs' versions; runtimes (bun) left out unless asked for; pure."""
    wanted = dict(NODE_SPEC.match(spec).groups() for spec in specs)
    chosen = {name: version for name, version in dependencies.items() if name not in OPTIONAL_NODE_DEPENDENCIES}
    chosen.update(wanted)
    return dict(sorted(chosen.items()))


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _run(argv: list[str], cwd: Path | None = None) -> None:
    try:
        completed = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise EnvironmentBuildError(f"{' '.join(argv[:4])} did not finish within {INSTALL_TIMEOUT_S} s") from None
    if completed.returncode != 0:
        tool = " ".join(argv[2:4]) if argv[1:2] == ["-m"] else f"{Path(argv[0]).name} {argv[1]}"
        raise EnvironmentBuildError(f"{tool} failed: {first_error(completed.stderr + completed.stdout)[:300]}")


def first_error(output: str) -> str:
    """An installer's first error on one line, with uv's cause after it ("error: No solution found ..." says little
    alone); pure."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if "error" in line.lower() and "complete log" not in line and " code " not in line:
            cause = lines[index + 1] if index + 1 < len(lines) and lines[index + 1].startswith("cause:") else ""
            return f"{line} ({cause})" if cause else line
    return lines[0] if lines else "(no output)"


class FileLock:
    """An exclusive lock on a file, so two runs never build the same environment (or program) at once."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "w")

    def __enter__(self):
        fcntl.flock(self.file, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc_info):
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


@contextlib.contextmanager
def _removed_on_failure(folder: Path):
    """A build that fails leaves no half-built folder behind (a complete one has installed.json)."""
    try:
        yield
    except BaseException:
        if not (folder / "installed.json").exists():
            shutil.rmtree(folder, ignore_errors=True)
        raise


def pins_as_ceilings(requirements: str) -> str:
    """requirements.txt's text with each exact pin (==) made a ceiling (<=): for an interpreter the pins were not
    made on, pip takes each package's newest release up to the pin that supports it (websockets 15.0.1 on Python
    3.9, where 17.4 needs 3.11). What --python-packages asked for stays exact; pure."""
    return "\n".join(line if "by --python-packages" in line else
                     re.sub(r"^([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?)\s*==", r"\1<=", line)
                     for line in requirements.split("\n"))


INSTALLER_ENV = "PINGPONG_INSTALLER"  # "pip": the environment's own pip, with pip's configuration (an index of yours)


def installer() -> str:
    """What installs an environment's packages: uv (requirements.txt pins it), which installs the same versions from
    the same wheels as pip in a quarter of its time (benchmarks/env_build: 8.3 s against 34.4-36.4 s on Python 3.9,
    results/reference/2026-11-28-env-build.json.xz); the environment's own pip where uv is not installed or
    INSTALLER_ENV says pip. uv reads its own configuration (UV_INDEX_URL), not pip's."""
    if os.environ.get(INSTALLER_ENV, "uv") != "pip" and importlib.util.find_spec("uv") is not None:
        return "uv"
    return "pip"


def _pip(tool: str, python: Path, command: str) -> list[str]:
    """The argv of `pip COMMAND` for python's environment, by the installer chosen for it: uv's from the harness's
    own Python, pip's from the environment's."""
    if tool == "uv":
        return [sys.executable, "-m", "uv", "pip", command, "--python", str(python)]
    return [str(python), "-m", "pip", command, "--disable-pip-version-check"]


def _install(tool: str, python: Path, *wanted: str) -> str | None:
    """Install WANTED (a package spec, or -r FILE) into python's environment with tool (installer()); None when it
    succeeded, else the installer's first error, on one line. Both compile the packages' bytecode as they install
    them, as pip does by default: a process that may not write it (PYTHONDONTWRITEBYTECODE) would compile its imports
    at every start."""
    quiet = ["--compile-bytecode", "--quiet", "--no-progress"] if tool == "uv" else ["--no-input", "-q"]
    try:
        _run([*_pip(tool, python, "install"), *quiet, *wanted])
    except EnvironmentBuildError as exc:
        return str(exc)
    return None


def _install_each(tool: str, python: Path, requirements: str) -> dict[str, str]:
    """Each requirement on its own (after the whole list failed): {package: why it did not install} for those that
    did not, so one package without a build for this interpreter (uvloop on PyPy) leaves the others usable."""
    failed: dict[str, str] = {}
    for line in requirements.splitlines():
        name = requirement_name(line)
        if name is not None:
            problem = _install(tool, python, line.split("#", 1)[0].strip())
            if problem:
                failed[name] = problem
    return failed


def python_environment(specs: list[str], project_root: Path, interpreter=None) -> PackageEnvironment:
    """A venv with requirements.txt's pins for its processes (process_requirements), the specs overriding them; built
    once, then reused. interpreter (interpreters.Interpreter): another Python than the running one. Where the pins
    do not all install on it, they become ceilings (pins_as_ceilings), and where even that fails, each package is
    installed on its own and those that fail are recorded ("failed": a cell needing one is skipped, saying why)."""
    requirements = override_requirements(process_requirements((project_root / "requirements.txt").read_text()), specs)
    # Keyed by the Python installation (base_prefix), not by the venv this runs in: the environment is a venv of its
    # own made from that installation, so every venv and clone of the suite on one machine shares it.
    if interpreter is None:
        identity, executable = (sys.version, sys.base_prefix), sys.executable
    else:
        identity = (interpreter.implementation, interpreter.implementation_version, interpreter.python_version,
                    interpreter.base_prefix)
        executable = interpreter.executable
    folder = cache_folder() / f"python-{_key(*identity, platform.machine(), requirements)}"
    python = folder / "bin" / "python"
    marker = folder / "installed.json"
    with FileLock(folder.with_suffix(".lock")), _removed_on_failure(folder):
        if not marker.exists():
            what = " ".join(specs) or "the pinned packages"
            on = f" on {interpreter.label}" if interpreter is not None else ""
            print(f"building a Python environment for {what}{on} in {folder} (once)", file=sys.stderr, flush=True)
            tool = installer()  # uv installs from outside: the venv needs no pip of its own (ensurepip took 3 s)
            _run([executable, "-m", "venv", "--clear", *(["--without-pip"] if tool == "uv" else []), str(folder)])
            (folder / "requirements.txt").write_text(requirements)
            policy, failed = "pinned", {}
            problem = _install(tool, python, "-r", str(folder / "requirements.txt"))
            if problem and interpreter is not None:
                policy = "pins as ceilings"
                ceilings = pins_as_ceilings(requirements)
                (folder / "requirements-ceilings.txt").write_text(ceilings)
                if _install(tool, python, "-r", str(folder / "requirements-ceilings.txt")):
                    failed = _install_each(tool, python, ceilings)
            elif problem:
                raise EnvironmentBuildError(problem)
            frozen = subprocess.run(_pip(tool, python, "freeze"), capture_output=True, text=True, timeout=120).stdout
            versions = dict(line.split("==", 1) for line in frozen.splitlines() if "==" in line)
            marker.write_text(json.dumps({"specs": specs, "versions": versions, "policy": policy, "failed": failed,
                                          "installer": tool,
                                          "interpreter": interpreter.recorded() if interpreter else None}, indent=1))
    installed = json.loads(marker.read_text())
    return PackageEnvironment("python", tuple(specs), str(folder), str(python), installed["versions"],
                              installed.get("policy", "pinned"), installed.get("failed", {}),
                              installed.get("interpreter"), installed.get("installer", "pip"))


def node_environment(specs: list[str], project_root: Path) -> PackageEnvironment:
    """A node_modules folder with package.json's dependencies, the specs overriding them; built once, reused."""
    project = json.loads((project_root / "package.json").read_text())
    dependencies = override_dependencies(project.get("dependencies", {}), specs)
    manifest = {"name": "pingpong-node-environment", "private": True, "dependencies": dependencies}
    text = json.dumps(manifest, indent=1)
    folder = cache_folder() / f"node-{_key(text)}"
    marker = folder / "installed.json"
    with FileLock(folder.with_suffix(".lock")), _removed_on_failure(folder):
        if not marker.exists():
            print(f"building a Node.js environment for {' '.join(specs)} in {folder} (once)", file=sys.stderr,
                  flush=True)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "package.json").write_text(text)
            _run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"], cwd=folder)
            versions = {}
            for name in dependencies:
                try:
                    versions[name] = json.loads((folder / "node_modules" / name / "package.json").read_text())[
                        "version"]
                except (OSError, ValueError, KeyError):
                    versions[name] = "?"
            marker.write_text(json.dumps({"specs": specs, "versions": versions}, indent=1))
    versions = json.loads(marker.read_text())["versions"]
    return PackageEnvironment("node", tuple(specs), str(folder), str(folder / "node_modules"), versions)
