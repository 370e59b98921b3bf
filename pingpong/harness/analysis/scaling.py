"""What a server's N CPUs would give on a bigger host: a model fitted to what a --workers sweep measured here.

A 2-CPU host cannot show a rate against N: the server's workers, the clients and the broker share two CPUs. What it
can show is what each part costs per roundtrip at each N, in CPU µs, because that is a count of work, not of
time waited. The model puts those costs on a host with C CPUs:

- **The server** (Gunther's universal scalability law): its CPU per roundtrip at N grows from one worker's as
  s(N) = s(1) × (1 + σ(N − 1) + κN(N − 1)); σ (contention: work every worker repeats, like a message published to
  every worker) and κ (coherency: work that grows with the pairs of workers) are fitted to the measured s(N)/s(1)
  by least squares, both ≥ 0. With N workers each on its own CPU it can relay at most N × 10⁶ / s(N) roundtrips/s.
  With one measured N above 1 the law has one equation: κ = 0 (Amdahl's law), said in the fit.
- **The broker** (one Redis thread, so one CPU at most): its CPU per roundtrip b(N) is a line through the points
  measured above N = 1 (a constant with one point); at most 10⁶ / b(N). None at N = 1 (no broker).
- **The clients**: each client process is one thread; they get the CPUs the server and the broker leave, at most
  one each: at most min(K, C − N − broker) × 10⁶ / c, c the client CPU per roundtrip (the median over the points).
- **The pairs**: a closed loop of P pairs has one message in flight per pair, so at most P × 10⁶ / (s + b + c): a
  roundtrip takes at least the CPU it needs on its path (the operational laws' asymptotic bound, no waiting).

The predicted rate is the smallest of the four, and the bound that gives it says which side saturates first. What
the model leaves out is listed in ASSUMPTIONS and printed with every prediction. Pure functions.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from pingpong.harness.analysis.stats import Ratio, median_with_interval
from pingpong.harness.results.records import Attempt, RunResult

SATURATED_SHARE = 0.9  # a side busy this share of its CPUs (or more) in the window is saturated
SERVER, BROKER, CLIENTS, PAIRS = "server", "broker", "clients", "pairs"
ASSUMPTIONS = (
    "the bigger host's CPUs are as fast as this host's, and a roundtrip costs each part the CPU it cost here at "
    "the same N (on 2 CPUs, N above 2 workers share CPUs: their CPU per roundtrip includes that sharing)",
    "the server's load is spread evenly over its N workers, each on a CPU of its own",
    "the broker is one thread on a CPU of its own; the clients get the CPUs left, one each at most",
    "waiting is not modelled: wakeups across CPUs, queueing and the network's latency add to a roundtrip's time "
    "but not to its CPU, so the pairs' bound is an upper bound",
    "the fit holds between and a little beyond the measured N: a prediction far from them is an extrapolation",
)


@dataclass(frozen=True)
class MeasuredPoint:
    """One cell at one N, over its good attempts: medians of per-attempt figures (µs per roundtrip)."""

    workers: int
    attempts: int
    roundtrips_per_s: float
    server_cpu_us: Ratio  # the server's process tree (all its workers), with the interval of the median
    client_cpu_us: float
    broker_cpu_us: float | None  # the broker's CPU over the window per roundtrip; None without a broker
    server_cpus: int | None  # CPUs the server was pinned to (None unpinned)
    client_cpus: int | None
    server_busy: float | None  # the server's CPU over the window ÷ its CPUs (1.0 = all of them all the time)
    client_busy: float | None
    broker_busy: float | None  # of its one CPU

    @property
    def saturated(self) -> str | None:
        """The side busy SATURATED_SHARE of its CPUs or more (the busiest when several); None: no side was, the
        pairs waited on each other."""
        shares = {SERVER: self.server_busy, CLIENTS: self.client_busy, BROKER: self.broker_busy}
        busy = {side: share for side, share in shares.items() if share is not None and share >= SATURATED_SHARE}
        return max(busy, key=busy.get) if busy else None


@dataclass(frozen=True)
class Fit:
    sigma: float
    kappa: float
    measured_at: tuple[int, ...]  # the N the server's fit stands on (1 included)
    how: str  # in words: which law, from which points
    broker_base_us: float | None  # b(N) = broker_base_us + broker_per_worker_us × (N − 2); None without a broker
    broker_per_worker_us: float | None
    client_cpu_us: float
    # the CPUs the server can use: None = N; 1 when it was measured at N = 1 only (skipped above it as a server
    # of one process, or the sweep did not go there): the model does not make up a scaling nobody measured
    usable_cpus: int | None = None

    def server_cost_factor(self, workers: int) -> float:
        return 1 + self.sigma * (workers - 1) + self.kappa * workers * (workers - 1)

    def broker_cpu_us(self, workers: int) -> float | None:
        if workers < 2 or self.broker_base_us is None:
            return None
        return max(0.0, self.broker_base_us + (self.broker_per_worker_us or 0.0) * (workers - 2))


@dataclass(frozen=True)
class Host:
    """The host and load a prediction is for."""

    cpus: int
    pairs: int
    client_processes: int


@dataclass(frozen=True)
class Prediction:
    workers: int
    roundtrips_per_s: float | None  # None when the host has no CPU left for a client
    bound: str | None  # SERVER, BROKER, CLIENTS or PAIRS: which limit gives the rate
    server_limit: float
    broker_limit: float | None
    client_limit: float | None
    pairs_limit: float
    server_cpu_us: float  # s(N) the model uses
    broker_cpu_us: float | None
    client_cpus: int  # CPUs the clients get


@dataclass(frozen=True)
class ScalingModel:
    server: str
    client: str
    variant: str  # the other swept settings' values of this series ("" when only --workers was swept)
    skipped_above_one: str | None  # why the run did not measure it above N = 1 (then: one CPU whatever N)
    points: tuple[MeasuredPoint, ...]
    fit: Fit
    host: Host
    predictions: tuple[Prediction, ...]
    assumptions: tuple[str, ...] = ASSUMPTIONS

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "points": [{**asdict(point), "saturated": point.saturated} for point in self.points]}


# -- what the sweep measured
def _per_roundtrip_us(cpu_s: float | None, attempt: Attempt) -> float | None:
    """µs of CPU per roundtrip of the sampled window, at the reference pace when it was paced."""
    if cpu_s is None or not attempt.sampled_roundtrips:
        return None
    return cpu_s * 1e6 / attempt.sampled_roundtrips * attempt.pace_scale


def _busy(cpu_s: float | None, wall_s: float | None, cpus: int | None) -> float | None:
    if cpu_s is None or not wall_s or not cpus:
        return None
    return cpu_s / wall_s / cpus


def _broker_window(attempt: Attempt) -> dict[str, Any]:
    return (((attempt.workers or {}).get("broker") or {}).get("window")) or {}


def _median(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def measured_point(workers: int, attempts: list[Attempt]) -> MeasuredPoint | None:
    """The point of a cell's good attempts at `workers`; None without a good attempt that has the server's CPU."""
    good = [attempt for attempt in attempts if attempt.ok and _per_roundtrip_us(attempt.server_cpu_s, attempt)]
    if not good:
        return None
    server_us = [_per_roundtrip_us(attempt.server_cpu_s, attempt) for attempt in good]
    broker_cpu = [_broker_window(attempt).get("cpu_s") for attempt in good]
    return MeasuredPoint(
        workers=workers, attempts=len(good),
        roundtrips_per_s=statistics.median(attempt.roundtrips_per_s for attempt in good),
        server_cpu_us=median_with_interval(server_us),
        client_cpu_us=_median([_per_roundtrip_us(attempt.client_cpu_s, attempt) for attempt in good]) or 0.0,
        broker_cpu_us=_median([_per_roundtrip_us(cpu, attempt) for cpu, attempt in zip(broker_cpu, good)]),
        server_cpus=len(good[0].server_cpus) if good[0].server_cpus else None,
        client_cpus=len(good[0].client_cpus) if good[0].client_cpus else None,
        server_busy=_median([_busy(attempt.server_cpu_s, attempt.sampled_wall_s, len(attempt.server_cpus or ()))
                             for attempt in good]),
        client_busy=_median([_busy(attempt.client_cpu_s, attempt.sampled_wall_s, len(attempt.client_cpus or ()))
                             for attempt in good]),
        broker_busy=_median([_busy(cpu, attempt.sampled_wall_s, 1) for cpu, attempt in zip(broker_cpu, good)]))


# Settings a sweep may vary beside --workers: each value of them is a series of its own (--room-placement kernel,room
# gives each cell two series, each fitted on its own)
VARIANT_SETTINGS = ("python", "room_placement", "placement", "loop", "compression", "tls", "malloc", "young_generation",
                    "payload_size", "payload_kind", "pairs", "client_processes", "workload")


def workers_of(run: RunResult) -> int:
    return int(run.configuration.get("workers") or 1)


def variants(runs: list[RunResult]) -> list[str]:
    """Each run's label of the settings that vary across the runs, besides --workers ("" when none does)."""
    varying = [name for name in VARIANT_SETTINGS if len({repr(setting(run, name)) for run in runs}) > 1]
    return [", ".join(f"{name.replace('_', '-')} {setting(run, name)}" for name in varying) for run in runs]


