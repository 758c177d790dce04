"""Quantiles and means from cumulative histogram buckets (as Prometheus `histogram_quantile`)."""

from __future__ import annotations

import math
from collections.abc import Iterable

Buckets = list[tuple[float, float]]
"""(upper bound `le`, cumulative count) pairs."""


def optional_float(value: str | None) -> float | None:
    """A numeric label value (a bucket's `le`, a config field), None when absent or not a number."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def merge_buckets(groups: Iterable[Buckets]) -> Buckets:
    """Sum several histograms bucket by bucket (the only valid way to merge quantiles)."""
    totals: dict[float, float] = {}
    for buckets in groups:
        for upper, count in buckets:
            totals[upper] = totals.get(upper, 0.0) + count
    return sorted(totals.items())


SKEW_TOLERANCE = 0.01
"""The share of a histogram's observations by which a bucket may fall short of the one below it
and still be scrape skew (the buckets read one by one while requests finish): at least one
observation. A larger fall is a broken exposition, and its quantiles are unknown."""


def quantile(q: float, buckets: Buckets) -> float | None:
    """The q-quantile by linear interpolation inside the bucket holding the rank.

    None when there are no observations, and when the counts fall as `le` grows by more than
    scrape skew (a figure from such buckets would be confident and wrong; the data-quality
    check names the line). Like Prometheus: a rank in the +Inf bucket returns the largest
    finite bound, and a fall within skew is clamped upwards.
    """
    if math.isnan(q):
        return None
    ordered = sorted(buckets)
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]) or not skew_only(ordered):
        return None
    ordered = _monotonic(ordered)
    total = ordered[-1][1]
    if total <= 0:
        return None
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    return _interpolate(q * total, ordered)


def skew_only(ordered: Buckets) -> bool:
    """Whether the cumulative counts (by increasing `le`) never fall by more than scrape skew."""
    highest = max((count for _, count in ordered), default=0.0)
    allowed = max(1.0, SKEW_TOLERANCE * highest)
    running = -math.inf
    for _, count in ordered:
        if count < running - allowed:
            return False
        running = max(running, count)
    return True


def _monotonic(buckets: Buckets) -> Buckets:
    """Clamp cumulative counts so they never decrease."""
    fixed: Buckets = []
    highest = 0.0
    for upper, count in buckets:
        highest = max(highest, count)
        fixed.append((upper, highest))
    return fixed


def _interpolate(rank: float, buckets: Buckets) -> float:
    """Find the bucket containing `rank` and interpolate linearly within it."""
    lower_bound, lower_count = 0.0, 0.0
    for index, (upper, count) in enumerate(buckets):
        if count >= rank:
            if math.isinf(upper):
                return buckets[index - 1][0] if index > 0 else 0.0
            if index == 0 and upper <= 0:
                return upper
            in_bucket = count - lower_count
            if in_bucket <= 0:
                return upper
            return lower_bound + (upper - lower_bound) * (rank - lower_count) / in_bucket
        lower_bound, lower_count = upper, count
    return buckets[-2][0]


def mean(total_sum: float | None, total_count: float | None) -> float | None:
    """sum / count, None when there were no observations."""
    if total_sum is None or not total_count:
        return None
    return total_sum / total_count
