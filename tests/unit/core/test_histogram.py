"""Histogram quantiles: Prometheus's linear interpolation within the bucket of the rank."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtop.core.histogram import quantile


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=8), st.floats(0.01, 0.99))
def test_quantile_matches_reference_interpolation(per_bucket: list[int], q: float) -> None:
    bounds = [0.1 * (i + 1) for i in range(len(per_bucket))]
    cumulative, running = [], 0
    for count in per_bucket:
        running += count
        cumulative.append(float(running))
    buckets = [*zip(bounds, cumulative, strict=True), (math.inf, float(running))]
    result = quantile(q, buckets)
    if running == 0:
        assert result is None
        return
    rank = q * running
    index = next(i for i, c in enumerate(cumulative) if c >= rank)
    lower = bounds[index - 1] if index else 0.0
    below = cumulative[index - 1] if index else 0.0
    expected = lower + (bounds[index] - lower) * (rank - below) / (cumulative[index] - below)
    assert result == pytest.approx(expected)


def test_quantile_in_inf_bucket_returns_largest_finite_bound() -> None:
    assert quantile(0.99, [(0.1, 1), (1.0, 1), (math.inf, 10)]) == 1.0
