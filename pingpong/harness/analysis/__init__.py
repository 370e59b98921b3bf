"""Pure functions of a run's record: statistics, cell summaries, workload figures, flags and their causes, the
WebSocket cost split. May import settings and results."""
