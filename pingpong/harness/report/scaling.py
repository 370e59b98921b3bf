"""The scaling model (analysis/scaling.py) as Markdown: what was measured at each N, the fit, the predictions on the
host asked for, and the model's assumptions. Pure."""

from __future__ import annotations

from pingpong.harness.analysis.scaling import SATURATED_SHARE, ScalingModel


def _us(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _interval(point) -> str:
    cost = point.server_cpu_us
    if cost.low is None:
        return _us(cost.value)
    return f"{_us(cost.value)} ({_us(cost.low)}–{_us(cost.high)})"


def render_scaling(models: list[ScalingModel], sources: list[str]) -> str:
    if not models:
        return ("No cell to model: the runs need a cell measured at --workers 1 (a sweep such as "
                "--workers 1,2,4).\n")
    host = models[0].host
    lines = [f"# What N server CPUs would give: {host.cpus} CPUs, {host.pairs} pairs, "
             f"{host.client_processes} client processes", "",
             "Measured in: " + ", ".join(f"`{source}`" for source in sources) + ". The model and its laws: "
             "docs/workloads.md, \"What a bigger host would give\".", ""]
    for model in models:
        fit = model.fit
        heading = f"## {model.server} × {model.client}" + (f" ({model.variant})" if model.variant else "")
        lines += [heading, ""]
        if model.skipped_above_one:
            lines += [f"Not measured above N = 1: {model.skipped_above_one}.", ""]
        lines += [
                  "| N | attempts | roundtrips/s here | server CPU µs/rt (interval) | broker µs/rt | client µs/rt "
                  "| server busy | clients busy | broker busy | saturated |",
                  "|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
        for point in model.points:
            lines.append(f"| {point.workers} | {point.attempts} | {_rate(point.roundtrips_per_s)} | "
                         f"{_interval(point)} | {_us(point.broker_cpu_us)} | {_us(point.client_cpu_us)} | "
                         f"{_share(point.server_busy)} | {_share(point.client_busy)} | {_share(point.broker_busy)} | "
                         f"{point.saturated or 'none'} |")
        broker = ("no broker" if fit.broker_base_us is None else
                  f"broker b(N) = {fit.broker_base_us:,.1f} + {fit.broker_per_worker_us:,.2f} × (N − 2) µs")
        lines += ["", f"Fit: σ = {fit.sigma:.4f}, κ = {fit.kappa:.5f} ({fit.how}); {broker}; client c = "
                      f"{fit.client_cpu_us:,.1f} µs per roundtrip. Busy = CPU over the window ÷ the side's CPUs; "
                      f"saturated at {SATURATED_SHARE:.0%} or more.", "",
                  f"| N | predicted roundtrips/s | bound | server limit | broker limit | clients limit (CPUs) "
                  f"| pairs limit | s(N) µs |",
                  "|---:|---:|---|---:|---:|---:|---:|---:|"]
        for prediction in model.predictions:
            clients = (f"{_rate(prediction.client_limit)} ({prediction.client_cpus})"
                       if prediction.client_limit is not None else f"— ({prediction.client_cpus})")
            lines.append(f"| {prediction.workers} | {_rate(prediction.roundtrips_per_s)} | "
                         f"{prediction.bound or 'no CPU left for a client'} | {_rate(prediction.server_limit)} | "
                         f"{_rate(prediction.broker_limit)} | {clients} | {_rate(prediction.pairs_limit)} | "
                         f"{_us(prediction.server_cpu_us)} |")
        lines.append("")
    lines += ["Assumptions:", *[f"- {assumption}" for assumption in models[0].assumptions], ""]
    return "\n".join(lines)
