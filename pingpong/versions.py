"""The installed version of each named Python package, as both worlds record it.

A leaf: it imports only the standard library, so a client or server process (pingpong/kit) and run_bench.py's
process (pingpong/harness, for the run's environment) both import it without loading the other's modules.
"""

from importlib import metadata


def library_versions(names: list[str]) -> dict[str, str]:
    """Each name's installed distribution version, or "not installed"."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