PER_WORKER_SETTINGS = ("pairs", "client_processes")  # N times what was asked with --load-per-worker


def setting(run: RunResult, name: str) -> Any:
    """A run's setting as its command gave it: with --load-per-worker, the pairs and client processes per worker
    (its configuration records the attempt's, N times them), so one series holds every N."""
    value = run.configuration.get(name)
    if name in PER_WORKER_SETTINGS and run.configuration.get("load_per_worker") and value is not None:
        return value // workers_of(run)
    return value


SeriesKey = tuple[str, str, str]  # server, client, variant


def measured_series(runs: list[RunResult]) -> dict[SeriesKey, list[MeasuredPoint]]:
    """{(server, client, variant): its points in order of N} over the runs of a --workers sweep (one run per N and
    value of the other swept settings)."""
    series: dict[SeriesKey, dict[int, MeasuredPoint]] = {}
    for run, variant in zip(runs, variants(runs)):
        for cell in run.cells:
            point = measured_point(workers_of(run), cell.attempts)
            if point is not None:
                series.setdefault((cell.server, cell.client, variant), {})[point.workers] = point
    return {key: [points[n] for n in sorted(points)] for key, points in series.items()}


def skipped_above_one(runs: list[RunResult]) -> dict[SeriesKey, str]:
    """{(server, client, variant): why the run skipped the cell} at an N above 1 (the first reason met)."""
    found: dict[SeriesKey, str] = {}
    for run, variant in zip(runs, variants(runs)):
        if workers_of(run) > 1:
            for cell in run.cells:
                if cell.skipped:
                    found.setdefault((cell.server, cell.client, variant), cell.skipped)
    return found


