"""Bad input: one line on stderr and exit code 2, for every subcommand of run_bench.py."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit code 2."""


class OneLineArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default prints the whole usage first
        raise UsageError(message)
