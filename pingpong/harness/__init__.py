"""The orchestrator: everything that runs in run_bench.py's process (catalog, runner, results, reports)."""
