"""HdrHistograms cross runtimes: what the Node driver encodes decodes in Python, and the other way round."""

import json
import random
import subprocess
from array import array

from hdrh.histogram import HdrHistogram

from pingpong.harness.results.histograms import empty_histogram, latency_summary, merge, value_at_percentile
from pingpong.kit.driver import encode_histogram
from tests.conftest import ROOT

VALUES = [1_000 * (i % 500 + 50) for i in range(5000)] + [40_000_000] * 5


def node(script: str) -> str:
    return subprocess.run(["node", "-e", script], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_node_histogram_decodes_in_python_with_same_count_and_percentiles():
    """A histogram written by node/driver/ has, decoded in Python, Node's own count and percentiles."""
    script = (f"const d = require('./node/driver'); const hdr = require('hdr-histogram-js');"
              f"const values = {json.dumps(VALUES)}; const encoded = d.encodeHistogram(values);"
              "const h = hdr.decodeFromCompressedBase64(encoded);"
              "console.log(JSON.stringify({encoded, count: h.totalCount, p50: h.getValueAtPercentile(50),"
              "p99: h.getValueAtPercentile(99), p999: h.getValueAtPercentile(99.9), max: h.maxValue}));")
    out = json.loads(node(script))
    decoded = HdrHistogram.decode(out["encoded"])
    assert decoded.get_total_count() == out["count"] == len(VALUES)
    assert decoded.get_value_at_percentile(50) == out["p50"]
    assert decoded.get_value_at_percentile(99) == out["p99"]
    assert decoded.get_value_at_percentile(99.9) == out["p999"]
    assert decoded.get_max_value() == out["max"]


def test_python_histogram_decodes_in_node():
    """A histogram written by the Python driver decodes in hdr-histogram-js with the same count and p99."""
    encoded = encode_histogram(array("q", VALUES))
    out = json.loads(node("const hdr = require('hdr-histogram-js');"
                          f"const h = hdr.decodeFromCompressedBase64('{encoded}');"
                          "console.log(JSON.stringify({count: h.totalCount, p99: h.getValueAtPercentile(99)}));"))
    python = HdrHistogram.decode(encoded)
    assert out == {"count": len(VALUES), "p99": python.get_value_at_percentile(99)}


def test_merge_adds_counts_and_keeps_extremes():
    """Merging repeats sums counts; percentiles come from all values; slow roundtrips are counted."""
    fast = encode_histogram(array("q", [100_000] * 1000))
    slow = encode_histogram(array("q", [50_000_000] * 10))
    summary = latency_summary(merge([fast, slow]))
    assert summary["count"] == 1010
    assert 99_900 <= summary["p50_ns"] <= 100_100
    assert summary["max_ns"] >= 50_000_000
    assert summary["slow_share"] == 10 / 1010


def test_percentiles_from_the_cumulative_counts_are_the_librarys():
    """value_at_percentile gives what HdrHistogram.get_value_at_percentile gives, at the edges (0, 100, beyond)
    and for an empty histogram, over latencies spread from microseconds to a delayed-ACK stall."""
    generator = random.Random(12)
    values = array("q", [int(generator.lognormvariate(11, 1.2)) + 1_000 for _ in range(5_000)] + [41_000_000] * 7)
    histogram = merge([encode_histogram(values)])
    for percentile in (0.0, 0.01, 1, 25, 50, 90, 99, 99.9, 99.99, 100.0, 120.0):
        assert value_at_percentile(histogram, percentile) == histogram.get_value_at_percentile(percentile)
    assert value_at_percentile(empty_histogram(), 50) == empty_histogram().get_value_at_percentile(50) == 0