# -- the fit
def fit_usl(ratios: dict[int, float]) -> tuple[float, float, str]:
    """(σ, κ, how) of s(N)/s(1) = 1 + σ(N − 1) + κN(N − 1) by least squares over {N: ratio} (N ≥ 2), both ≥ 0."""
    points = sorted((n, ratio) for n, ratio in ratios.items() if n >= 2)
    if not points:
        return 0.0, 0.0, "no point above N = 1: one CPU whatever N, as measured"
    xs = [(n - 1, n * (n - 1), ratio - 1) for n, ratio in points]
    at = ", ".join(f"N = {n}" for n, _ in points)
    if len(points) == 1:
        sigma = max(0.0, xs[0][2] / xs[0][0])
        return sigma, 0.0, f"Amdahl's law (κ = 0): one point above N = 1 ({at})"

    def one_term(index: int) -> float:
        return max(0.0, sum(x[index] * x[2] for x in xs) / sum(x[index] ** 2 for x in xs))

    a11 = sum(x[0] ** 2 for x in xs)
    a12 = sum(x[0] * x[1] for x in xs)
    a22 = sum(x[1] ** 2 for x in xs)
    b1 = sum(x[0] * x[2] for x in xs)
    b2 = sum(x[1] * x[2] for x in xs)
    determinant = a11 * a22 - a12 * a12
    sigma, kappa = ((b1 * a22 - b2 * a12) / determinant, (a11 * b2 - a12 * b1) / determinant) \
        if determinant else (-1.0, -1.0)
    if sigma < 0 or kappa < 0:  # the unconstrained optimum is outside σ, κ ≥ 0: the best on an edge
        candidates = [(one_term(0), 0.0), (0.0, one_term(1))]
        sigma, kappa = min(candidates, key=lambda pair: sum(
            (x[2] - pair[0] * x[0] - pair[1] * x[1]) ** 2 for x in xs))
    return sigma, kappa, f"the universal scalability law, least squares over N = 1 and {at}"


