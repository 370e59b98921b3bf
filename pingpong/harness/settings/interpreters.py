"""The Python interpreters a run can measure on (`--python 3.9,3.13,pypy3`): found by name or path, each probed.

A name is a version ("3.9", "3.13.0": the running interpreter when it is that version, else pyenv's under `pyenv
root`, else `python3.9` on PATH), an executable's name on PATH ("pypy3", "python3.12") or a path. pyenv's shims on
PATH refuse to run a version other than the selected one, so pyenv's installations are looked up under its root
first. Each is run once to read what it is; one that does not run is a one-line usage error.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from pingpong.harness.settings.usage import UsageError

# The warm-up of a Python side on a JIT interpreter. benchmarks/jit_warmup on 2026-11-27 (18:20 UTC, AMD EPYC, 2
# vCPUs), cold PyPy 7.3.11 pairs (websockets and aiohttp servers × the websockets client, two starts each): 0.19-0.30x
# of their plateau in their first second, 0.34-0.55x in the second, 0.80-1.12x in the third, within the host's noise
# after (CPython 3.11's first seconds: within it from the start). Results file 2026-11-27-jit-warmup-pypy.json.xz
JIT_WARMUP_S = {"PyPy": 3.0}
VERSION_NAME = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")
PROBE_TIMEOUT_S = 30
# What the probe prints: the implementation, its Python version, its own version (PyPy's 7.3.x) and base prefix
PROBE = ("import json, platform, sys; print(json.dumps({'implementation': platform.python_implementation(), "
         "'python_version': platform.python_version(), 'implementation_version': '.'.join(map(str, "
         "sys.implementation.version[:3])), 'base_prefix': sys.base_prefix, 'executable': sys.executable}))")


@dataclass(frozen=True)
class Interpreter:
    asked: str  # as given on the command line: the label of its rows and columns
    executable: str  # an absolute path, run as is
    implementation: str  # CPython, PyPy
    python_version: str  # the language version it runs: 3.9.18
    implementation_version: str  # PyPy's own (7.3.11); CPython's equals python_version
    base_prefix: str

    @property
    def label(self) -> str:
        """"CPython 3.9.18", "PyPy 7.3.11 (Python 3.9.16)"."""
        if self.implementation == "CPython":
            return f"CPython {self.python_version}"
        return f"{self.implementation} {self.implementation_version} (Python {self.python_version})"

    @property
    def jit_warmup_s(self) -> float:
        return JIT_WARMUP_S.get(self.implementation, 0.0)

    def recorded(self) -> dict[str, str]:
        return asdict(self) | {"label": self.label}


def pyenv_root() -> Path | None:
    """$PYENV_ROOT, else `pyenv root`, else ~/.pyenv when it exists."""
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    if shutil.which("pyenv"):
        completed = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        if completed.returncode == 0 and completed.stdout.strip():
            return Path(completed.stdout.strip())
    home = Path.home() / ".pyenv"
    return home if home.is_dir() else None


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def pyenv_candidates(version: str) -> list[Path]:
    """pyenv's installed CPythons whose version starts with `version` ("3.9" -> 3.9.18), the newest first; pure
    but for the folder listing."""
    root = pyenv_root()
    if root is None or not (root / "versions").is_dir():
        return []
    found = [folder for folder in (root / "versions").iterdir()
             if VERSION_NAME.match(folder.name) and (folder.name == version or folder.name.startswith(version + "."))]
    return [folder / "bin" / "python" for folder in sorted(found, key=lambda f: version_key(f.name), reverse=True)
            if (folder / "bin" / "python").exists()]


def candidates(asked: str) -> list[str]:
    """The executables that may be the interpreter asked for, in the order they are tried."""
    if "/" in asked:
        return [asked]
    if VERSION_NAME.match(asked):
        running = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
        own = [sys.executable] if running == asked or running.startswith(asked + ".") else []
        major_minor = ".".join(asked.split(".")[:2])
        on_path = shutil.which(f"python{major_minor}")
        return own + [str(path) for path in pyenv_candidates(asked)] + ([on_path] if on_path else [])
    on_path = shutil.which(asked)
    return [on_path] if on_path else []


@functools.lru_cache(maxsize=None)
def probe(executable: str) -> dict[str, str] | str:
    """What the executable says it is, or why it did not say (one line)."""
    try:
        completed = subprocess.run([executable, "-c", PROBE], capture_output=True, text=True,
                                   timeout=PROBE_TIMEOUT_S, env=os.environ | {"PYTHONNOUSERSITE": "1"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if completed.returncode != 0:
        lines = [line.strip() for line in (completed.stderr + completed.stdout).splitlines() if line.strip()]
        return (lines[-1] if lines else f"exit code {completed.returncode}")[:200]
    try:
        return json.loads(completed.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"it printed {completed.stdout.strip()[:80]!r}"


def find(asked: str) -> Interpreter:
    """The interpreter asked for, probed; a UsageError in one line when there is none that runs."""
    asked = asked.strip()
    if not asked:
        raise UsageError("--python: an empty interpreter name (give e.g. 3.9, 3.13, pypy3 or a path)")
    tried = candidates(asked)
    problems = []
    for executable in tried:
        facts = probe(executable)
        if isinstance(facts, str):
            problems.append(f"{executable}: {facts}")
            continue
        version = facts["python_version"]
        if VERSION_NAME.match(asked) and not (version == asked or version.startswith(asked + ".")):
            problems.append(f"{executable} is Python {version}")
            continue
        return Interpreter(asked=asked, executable=str(Path(executable).absolute()),
                           implementation=facts["implementation"], python_version=version,
                           implementation_version=facts["implementation_version"], base_prefix=facts["base_prefix"])
    if not tried:
        where = "pyenv's versions, PATH" if VERSION_NAME.match(asked) else "PATH"
        raise UsageError(f"--python {asked}: no such interpreter here (looked in {where}; "
                         f"`run_bench.py list` shows those found)")
    raise UsageError(f"--python {asked}: no interpreter that runs ({'; '.join(problems)})")


def parse(text: str) -> tuple[Interpreter, ...]:
    """--python's comma-separated list, each found once; a repeated one is an error."""
    names = [name.strip() for name in text.split(",")]
    found = [find(name) for name in names]
    executables = [interpreter.executable for interpreter in found]
    for index, executable in enumerate(executables):
        if executable in executables[:index]:
            raise UsageError(f"--python: {found[index].asked} and {found[executables.index(executable)].asked} are "
                             f"the same interpreter ({executable})")
    return tuple(found)


def found_here() -> list[Interpreter]:
    """The interpreters this machine has that the suite can run on (CPython >= 3.9, PyPy): the running one, pyenv's,
    and python3.X / pypy3 on PATH; for `list`."""
    seen: set[str] = set()
    found: list[Interpreter] = []
    names = [f"{sys.version_info.major}.{sys.version_info.minor}"]
    root = pyenv_root()
    if root is not None and (root / "versions").is_dir():
        names += sorted({".".join(folder.name.split(".")[:2]) for folder in (root / "versions").iterdir()
                         if VERSION_NAME.match(folder.name)}, key=version_key)
    names += [f"3.{minor}" for minor in range(9, 16)] + ["pypy3"]
    for name in names:
        if VERSION_NAME.match(name) and version_key(name) < (3, 9):
            continue
        try:
            interpreter = find(name)
        except UsageError:
            continue
        if interpreter.executable not in seen:
            seen.add(interpreter.executable)
            found.append(interpreter)
    return found
