"""The colour scale of heat maps (PNG and HTML): logarithmic, and never narrower than MIN_SPAN.

A ratio of rates is what a reader compares, hence the log scale. A 2-cell run whose cells differ by 10% would
otherwise spread that 10% (noise, most of the time) over the whole range, from the darkest colour to the lightest.
"""

from __future__ import annotations

import math

MIN_SPAN = 4.0  # the colour range covers at least a 4× ratio between its ends
VIRIDIS = ((0x44, 0x01, 0x54), (0x3b, 0x52, 0x8b), (0x21, 0x91, 0x8c), (0x5e, 0xc9, 0x62), (0xfd, 0xe7, 0x25))


def log_range(values: list[float], min_span: float = MIN_SPAN) -> tuple[float, float]:
    """(low, high) of the colour scale: the values' extremes, widened around their geometric middle to min_span."""
    positive = [value for value in values if value and value > 0]
    if not positive:
        return 1.0, min_span
    low, high = min(positive), max(positive)
    if high / low < min_span:
        middle = math.sqrt(low * high)
        low, high = middle / math.sqrt(min_span), middle * math.sqrt(min_span)
    return low, high


def position(value: float, low: float, high: float) -> float:
    """Where value sits on the scale, 0 (low) to 1 (high), logarithmically; clipped to the ends."""
    return min(1.0, max(0.0, math.log(value / low) / math.log(high / low)))


def viridis_hex(fraction: float) -> str:
    """The colour at fraction (0–1) of viridis (dark purple to yellow), as #rrggbb, linearly between 5 stops."""
    scaled = min(1.0, max(0.0, fraction)) * (len(VIRIDIS) - 1)
    index = min(int(scaled), len(VIRIDIS) - 2)
    share = scaled - index
    red, green, blue = (round(a + (b - a) * share) for a, b in zip(VIRIDIS[index], VIRIDIS[index + 1]))
    return f"#{red:02x}{green:02x}{blue:02x}"
