"""How many rounds a run measures and within what budget: the policy record and the parsers of its options."""

from __future__ import annotations

import math
from dataclasses import dataclass


# How rounds beyond the minimum are given, as recorded in configuration["rounds"]["rule"]: every cell alike, while a
# whole round fits in the budget (measure/rounds.py). Files without "rule" come from the rule before it, which gave
# more rounds to the cells whose interval was wider than the precision and stopped each once it was not
# ("until-precise"; its intervals covered less than they said: docs/methodology.md).
ROUND_RULE = "alike-within-budget"
OLD_ROUND_RULE = "until-precise"


@dataclass(frozen=True)
class RoundPolicy:
    """How many rounds each unit gets and in what order; recorded in the results as configuration["rounds"]."""

    min_rounds: int
    max_rounds: int
    # the half-width of the median's interval, relative to it, that the run reports its cells against (it says how
    # many reached it and what the others would take); it decides no round. None: exactly min_rounds (--repeat)
    precision: float | None
    budget_s: float | None  # no round beyond min_rounds starts unless its estimate ends within this; None: no limit
    seed: int
    fresh_server: bool = False
    fresh_server_reason: str | None = None  # why the run chose fresh servers itself (None: --fresh-server or not)
    # each client process starts ahead of its turn (while the server gets ready, or the attempt before it ends) and
    # waits at its start gate; it connects only at its turn (server.spawn_ahead)
    spawn_ahead: bool = True

    def recorded(self) -> dict:
        return {"rule": ROUND_RULE, "min_rounds": self.min_rounds, "max_rounds": self.max_rounds,
                "precision": self.precision,
                "budget_s": self.budget_s, "seed": self.seed, "fresh_server": self.fresh_server,
                "spawn_ahead": self.spawn_ahead,
                **({"fresh_server_reason": self.fresh_server_reason} if self.fresh_server_reason else {})}


def parse_duration(text: str) -> float:
    """'90', '90s', '4.5m', '1h', '1m30s' -> seconds; ValueError when it is none of these or not > 0."""
    remaining = text.strip().lower()
    if not remaining:
        raise ValueError("empty duration")
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    total, number = 0.0, ""
    for character in remaining:
        if character.isdigit() or character == ".":
            number += character
        elif character in units and number:
            total += float(number) * units[character]
            number = ""
        else:
            raise ValueError(f"not a duration: {text!r}")
    if number:
        total += float(number)
    if not total > 0 or math.isinf(total):
        raise ValueError(f"a duration must be > 0, got {text!r}")
    return total


def parse_precision(text: str) -> float:
    """A percentage, '3%' or '3' (also '0.5' = 0.5%) -> 0.03; ValueError outside (0, 100)."""
    value = float(text.strip().rstrip("%").strip()) / 100
    if not 0 < value < 1:
        raise ValueError(f"a precision must be between 0 and 100%, got {text!r}")
    return value
