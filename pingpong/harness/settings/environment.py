"""Facts about the machine and the suite that a reader needs to interpret (or reproduce) a run."""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

from pingpong.contract import MEASUREMENT_SWITCHES
from pingpong.harness.settings.manifest import runtime_executable
from pingpong.harness.system.cpu import cpu_source
from pingpong.harness.system.page_faults import fault_cost
from pingpong.versions import library_versions

PYTHON_PACKAGES = ["websockets", "sanic", "blacksheep", "uvicorn", "aiohttp", "uvloop", "hdrhistogram", "psutil"]


def describe_environment(project_root: Path) -> dict[str, Any]:
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_available": sorted(os.sched_getaffinity(0)),
        "memory_bytes": _memory_bytes(),
        "load_average_at_start": list(os.getloadavg()),
        "cpu_frequency_governor": _read_first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "cpu_time": cpu_source().to_json(),  # how the attempts' CPU seconds are read: source and resolution
        # what one minor page fault costs here (system/page_faults.py): a side's faults as a share of its roundtrip
        "page_fault": fault_cost(),
        "os": platform.system(),
        "kernel": platform.release(),
        "python": {"implementation": platform.python_implementation(), "version": platform.python_version(),
                   "executable": sys.executable},
        "node": _command_version([runtime_executable("node", project_root), "--version"]),
        "bun": _command_version([runtime_executable("bun", project_root), "--version"]),
        "python_packages": library_versions(PYTHON_PACKAGES),
        "node_packages": _node_packages(project_root),
        "suite_commit": _git(project_root, "rev-parse", "HEAD"),
        "suite_dirty": bool(_git(project_root, "status", "--porcelain", "--untracked-files=no")),
        # what every server and client gets (processes.raise_descriptor_limit): soft raised to hard
        "open_files_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[1],
        "ephemeral_ports": _read_first_line("/proc/sys/net/ipv4/ip_local_port_range"),
        "somaxconn": _read_first_line("/proc/sys/net/core/somaxconn"),
        # "1": each session a scheduling group; every process the run starts is in the orchestrator's (processes.py)
        "sched_autogroup_enabled": _read_first_line("/proc/sys/kernel/sched_autogroup_enabled"),
        # switches the programs read from the environment they inherit: set, they change what is measured
        "measurement_switches": {name: os.environ[name] for name in MEASUREMENT_SWITCHES if name in os.environ},
    }


def suite_commit(project_root: Path) -> tuple[str | None, bool]:
    """The commit the suite runs from (None outside git) and whether tracked files differ from it."""
    return (_git(project_root, "rev-parse", "HEAD"),
            bool(_git(project_root, "status", "--porcelain", "--untracked-files=no")))


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def _read_first_line(path: str) -> str | None:
    try:
        with open(path) as file:
            return file.readline().strip() or None
    except OSError:
        return None


def runtime_version(runtime: str, project_root: Path) -> str | None:
    """The version of a manifest runtime on this machine: Python's, `node --version`, `bun --version`; None else."""
    if runtime == "python":
        return platform.python_version()
    if runtime in ("node", "bun"):
        return _command_version([runtime_executable(runtime, project_root), "--version"])
    return None


def _command_version(argv: list[str | None]) -> str | None:
    if not argv[0]:
        return None
    try:
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return completed.stdout.strip().lstrip("v") or None


def _node_packages(project_root: Path) -> dict[str, str]:
    lock = project_root / "package-lock.json"
    try:
        packages = json.loads(lock.read_text()).get("packages", {})
    except (OSError, ValueError):
        return {}
    return {path.removeprefix("node_modules/"): entry.get("version")
            for path, entry in packages.items() if path.startswith("node_modules/") and "/node_modules/" not in path}


def _git(project_root: Path, *args: str) -> str | None:
    try:
        completed = subprocess.run(["git", *args], cwd=project_root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return completed.stdout.strip() if completed.returncode == 0 else None
