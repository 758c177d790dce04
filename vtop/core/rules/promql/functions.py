"""PromQL's functions and aggregations with Prometheus 3's arithmetic: rate's extrapolation
to the range's edges, compensated sums and means, NaN and +-Inf in them, minima and maxima,
round half up."""

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
    """rate (counter, per second), increase (counter) or delta over samples in (start, end],
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
    threshold = average * EXTRAPOLATION_ALLOWANCE
    if to_start >= threshold:
        to_start = average / 2
    if counter and result > 0 and values[0] >= 0:  # never extrapolated below zero
        to_start = min(to_start, sampled * (values[0] / result))
    if to_end >= threshold:
        to_end = average / 2
    interval = sampled + to_start + to_end
    factor = interval / sampled  # Prometheus scales by one factor, per second included,
    if per_second:  # which rounds differently from dividing the result (45 * (1/300) is
        factor /= end - start  # 0.15000000000000002, 45 / 300 is 0.15)
    return result * factor


def neumaier_step(value: float, total: float, compensation: float) -> tuple[float, float]:
    """One step of Prometheus 3's compensated sum (`kahansum.Inc`: Kahan with Neumaier's
    swap): the new total and the rounding error carried beside it (reset once infinite)."""
    new_total = total + value
    if math.isinf(new_total):
        return new_total, 0.0
    if abs(total) >= abs(value):
        return new_total, compensation + ((total - new_total) + value)
    return new_total, compensation + ((value - new_total) + total)


def _exact_enough(values: Sequence[float]) -> float | None:
    """The plain sum where no compensation can change it beyond its last bits (it equals the
    exact sum): two passes in C instead of a loop in Python. None where it cannot be trusted
    (cancellation, an infinity or NaN among the values)."""
    plain = sum(values)
    if math.isinf(plain) or plain != plain:
        return None
    try:
        return plain if math.fsum(values) == plain else None
    except (OverflowError, ValueError):
        return None


def total(values: Sequence[float]) -> float:
    """sum and sum_over_time: Prometheus 3's compensated sum (values that cancel at large
    magnitudes keep their small remainder; +Inf plus -Inf is NaN, never an exception)."""
    quick = _exact_enough(values)
    if quick is not None:
        return quick
    result, compensation = values[0], 0.0
    for value in values[1:]:
        result, compensation = neumaier_step(value, result, compensation)
    return result if math.isinf(result) else result + compensation


def mean(values: Sequence[float]) -> float:
    """avg and avg_over_time as Prometheus 3 computes them: the compensated sum divided by
    the count, switching to a running (compensated) mean only where the sum would overflow."""
    quick = _exact_enough(values)
    if quick is not None:
        return quick / len(values)
    result, compensation, running = values[0], 0.0, math.nan
    incremental = False
    for count, value in enumerate(values[1:], start=2):
        if not incremental:
            new_total, new_compensation = neumaier_step(value, result, compensation)
            if not math.isinf(new_total):
                result, compensation = new_total, new_compensation
                continue
            incremental = True
            running = result / (count - 1)
            compensation /= count - 1
        kept = (count - 1) / count
        running, compensation = neumaier_step(value / count, kept * running, kept * compensation)
    if incremental:
        return running + compensation
    return result / len(values) + compensation / len(values)


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
