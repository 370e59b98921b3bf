"""HdrHistogram latency records: decode what any driver (Python or Node) wrote, merge repeats, read percentiles."""

from __future__ import annotations

import bisect
import itertools

from hdrh.histogram import HdrHistogram

from pingpong.contract import HISTOGRAM_HIGHEST_NS, HISTOGRAM_LOWEST_NS, HISTOGRAM_SIGNIFICANT_DIGITS

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
SLOW_ROUNDTRIP_NS = 35_000_000  # above a delayed-ACK stall (~40 ms): counted as a 'slow' roundtrip


def empty_histogram() -> HdrHistogram:
    return HdrHistogram(HISTOGRAM_LOWEST_NS, HISTOGRAM_HIGHEST_NS, HISTOGRAM_SIGNIFICANT_DIGITS)


def merge(encoded_histograms: list[str]) -> HdrHistogram:
    """One histogram holding every value of the given encoded histograms."""
    merged = empty_histogram()
    for encoded in encoded_histograms:
        merged.add(HdrHistogram.decode(encoded))
    return merged


def latency_summary(histogram: HdrHistogram) -> dict[str, float | int]:
    """Count, percentiles, max and the share of slow roundtrips, in nanoseconds."""
    count = histogram.get_total_count()
    if count == 0:
        return {"count": 0}
    summary: dict[str, float | int] = {"count": count}
    buckets = _buckets(histogram)
    for percentile in PERCENTILES:
        summary[f"p{percentile:g}_ns"] = value_at_percentile(histogram, percentile, buckets)
    summary["max_ns"] = histogram.get_max_value()
    recorded = recorded_values(histogram, buckets)
    # The mean as HdrHistogram.get_mean_value computes it (each bucket at its median equivalent value).
    summary["mean_ns"] = float(sum(bucket_count * histogram._hdr_median_equiv_value(value)
                                   for value, bucket_count in recorded)) / count
    below_slow = sum(bucket_count for value, bucket_count in recorded if value <= SLOW_ROUNDTRIP_NS)
    summary["slow_share"] = (count - below_slow) / count
    return summary


def value_at_percentile(histogram: HdrHistogram, percentile: float,
                        buckets: tuple[list[int], list[int], list[int]] | None = None) -> int:
    """What histogram.get_value_at_percentile(percentile) returns, found in the non-empty buckets' running count
    (given, or read here); the library adds the counts one by one in Python, 0.3 s per run."""
    indexes, _, running = buckets if buckets is not None else _buckets(histogram)
    # the first bucket whose running count reaches the target (at least 1, so a non-empty one)
    found = bisect.bisect_left(running, histogram.get_target_count_at_percentile(percentile))
    if found >= len(indexes):
        return 0
    value = histogram.get_value_from_index(indexes[found])
    return (histogram.get_highest_equivalent_value(value) if percentile
            else histogram.get_lowest_equivalent_value(value))


def _buckets(histogram: HdrHistogram) -> tuple[list[int], list[int], list[int]]:
    """The non-empty buckets' indexes, counts and running counts, in order, read from the counts array at once (about
    2 ms; numpy would take a tenth of that, but its import costs each run_bench.py 0.13 s)."""
    counts = histogram.counts[:histogram.counts_len]
    indexes = list(itertools.compress(range(len(counts)), counts))
    nonempty = [counts[index] for index in indexes]
    return indexes, nonempty, list(itertools.accumulate(nonempty))


def recorded_values(histogram: HdrHistogram,
                    buckets: tuple[list[int], list[int], list[int]] | None = None) -> list[tuple[int, int]]:
    """(value, count) of every non-empty bucket in order: what get_recorded_iterator yields as (value_iterated_to,
    count_added_in_this_iter_step), read from the counts array directly (the iterator costs seconds per run)."""
    indexes, counts, _ = buckets if buckets is not None else _buckets(histogram)
    return [(histogram.get_highest_equivalent_value(histogram.get_value_from_index(index)), count)
            for index, count in zip(indexes, counts)]


def encode_value_counts(value_counts: list[list[int]]) -> str:
    """Encode [value_ns, count] pairs (from a driver without an HdrHistogram library) as a compressed histogram."""
    histogram = empty_histogram()
    for value, count in value_counts:
        histogram.record_value(min(max(int(value), HISTOGRAM_LOWEST_NS), HISTOGRAM_HIGHEST_NS), int(count))
    return histogram.encode().decode("ascii")


def text_histogram(histogram: HdrHistogram, width: int = 40) -> list[str]:
    """The latency distribution as text lines, one per power-of-two bucket: range, share of roundtrips, bar."""
    count = histogram.get_total_count()
    if count == 0:
        return ["(no roundtrips recorded)"]
    buckets: dict[int, int] = {}
    for value, bucket_count in recorded_values(histogram):
        value = max(value, 1)
        buckets[value.bit_length() - 1] = buckets.get(value.bit_length() - 1, 0) + bucket_count
    lines = []
    largest = max(buckets.values())
    for exponent in range(min(buckets), max(buckets) + 1):
        in_bucket = buckets.get(exponent, 0)
        label = f"{_short_ns(2 ** exponent)}–{_short_ns(2 ** (exponent + 1))}"
        bar = "█" * round(width * in_bucket / largest) if in_bucket else ""
        lines.append(f"{label:>17} {in_bucket / count * 100:6.2f}% {bar}")
    return lines


def _short_ns(value: int) -> str:
    if value >= 1_000_000_000:
        return f"{value / 1e9:.3g} s"
    if value >= 1_000_000:
        return f"{value / 1e6:.3g} ms"
    return f"{value / 1e3:.3g} µs"
