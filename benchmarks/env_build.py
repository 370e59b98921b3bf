"""How long a `--python` / `--python-packages` environment takes to build with pip and with uv, side by side.

    python -m benchmarks.env_build [--python 3.9,3.11] [--rounds 1] [--specs "aiohttp==3.9.1"]

For each interpreter and round, it builds the same environment (requirements.txt's pins for the processes, the
specs overriding them, as `run_bench.py --python` does) once with each installer, in shuffled order, each in an empty
cache folder of its own: nothing downloaded or built before counts for either. It prints JSON: each build's wall
seconds, the CPU seconds of the processes it ran, the versions each installed and whether the two installers
installed the same ones (by normalized name, pip and setuptools left out: a venv made for pip brings its own
setuptools, which pip freeze hides, and uv installs the newest where a package needs it), and per interpreter the
median ratio of pip's time to uv's. Each build has empty download caches of its own too (PIP_CACHE_DIR,
UV_CACHE_DIR): a machine's first build. Later ones with uv are faster still, from its cache in ~/.cache/uv.

Why: the tests build four such environments on a machine that never built one (CI's), and a newcomer's first
`--python` or `--setup lemire-2023` run waits for each. pip's own work (resolving, unpacking, byte-compiling in one
process) was most of it, not the downloads.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pingpong.harness.settings import interpreters, package_envs

ROOT = Path(__file__).resolve().parent.parent
INSTALLERS = ("pip", "uv")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


INSTALLERS_OWN = {"pip", "setuptools", "wheel"}  # pip freeze leaves them out; a venv without pip has none of its own


def versions_apart(pip: dict[str, str], uv: dict[str, str]) -> dict[str, list]:
    """The packages whose versions differ, by normalized name (pip freeze keeps a package's own spelling, uv
    normalizes it), the installers' own packages left out: {name: [pip's, uv's]}; pure."""
    def normalized(versions):
        return {package_envs.normalize(name): version for name, version in versions.items()
                if package_envs.normalize(name) not in INSTALLERS_OWN}
    pip, uv = normalized(pip), normalized(uv)
    return {name: [pip.get(name), uv.get(name)] for name in sorted(pip.keys() | uv.keys())
            if pip.get(name) != uv.get(name)}


def build_once(asked: str, installer: str, specs: list[str]) -> dict:
    """One environment built from nothing with this installer: its time, its CPU and what it installed."""
    interpreter = interpreters.find(asked)
    with tempfile.TemporaryDirectory(prefix="env-build-") as cache:
        os.environ[package_envs.CACHE_FOLDER_ENV] = cache
        os.environ[package_envs.INSTALLER_ENV] = installer
        os.environ["PIP_CACHE_DIR"] = os.environ["UV_CACHE_DIR"] = str(Path(cache) / "downloads")
        cpu_before, began = children_cpu_s(), time.perf_counter()
        environment = package_envs.python_environment(specs, ROOT, interpreter)
        wall_s, cpu_s = time.perf_counter() - began, children_cpu_s() - cpu_before
    return {"python": asked, "installer": environment.installer, "wall_s": round(wall_s, 2),
            "cpu_s": round(cpu_s, 2), "policy": environment.policy, "failed": environment.failed,
            "versions": environment.versions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.env_build", description=__doc__.split("\n")[0])
    parser.add_argument("--python", default=f"3.9,{sys.version_info.major}.{sys.version_info.minor}",
                        help="interpreters, as --python takes them (default: 3.9 and the running one)")
    parser.add_argument("--rounds", type=int, default=1, help="builds per interpreter and installer (default 1)")
    parser.add_argument("--specs", default="", help="--python-packages specs (default: none, the pinned packages)")
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args(argv)
    if options.rounds < 1:
        parser.error("--rounds must be 1 or more")
    asked = [name.strip() for name in options.python.split(",") if name.strip()]
    for name in asked:
        try:
            interpreters.find(name)
        except Exception as exc:  # a UsageError saying which interpreters there are
            parser.error(f"--python {name}: {exc}")
    if importlib.util.find_spec("uv") is None:
        parser.error("uv is not installed (requirements.txt pins it)")
    specs = package_envs.parse_python_specs(options.specs) if options.specs else []
    order = random.Random(options.seed)
    builds = []
    for round_index in range(options.rounds):
        for name in asked:
            installers = list(INSTALLERS)
            order.shuffle(installers)
            for installer in installers:
                build = build_once(name, installer, specs) | {"round": round_index}
                print(f"round {round_index}, Python {name}, {installer}: {build['wall_s']} s "
                      f"({build['cpu_s']} CPU-s)", file=sys.stderr, flush=True)
                builds.append(build)
    summary = {}
    for name in asked:
        by = {installer: [b for b in builds if b["python"] == name and b["installer"] == installer]
              for installer in INSTALLERS}
        ratios = [p["wall_s"] / u["wall_s"] for p, u in zip(by["pip"], by["uv"]) if u["wall_s"]]
        summary[name] = {installer: {"median_wall_s": statistics.median(b["wall_s"] for b in runs),
                                     "median_cpu_s": statistics.median(b["cpu_s"] for b in runs)}
                         for installer, runs in by.items()}
        summary[name]["pip_over_uv"] = round(statistics.median(ratios), 2) if ratios else None
        differences = [versions_apart(p["versions"], u["versions"]) for p, u in zip(by["pip"], by["uv"])]
        summary[name]["same_versions"] = not any(differences)
        summary[name]["differences"] = [difference for difference in differences if difference]
    print(json.dumps({"benchmark": "env_build", "specs": specs, "rounds": options.rounds, "summary": summary,
                      "builds": builds}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
