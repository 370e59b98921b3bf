"""A run as people read it: the formatting helpers, then the exporters built on them (Markdown, CSV, terminal, HTML,
PNG figures, sweep tables). Pure functions of a record and its summaries; may import settings, results, analysis."""