def fit_series(points: list[MeasuredPoint]) -> Fit:
    """The model's parameters from a cell's points; ValueError without a point at N = 1 (the base of s(N))."""
    by_n = {point.workers: point for point in points}
    if 1 not in by_n:
        raise ValueError("the fit needs the point at --workers 1 (include 1 in the sweep)")
    base = by_n[1].server_cpu_us.value
    sigma, kappa, how = fit_usl({n: point.server_cpu_us.value / base for n, point in by_n.items() if n >= 2})
    brokers = sorted((n, point.broker_cpu_us) for n, point in by_n.items()
                     if n >= 2 and point.broker_cpu_us is not None)
    base_us = per_worker_us = None
    if len(brokers) == 1:
        base_us, per_worker_us = brokers[0][1], 0.0
    elif brokers:
        mean_n = statistics.fmean(n for n, _ in brokers)
        mean_b = statistics.fmean(b for _, b in brokers)
        spread = sum((n - mean_n) ** 2 for n, _ in brokers)
        per_worker_us = sum((n - mean_n) * (b - mean_b) for n, b in brokers) / spread
        base_us = mean_b + per_worker_us * (2 - mean_n)
    return Fit(sigma=sigma, kappa=kappa, measured_at=tuple(sorted(by_n)), how=how, broker_base_us=base_us,
               broker_per_worker_us=per_worker_us,
               client_cpu_us=statistics.median(point.client_cpu_us for point in points),
               usable_cpus=None if len(by_n) > 1 else 1)


def predict(fit: Fit, base_server_us: float, host: Host, workers: int) -> Prediction:
    """The rate the model gives for N = workers on host: the smallest of the four limits (module docstring)."""
    used = min(workers, fit.usable_cpus or workers)
    server_us = base_server_us * fit.server_cost_factor(used)
    broker_us = fit.broker_cpu_us(used)
    client_cpus = min(host.client_processes, host.cpus - workers - (1 if broker_us is not None else 0))
    limits = {SERVER: used * 1e6 / server_us,
              BROKER: 1e6 / broker_us if broker_us else None,
              CLIENTS: client_cpus * 1e6 / fit.client_cpu_us if client_cpus > 0 and fit.client_cpu_us else None,
              PAIRS: host.pairs * 1e6 / (server_us + (broker_us or 0.0) + fit.client_cpu_us)}
    if client_cpus <= 0:
        rate, bound = None, None
    else:
        bound = min((side for side, limit in limits.items() if limit is not None), key=lambda side: limits[side])
        rate = limits[bound]
    return Prediction(workers=workers, roundtrips_per_s=rate, bound=bound, server_limit=limits[SERVER],
                      broker_limit=limits[BROKER], client_limit=limits[CLIENTS], pairs_limit=limits[PAIRS],
                      server_cpu_us=server_us, broker_cpu_us=broker_us, client_cpus=max(0, client_cpus))


def scaling_models(runs: list[RunResult], host: Host, at: list[int]) -> list[ScalingModel]:
    """A model per cell measured at N = 1 (and, for a fit, at more N), with its predictions at each N of `at`."""
    models = []
    skipped = skipped_above_one(runs)
    for (server, client, variant), points in measured_series(runs).items():
        if not any(point.workers == 1 for point in points):
            continue
        fit = fit_series(points)
        base = next(point for point in points if point.workers == 1).server_cpu_us.value
        reason = skipped.get((server, client, variant)) if len(points) == 1 else None
        models.append(ScalingModel(server, client, variant, reason, tuple(points), fit, host,
                                   tuple(predict(fit, base, host, workers) for workers in at)))
    return models
