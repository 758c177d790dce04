"""The store's window queries: rates and increases across resets, over-time reductions against
the reference, absent and stale apart from zero, histogram quantiles from bucket deltas, the
summary."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.frames import (
    TARGET,
    down_frame,
    frame,
    frame_from_text,
)
from tests.support.payloads import fixture, multi_engine
from tests.support.store_feeding import (
    GAUGE,
    feed_counter,
    preemptions,
    reference_increase,
    ttft_text,
)
from vtop.core.frame import Series
from vtop.core.histogram import quantile
from vtop.core.store.store import SeriesFreshness, Store
from vtop.core.store.summary import format_summary, summarize, unknown_summary


def test_rate_and_increase_over_window() -> None:
    store = Store()
    feed_counter(store, [0, 2, 4, 6, 8, 10])
    assert store.increase(preemptions(), 5.0, 5.0) == 10
    assert store.rate(preemptions(), 5.0, 5.0) == 2.0
    assert store.increase(preemptions(), 5.0, 2.0) == 4
    assert store.rate(preemptions(), 5.0, 0.5) == 2.0  # base: the sample at or before now - window
    assert store.rate(preemptions(), 0.0, 5.0) is None  # one sample is no rate


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=2, max_size=60), st.integers(1, 80))
def test_increase_matches_reference(values: list[int], window: int) -> None:
    store = Store(capacity=64)
    feed_counter(store, [float(v) for v in values])
    now = float(len(values) - 1)
    kept = values[-min(len(values), 64, window + 1) :]
    expected = reference_increase([float(v) for v in kept]) if len(kept) > 1 else None
    assert store.increase(preemptions(), now, float(window)) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=40), st.integers(1, 50))
def test_over_time_matches_reference(values: list[float], window: int) -> None:
    store = Store()
    for index, value in enumerate(values):
        store.ingest(frame(float(index), GAUGE, {"vllm:num_requests_waiting": value}))
    series = Series("vllm:num_requests_waiting", (("instance", TARGET),))
    now = float(len(values) - 1)
    inside = [v for i, v in enumerate(values) if now - window < i <= now]
    assert store.max_over_time(series, now, window) == max(inside)
    assert store.min_over_time(series, now, window) == min(inside)
    assert store.avg_over_time(series, now, window) == pytest.approx(
        math.fsum(inside) / len(inside)
    )


def test_absent_stale_and_fresh_are_distinct_from_zero() -> None:
    store = Store(stale_after_s=10)
    waiting = Series("vllm:num_requests_waiting", (("instance", TARGET),))
    assert store.freshness(waiting, 0.0) is SeriesFreshness.ABSENT
    store.ingest(frame(0.0, GAUGE, {"vllm:num_requests_waiting": 0.0}))
    assert store.freshness(waiting, 0.0) is SeriesFreshness.FRESH
    assert store.latest(waiting, 0.0) == 0.0
    assert store.freshness(waiting, 9.0) is SeriesFreshness.FRESH
    assert store.freshness(waiting, 11.0) is SeriesFreshness.STALE  # no tick for too long
    store.ingest(down_frame(12.0))
    assert store.freshness(waiting, 12.0) is SeriesFreshness.STALE  # the newest scrape failed
    assert store.last_known(waiting) == (0.0, 0.0)
    store.ingest(frame(13.0, GAUGE, {"vllm:num_requests_waiting": 3.0}))
    assert store.latest(waiting, 13.0) == 3.0
    store.ingest(frame(14.0, {}, {"other": 1.0}))
    assert store.latest(waiting, 14.0) is None  # gone from a successful scrape: stale at once


def test_windowed_quantile_uses_bucket_deltas_and_merges_engines_by_summing() -> None:
    store = Store()
    old = {"0.1": 1000.0, "0.5": 1000.0, "1.0": 1000.0, "+Inf": 1000.0}
    store.ingest(frame_from_text(0.0, ttft_text(old, "0") + "\n" + ttft_text(old, "1")))
    new0 = {"0.1": 1000.0, "0.5": 1010.0, "1.0": 1010.0, "+Inf": 1010.0}
    new1 = {"0.1": 1000.0, "0.5": 1000.0, "1.0": 1030.0, "+Inf": 1030.0}
    store.ingest(frame_from_text(10.0, ttft_text(new0, "0") + "\n" + ttft_text(new1, "1")))
    per_engine = store.histogram_quantile(
        0.5, "vllm:time_to_first_token_seconds", 10.0, 10.0, by=["engine"]
    )
    assert per_engine[(("engine", "0"),)] == pytest.approx(0.3)
    assert per_engine[(("engine", "1"),)] == pytest.approx(0.75)
    merged = store.histogram_quantile(0.5, "vllm:time_to_first_token_seconds", 10.0, 10.0)
    expected = quantile(0.5, [(0.1, 0), (0.5, 10), (1.0, 40), (math.inf, 40)])
    assert merged[()] == pytest.approx(expected)
    assert store.histogram_mean("vllm:time_to_first_token_seconds", 10.0, 10.0)[
        ()
    ] == pytest.approx(0.3)


def test_per_engine_and_summed_views() -> None:
    store = Store()
    store.ingest(frame_from_text(0.0, multi_engine(fixture("underload"), 4)))
    per_engine = store.latest_by("vllm:num_requests_waiting", 0.0, by=["engine"])
    assert per_engine == {(("engine", str(e)),): 10.0 for e in range(4)}
    assert store.latest_by("vllm:num_requests_waiting", 0.0) == {(): 40.0}


FINISHING = """# TYPE vllm:request_success counter
vllm:request_success_total{{engine="0",finished_reason="stop"}} {stop}
vllm:request_success_total{{engine="0",finished_reason="length"}} {length}
vllm:request_success_total{{engine="0",finished_reason="abort"}} 0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{{engine="0",le="1.0"}} {fast}
vllm:e2e_request_latency_seconds_bucket{{engine="0",le="10.0"}} {done}
vllm:e2e_request_latency_seconds_bucket{{engine="0",le="+Inf"}} {done}
vllm:e2e_request_latency_seconds_sum{{engine="0"}} {total}
vllm:e2e_request_latency_seconds_count{{engine="0"}} {done}
"""


def test_the_summary_has_the_request_rate_end_to_end_latency_and_finish_reasons() -> None:
    store = Store()
    for t, (stop, length) in enumerate([(0, 0), (8, 2), (16, 4)]):
        done = stop + length
        text = FINISHING.format(stop=stop, length=length, fast=done // 2, done=done, total=3 * done)
        store.ingest(frame_from_text(10.0 * t, text))
    summary = summarize(store, TARGET, 20.0, 20.0)
    assert summary.requests_per_s is not None and math.isclose(summary.requests_per_s, 1.0)
    assert [(r, round(s, 3)) for r, s in summary.finish_shares] == [
        ("stop", 0.8),
        ("length", 0.2),
        ("abort", 0.0),
    ]
    assert summary.length_per_s is not None and math.isclose(summary.length_per_s, 0.2)
    assert summary.error_per_s == 0.0  # finished requests counted, none of them in error
    assert summary.e2e_p50_s is not None and summary.e2e_p50_s <= 1.0 < (summary.e2e_p99_s or 0)
    line = format_summary(summary)
    assert "req/s 1.00" in line and line.endswith("finished stop 80% length 20%"), line
    assert unknown_summary(TARGET).stop_per_s is None  # nothing counted is not zero


def test_buckets_that_fall_beyond_scrape_skew_give_no_quantile() -> None:
    skewed = [(0.5, 100.0), (1.0, 99.0), (2.5, 150.0), (math.inf, 150.0)]
    assert quantile(0.5, skewed) == pytest.approx(0.375)  # one short: skew, clamped as Prometheus
    broken = [(0.5, 100.0), (1.0, 120.0), (2.5, 5.0), (math.inf, 150.0)]
    assert quantile(0.5, broken) is None  # a confident 0.6 s from these would be a guess
    assert quantile(0.99, broken) is None


def test_a_broken_bucket_in_the_window_makes_the_summary_figure_unknown() -> None:
    store = Store()
    before = {"0.1": 0.0, "0.5": 0.0, "1.0": 0.0, "+Inf": 0.0}
    store.ingest(frame_from_text(0.0, ttft_text(before, "0")))
    after = {"0.1": 10.0, "0.5": 40.0, "1.0": 0.0, "+Inf": 50.0}
    store.ingest(frame_from_text(10.0, ttft_text(after, "0")))
    found = store.histogram_quantile(0.5, "vllm:time_to_first_token_seconds", 10.0, 10.0)
    assert found == {(): None}
