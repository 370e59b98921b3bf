"""What one cross-CPU wakeup costs on this host, from the C raw-TCP floor measured in both placements: pure functions
of the paired rates (measure/host_wakeup.py measures them).

A ping-pong is serial: one side works while the other waits. With the two sides on two CPUs, each of a roundtrip's
four messages (A -> server, server -> B, B -> server, server -> A) wakes a process on the other CPU; on one CPU none
does. The C floor does next to nothing per message, so the difference between its two roundtrip times is the
wakeups' cost: (1e6 / split rate - 1e6 / same-cpu rate) / 4 µs per wakeup, taken within each round (the two
placements back to back) and summarised as the median with its order-statistic interval.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pingpong.harness.analysis.stats import Ratio, median_with_interval

WAKEUPS_PER_ROUNDTRIP = 4  # each message of a roundtrip wakes the side on the other CPU


@dataclass(frozen=True)
class HostWakeup:
    """The host's figure, as the results file's "host_wakeup" records it (to_json): the floor measured, its rates
    per round in both placements, and the cost of one wakeup in µs with its interval."""

    floor: str  # "raw-tcp-c × raw-tcp-c"
    same_cpu_rates: tuple[float, ...]  # roundtrips/s, one per round
    split_rates: tuple[float, ...]
    wakeup_us: Ratio  # median over the rounds of (1e6/split - 1e6/same) / 4, with its interval
    # Both sides' CPU µs per roundtrip in each placement, one per round (files before 2026-11-29 lack them), and the
    # part of a wakeup the sides are charged as CPU time: the median over the rounds of (split - same) / 4. On this
    # VM most of a wakeup is: the floor does nothing more on two CPUs, yet its CPU per roundtrip grows about fourfold.
    same_cpu_cpu_us: tuple[float, ...] = ()
    split_cpu_us: tuple[float, ...] = ()
    cpu_per_wakeup_us: Ratio | None = None

    def to_json(self) -> dict[str, Any]:
        cpu = {} if self.cpu_per_wakeup_us is None else {
            "same_cpu_cpu_us": list(self.same_cpu_cpu_us), "split_cpu_us": list(self.split_cpu_us),
            "cpu_per_wakeup_us": asdict(self.cpu_per_wakeup_us)}
        return {"floor": self.floor, "same_cpu_rates": list(self.same_cpu_rates), "split_rates": list(self.split_rates),
                "wakeups_per_roundtrip": WAKEUPS_PER_ROUNDTRIP, "wakeup_us": asdict(self.wakeup_us), **cpu}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "HostWakeup | None":
        if not data:
            return None
        charged = data.get("cpu_per_wakeup_us")
        return cls(floor=data["floor"], same_cpu_rates=tuple(data["same_cpu_rates"]),
                   split_rates=tuple(data["split_rates"]), wakeup_us=Ratio(**data["wakeup_us"]),
                   same_cpu_cpu_us=tuple(data.get("same_cpu_cpu_us", ())),
                   split_cpu_us=tuple(data.get("split_cpu_us", ())),
                   cpu_per_wakeup_us=Ratio(**charged) if charged else None)

    def sentence(self) -> str:
        """One line for the reports: the cost, its interval, and the rates it stands on."""
        from statistics import median

        cost = self.wakeup_us
        interval = (f" (interval {cost.low:.1f}–{cost.high:.1f}, {cost.label()})" if cost.low is not None else
                    f" (one round: no interval)")
        charged = (f"; {self.cpu_per_wakeup_us.value:.1f} µs of it shows as the sides' CPU time"
                   if self.cpu_per_wakeup_us is not None else "")
        return (f"one cross-CPU wakeup costs {cost.value:.1f} µs on this host{interval}: {self.floor} ran at "
                f"{median(self.same_cpu_rates):,.0f}/s on one CPU and {median(self.split_rates):,.0f}/s with the "
                f"sides on two, {WAKEUPS_PER_ROUNDTRIP} wakeups per roundtrip{charged}")


def wakeup_cost(floor: str, same_cpu: list[float], split: list[float], same_cpu_cpu_us: list[float] | None = None,
                split_cpu_us: list[float] | None = None) -> HostWakeup:
    """The host's figure from rates measured in pairs (same_cpu[i] and split[i] in round i), and, given both sides'
    CPU µs per roundtrip in the same attempts, the part of a wakeup charged as CPU time."""
    if not same_cpu or len(same_cpu) != len(split):
        raise ValueError("wakeup_cost needs one same-cpu and one split rate per round")
    per_round = [(1e6 / apart - 1e6 / together) / WAKEUPS_PER_ROUNDTRIP for together, apart in zip(same_cpu, split)]
    charged = None
    if same_cpu_cpu_us and split_cpu_us:
        if not len(same_cpu_cpu_us) == len(split_cpu_us) == len(same_cpu):
            raise ValueError("wakeup_cost needs the CPU per roundtrip of every attempt, or of none")
        charged = median_with_interval([(apart - together) / WAKEUPS_PER_ROUNDTRIP
                                        for together, apart in zip(same_cpu_cpu_us, split_cpu_us)])
    return HostWakeup(floor=floor, same_cpu_rates=tuple(same_cpu), split_rates=tuple(split),
                      wakeup_us=median_with_interval(per_round), same_cpu_cpu_us=tuple(same_cpu_cpu_us or ()),
                      split_cpu_us=tuple(split_cpu_us or ()), cpu_per_wakeup_us=charged)


def share_of_roundtrip(host: HostWakeup, roundtrips_per_s: float) -> float:
    """How much of a roundtrip measured with the sides split is the host's wakeups: 4 × the cost / its length."""
    return min(1.0, WAKEUPS_PER_ROUNDTRIP * host.wakeup_us.value / (1e6 / roundtrips_per_s))
