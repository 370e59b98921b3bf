"""A --cluster run on this one machine: hosts made of network namespaces, joined by veth links to a bridge.

It makes the cluster's certificates, three namespaces (h0: the scheduler and the orchestrator; server: a worker
offering server=1; client: a worker offering client=1), starts the scheduler with mutual TLS and the workers with
`run_bench.py cluster scheduler|worker` (docs/cluster.md), runs `run_bench.py --cluster ... ARGS` in h0, and
removes everything afterwards. Whatever follows `--` goes to run_bench.py (the results land in its --results-dir,
results/ by default).

Needs root (namespaces) and iproute2. Exits with run_bench.py's exit code.
Usage: python -m benchmarks.cluster_lab -- --servers sanic,node-ws --clients websockets,node-ws --repeat 3
"""

from __future__ import annotations

import os
import subprocess
import sys

from benchmarks import netns_lab
from benchmarks.rounds_setup import ROOT


def main() -> int:
    arguments = sys.argv[1:]
    if arguments[:1] == ["--"]:
        arguments = arguments[1:]
    elif arguments[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    problem = netns_lab.available()
    if problem:
        print(f"cluster_lab: {problem}", file=sys.stderr)
        return 2
    with netns_lab.dask_cluster([("server", "server", "server-host"), ("client", "client", "client-host")]) as (
            lab, scheduler, tls):
        print(f"cluster_lab: scheduler {scheduler}; server host {lab.hosts['server'].address}, client host "
              f"{lab.hosts['client'].address}", file=sys.stderr, flush=True)
        done = subprocess.run(["ip", "netns", "exec", lab.hosts["h0"].netns, sys.executable, "run_bench.py",
                               "--cluster", scheduler, "--cluster-tls", str(tls), *arguments],
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
