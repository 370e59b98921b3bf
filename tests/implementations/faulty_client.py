"""TEST ONLY: a client driver that breaks the contract on purpose, as --fault says (see tests/manifest.toml)."""

import json
import runpy
import sys
import time

from pingpong.contract import CLIENT_REPORT_FORMAT_VERSION

FAULT = sys.argv[sys.argv.index("--fault") + 1]

# Faults of one client process among several (its room ends in -c1): the others are the real websockets client.
if FAULT in ("crash-in-process-1", "hang-in-process-1"):
    if not sys.argv[sys.argv.index("--url") + 1].endswith("-c1"):
        del sys.argv[sys.argv.index("--fault"):sys.argv.index("--fault") + 2]
        runpy.run_module("clients.websockets_client", run_name="__main__")
        sys.exit(0)
    FAULT = FAULT.removesuffix("-in-process-1")

if FAULT == "crash":
    print("faulty client: crashing on purpose", file=sys.stderr)
    sys.exit(4)
if FAULT == "hang":
    print("faulty client: hanging on purpose", file=sys.stderr, flush=True)
    while True:
        time.sleep(1)
if FAULT == "no-json":
    print("faulty client: printing nothing on stdout", file=sys.stderr)
    sys.exit(0)
if FAULT == "garbage-json":
    print("roundtrips: lots")
    sys.exit(0)
if FAULT == "zero-roundtrips":
    print(json.dumps({"format_version": CLIENT_REPORT_FORMAT_VERSION, "roundtrips": 0, "elapsed_s": 1.0,
                      "roundtrips_per_s": 0.0, "error": None, "errors": 0}))
    sys.exit(0)
if FAULT == "future-version":  # a report from a newer contract, which this orchestrator must not guess at
    print(json.dumps({"format_version": CLIENT_REPORT_FORMAT_VERSION + 1, "roundtrips": 900, "elapsed_s": 1.0,
                      "roundtrips_per_s": 900.0, "error": None, "errors": 0}))
    sys.exit(0)
sys.exit(f"unknown fault {FAULT}")
