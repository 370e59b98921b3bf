"""This machine as the orchestrator sees it: the processes it starts and reaps, the guardian, /proc's CPU,
scheduling and socket figures, the kernel's TCP counters, strace and the CPU profilers. Imports nothing else of the
harness."""
