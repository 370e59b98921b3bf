"""A run as people read it: formatting (the helpers every report shares), the exporters built on it (markdown,
csv_rows, terminal, html, plots, sweep, workloads), and exporters.py: the one table of formats and the run's files
written from it. Pure functions of a record and its summaries, but for those files; may import settings, results,
analysis."""
