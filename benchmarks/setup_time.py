"""How long a newcomer's set-up takes from a fresh clone, part by part, on a machine that never built anything.

    python -m benchmarks.setup_time [--commit HEAD[,OTHER...]] [--warm] [--output FILE]

It clones the project at the commit into a temporary folder and runs README's set-up there, one part at a time:
a virtual environment, `pip install uv==...`, `uv pip install --compile-bytecode -r requirements.txt`, `npm ci`,
then the compiled WebSocket programs (Go, Rust, C++) as their first use builds them (`sh native/build.sh websocket`;
at a commit from before that step existed, `npm ci` builds them and the part is absent). Every cache a part would
read is a new empty folder of its own: pip's, uv's, npm's, Go's build and module caches, cargo's home (registry and
downloads), the suite's native and environment caches. So nothing downloaded or compiled before counts: a new
machine's first set-up. --warm keeps this machine's own caches instead (a second clone's set-up).

It prints JSON on stdout (per commit, each part's wall seconds and the CPU seconds of the processes it ran, user
and system) and a table on stderr; --output also writes the JSON. Several commits are measured one after another,
each from empty caches of its own (a before and an after, in one run).

Why: issue 52 asks for `pip install -r requirements.txt && npm ci` in 150 s or less from a fresh clone here, and the
README states the time measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UV_PIN = "uv==0.13.8"  # README's set-up line


def cold_environment(caches: Path) -> dict[str, str]:
    """The environment of a machine whose caches are empty: every cache a set-up part reads, moved to a new folder.
    Cargo's home moves too (its registry and downloads); the toolchains themselves (rustup's, Go's) stay."""
    environment = dict(os.environ)
    for variable, folder in (("XDG_CACHE_HOME", "xdg"), ("PIP_CACHE_DIR", "pip"), ("UV_CACHE_DIR", "uv"),
                             ("npm_config_cache", "npm"), ("GOCACHE", "go-build"), ("GOMODCACHE", "go-mod"),
                             ("CARGO_HOME", "cargo"), ("PINGPONG_CACHE_DIR", "envs"),
                             ("PINGPONG_NATIVE_CACHE_DIR", "native")):
        environment[variable] = str(caches / folder)
        (caches / folder).mkdir(parents=True)
    cargo_bin = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "bin"
    if cargo_bin.is_dir():  # rustup's proxies (cargo, rustc) stay on PATH; they find the toolchain in RUSTUP_HOME
        environment["RUSTUP_HOME"] = os.environ.get("RUSTUP_HOME", str(Path.home() / ".rustup"))
        environment["PATH"] = f"{cargo_bin}{os.pathsep}{environment['PATH']}"
    return environment


def timed(name: str, command: list[str], cwd: Path, environment: dict[str, str]) -> dict:
    """Runs one part; its wall seconds and its process tree's CPU seconds (wait4's rusage of the child, which
    includes every descendant it waited for). A part that fails stops the set-up: raises with its output's tail."""
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    if process.returncode != 0:
        raise RuntimeError(f"{name} failed (exit {process.returncode}): {output[-2000:]}")
    part = {"part": name, "command": " ".join(command), "wall_s": round(wall, 1),
            "user_s": round(usage.ru_utime, 1), "system_s": round(usage.ru_stime, 1)}
    print(f"{name:<34} {wall:7.1f} s wall {usage.ru_utime + usage.ru_stime:7.1f} CPU-s", file=sys.stderr,
          flush=True)
    return part


def set_up(clone: Path, environment: dict[str, str]) -> list[dict]:
    venv_python = clone / ".venv" / "bin" / "python"
    environment = dict(environment, VIRTUAL_ENV=str(clone / ".venv"),
                       PATH=f"{clone / '.venv' / 'bin'}{os.pathsep}{environment['PATH']}")
    parts = [timed("python3 -m venv .venv", [sys.executable, "-m", "venv", ".venv"], clone, environment),
             timed(f"pip install {UV_PIN}", [str(venv_python), "-m", "pip", "install", "-q", UV_PIN], clone,
                   environment),
             timed("uv pip install -r requirements.txt", [str(clone / ".venv" / "bin" / "uv"), "pip", "install",
                                                          "-q", "--compile-bytecode", "-r", "requirements.txt"],
                   clone, environment),
             timed("npm ci", ["npm", "ci", "--no-audit", "--no-fund"], clone, environment)]
    if "websocket" in (clone / "native" / "build.sh").read_text():  # the compiled set, built on its first use
        parts.append(timed("native set (first use)", ["sh", "native/build.sh", "websocket"], clone, environment))
    return parts


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.machine()


def measure(commit: str, warm: bool) -> dict:
    """One commit's set-up from a fresh clone, part by part (raises RuntimeError when a part fails)."""
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    print(f"== {commit[:12]}, {'warm' if warm else 'empty'} caches", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="setup-time-") as folder:
        clone = Path(folder) / "clone"
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", commit], cwd=clone, check=True)
        environment = dict(os.environ) if warm else cold_environment(Path(folder) / "caches")
        try:
            parts = set_up(clone, environment)
        finally:
            subprocess.run(["chmod", "-R", "u+w", folder], check=False)  # Go makes its module cache read-only
    readme_parts = [p for p in parts if p["part"] != "native set (first use)"]
    measured = {"commit": commit, "caches": "warm" if warm else "empty", "started": started, "parts": parts,
                "readme_set_up_wall_s": round(sum(p["wall_s"] for p in readme_parts), 1),
                "readme_set_up_cpu_s": round(sum(p["user_s"] + p["system_s"] for p in readme_parts), 1)}
    print(f"README's set-up (venv to npm ci): {measured['readme_set_up_wall_s']} s wall, "
          f"{measured['readme_set_up_cpu_s']} CPU-s", file=sys.stderr)
    return measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default="HEAD",
                        help="the commit to clone, or several, comma-separated, one after another (default HEAD)")
    parser.add_argument("--warm", action="store_true", help="keep this machine's caches (a second clone's set-up)")
    parser.add_argument("--output", type=Path)
    arguments = parser.parse_args()
    commits = []
    for name in arguments.commit.split(","):
        resolved = subprocess.run(["git", "rev-parse", "--verify", f"{name.strip()}^{{commit}}"], cwd=ROOT,
                                  capture_output=True, text=True)
        if resolved.returncode != 0:
            print(f"setup_time: --commit {name.strip()}: not a commit of {ROOT}", file=sys.stderr)
            return 2
        commits.append(resolved.stdout.strip())
    try:
        runs = [measure(commit, arguments.warm) for commit in commits]
    except RuntimeError as problem:
        print(f"setup_time: {problem}", file=sys.stderr)
        return 1
    result = {"benchmark": "setup_time", "machine": cpu_model(), "cpus": os.cpu_count(), "kernel": platform.release(),
              "runs": runs}
    text = json.dumps(result, indent=2)
    print(text)
    if arguments.output:
        arguments.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
