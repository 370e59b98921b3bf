"""What runs in run_bench.py's process: the commands, the measuring loop, the results and their reports.

Packages by concern, lowest first; each imports only from the packages before it (and from pingpong.contract):
system (this machine's processes and kernel), settings (the manifest and a run's resolved settings), results (the
typed run record and its files), analysis (statistics, summaries, flags, costs), report (the exporters: Markdown,
CSV, terminal, HTML, figures), measure (one attempt, the rounds), cluster (the same on other hosts), commands.
"""
