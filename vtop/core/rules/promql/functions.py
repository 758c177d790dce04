"""PromQL's functions and aggregations with Prometheus 2.x's arithmetic: rate's extrapolation
to the range's edges, NaN and +-Inf in sums, means, minima and maxima, round half up."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence

EXTRAPOLATION_ALLOWANCE = 1.1
"""Prometheus extrapolates to an edge closer than 1.1 average sample intervals."""


def extrapolated_rate(
    first_time: float,
    last_time: float,
    values: Sequence[float],
    start: float,
    end: float,
    counter: bool,
    per_second: bool,
    *,
    grows: bool = False,
) -> float | None:
    """rate (counter, per second), increase (counter) or delta over samples in [start, end],
    the first taken at `first_time` and the last at `last_time`; None with fewer than two
    samples (Prometheus's `extrapolatedRate`). `grows`: the values are known never to go down,
    so no reset is looked for."""
    if len(values) < 2:
        return None
    result = values[-1] - values[0]
    if counter and not grows and any(map(operator.lt, values[1:], values[:-1])):  # a reset
        last = 0.0
        for value in values:
            if value < last:
                result += last
            last = value
    to_start = first_time - start
    to_end = end - last_time
    sampled = last_time - first_time
    average = sampled / (len(values) - 1)
    if counter and result > 0 and values[0] >= 0:
        to_zero = sampled * (values[0] / result)
        to_start = min(to_start, to_zero)
    threshold = average * EXTRAPOLATION_ALLOWANCE
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    factor = interval / sampled  # Prometheus scales by one factor, per second included,
    if per_second:  # which rounds differently from dividing the result (45 * (1/300) is
        factor /= end - start  # 0.15000000000000002, 45 / 300 is 0.15)
    return result * factor


def total(values: Sequence[float]) -> float:
    """sum: left to right (+Inf plus -Inf is NaN, never an exception)."""
    result = 0.0
    for value in values:
        result += value
    return result


def mean(values: Sequence[float]) -> float:
    """avg: Prometheus's running mean, which stays infinite once infinite (unless the other
    infinity or a NaN comes)."""
    result = values[0]
    for count, value in enumerate(values[1:], start=2):
        if math.isinf(result):
            if math.isinf(value) and (result > 0) == (value > 0):
                continue
            if not math.isinf(value) and not math.isnan(value):
                continue
        result += value / count - result / count
    return result


def smallest(values: Sequence[float]) -> float:
    """min: NaN only when every value is NaN."""
    if _finite_sum(values):
        return min(values)
    result = values[0]
    for value in values[1:]:
        if value < result or math.isnan(result):
            result = value
    return result


def largest(values: Sequence[float]) -> float:
    """max: NaN only when every value is NaN."""
    if _finite_sum(values):
        return max(values)
    result = values[0]
    for value in values[1:]:
        if value > result or math.isnan(result):
            result = value
    return result


def _finite_sum(values: Sequence[float]) -> bool:
    """Whether the values hold no NaN (nor both infinities), so Python's min and max agree
    with Go's: one pass in C instead of a loop in Python."""
    total = sum(values)
    return total == total


AGGREGATORS: dict[str, Callable[[Sequence[float]], float]] = {
    "sum": total,
    "avg": mean,
    "min": smallest,
    "max": largest,
    "count": lambda values: float(len(values)),
}
OVER_TIME: dict[str, Callable[[Sequence[float]], float]] = {
    "sum_over_time": total,
    "avg_over_time": mean,
    "min_over_time": smallest,
    "max_over_time": largest,
    "count_over_time": lambda values: float(len(values)),
    "last_over_time": lambda values: values[-1],
}


def go_max(a: float, b: float) -> float:
    """Go's math.Max: +Inf wins, then NaN."""
    if (math.isinf(a) and a > 0) or (math.isinf(b) and b > 0):
        return math.inf
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return max(a, b)


def go_min(a: float, b: float) -> float:
    """Go's math.Min: -Inf wins, then NaN."""
    if (math.isinf(a) and a < 0) or (math.isinf(b) and b < 0):
        return -math.inf
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return min(a, b)


def rounded(value: float, to_nearest: float = 1.0) -> float:
    """round(v, to_nearest): half up, as Prometheus (Python's round is half to even)."""
    inverse = 1.0 / to_nearest
    scaled = value * inverse + 0.5
    if not math.isfinite(scaled):
        return scaled / inverse
    return math.floor(scaled) / inverse


def _finite_or_same(function: Callable[[float], int]) -> Callable[[float], float]:
    return lambda value: float(function(value)) if math.isfinite(value) else value


ELEMENTWISE: dict[str, Callable[[float], float]] = {
    "abs": abs,
    "floor": _finite_or_same(math.floor),
    "ceil": _finite_or_same(math.ceil),
    "sqrt": lambda value: math.sqrt(value) if value >= 0 else math.nan,
}


def bucket_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """histogram_quantile of one group of (upper bound, cumulative count) buckets, as
    Prometheus's bucketQuantile: NaN without a +Inf bucket or observations, +-Inf for q out of
    [0, 1], counts made monotonic, linear within the bucket the rank falls in."""
    if math.isnan(q):
        return math.nan
    if q < 0 or q > 1:
        return math.copysign(math.inf, q)
    merged: dict[float, float] = {}
    for upper, count in sorted(buckets):
        merged[upper] = merged.get(upper, 0.0) + count
    bounds, counts = list(merged), _monotonic(list(merged.values()))
    if not bounds or bounds[-1] != math.inf or len(bounds) < 2 or counts[-1] == 0:
        return math.nan
    rank = q * counts[-1]
    index = next((i for i in range(len(bounds) - 1) if counts[i] >= rank), len(bounds) - 1)
    if index == len(bounds) - 1:
        return bounds[-2]
    if index == 0 and bounds[0] <= 0:
        return bounds[0]
    start, count = 0.0, counts[index]
    if index > 0:
        start, count, rank = bounds[index - 1], count - counts[index - 1], rank - counts[index - 1]
    if count == 0:  # rank 0 in an empty bucket: 0/0, which Go's float division makes NaN
        return math.nan
    return start + (bounds[index] - start) * (rank / count)


def _monotonic(counts: list[float]) -> list[float]:
    """Counts raised to the running maximum (buckets scraped at slightly different times)."""
    highest, out = -math.inf, []
    for count in counts:
        highest = max(highest, count)
        out.append(highest)
    return out
