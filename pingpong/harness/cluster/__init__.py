"""--cluster: the same measurements on other hosts through Dask (the measurer here, the agent on each host), and the
commands that start a cluster's processes. May import everything below commands."""
