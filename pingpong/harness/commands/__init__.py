"""The command line: run (the default), list, report, diagnose, compare, abuse; cli.main maps errors to exit codes.
May import every other package."""
