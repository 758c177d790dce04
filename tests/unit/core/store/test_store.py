"""Series store: rates, resets, staleness, windowed histogram quantiles, memory bound."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.frames import (
    TARGET,
    down_frame,
    exposition,
    frame,
    frame_from_text,
    frame_from_texts,
)
from tests.support.payloads import fixture, multi_engine
from vtop.core.frame import EventKind, Frame, ScrapeStatus, Series, TargetScrape
from vtop.core.histogram import quantile
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.store.rings import OTHER_MAX_SERIES
from vtop.core.store.store import SeriesFreshness, Store
from vtop.core.store.summary import format_summary, summarize, unknown_summary

COUNTER = {"vllm:num_preemptions_total": "counter"}
GAUGE = {"vllm:num_requests_waiting": "gauge"}


def preemptions(engine: str = "0") -> Series:
    return Series("vllm:num_preemptions_total", (("engine", engine), ("instance", TARGET)))


def feed_counter(store: Store, values: list[float], start: float = 0.0, step: float = 1.0) -> None:
    for index, value in enumerate(values):
        store.ingest(
            frame(start + index * step, COUNTER, {'vllm:num_preemptions_total{engine="0"}': value})
        )


def reference_increase(values: list[float]) -> float:
    """Prometheus counter semantics: a drop means the counter restarted from zero."""
    total = 0.0
    for previous, current in itertools.pairwise(values):
        total += current - previous if current >= previous else current
    return total


def test_rate_and_increase_over_window() -> None:
    store = Store()
    feed_counter(store, [0, 2, 4, 6, 8, 10])
    assert store.increase(preemptions(), 5.0, 5.0) == 10
    assert store.rate(preemptions(), 5.0, 5.0) == 2.0
    assert store.increase(preemptions(), 5.0, 2.0) == 4
    assert store.rate(preemptions(), 5.0, 0.5) == 2.0  # base: the sample at or before now - window
    assert store.rate(preemptions(), 0.0, 5.0) is None  # one sample is no rate


def test_counter_reset_is_an_event_not_a_negative_rate() -> None:
    store = Store()
    feed_counter(store, [100, 110, 120])
    events = store.ingest(frame(3.0, COUNTER, {'vllm:num_preemptions_total{engine="0"}': 5}))
    assert [e.kind for e in events] == ["counter_reset"]
    assert store.increase(preemptions(), 3.0, 3.0) == 25
    assert store.latest(preemptions(), 3.0) == 5


def test_process_restart_resets_counters_even_when_they_grew_past_the_old_value() -> None:
    store = Store()
    types = {**COUNTER, "process_start_time_seconds": "gauge"}
    head = 'vllm:num_preemptions_total{engine="0"}'
    store.ingest(frame(0.0, types, {head: 10, "process_start_time_seconds": 100.0}))
    events = store.ingest(frame(1.0, types, {head: 50, "process_start_time_seconds": 200.0}))
    assert {e.kind for e in events} == {"restart", "counter_reset"}
    assert store.increase(preemptions(), 1.0, 1.0) == 50


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


def test_series_gap_is_not_filled_with_old_lap_values() -> None:
    store = Store(capacity=4)
    feed_counter(store, [1, 2, 3, 4])
    for when in (4.0, 5.0, 6.0):
        store.ingest(frame(when, GAUGE, {"vllm:num_requests_waiting": 1}))
    store.ingest(frame(7.0, COUNTER, {'vllm:num_preemptions_total{engine="0"}': 9}))
    assert store.points(preemptions(), 7.0, 10.0) == [(7.0, 9.0)]
    assert store.increase(preemptions(), 7.0, 10.0) is None


def ttft_text(counts: dict[str, float], engine: str) -> str:
    lines = ["# TYPE vllm:time_to_first_token_seconds histogram"]
    for le, count in counts.items():
        lines.append(
            f'vllm:time_to_first_token_seconds_bucket{{engine="{engine}",le="{le}"}} {count}'
        )
    total = counts["+Inf"]
    lines.append(f'vllm:time_to_first_token_seconds_count{{engine="{engine}"}} {total}')
    lines.append(f'vllm:time_to_first_token_seconds_sum{{engine="{engine}"}} {total * 0.3}')
    return "\n".join(lines)


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


def test_old_metric_names_are_read_as_current_names_without_double_counting() -> None:
    store = Store()
    text = (
        "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.5\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 0.7\n"
    )
    store.ingest(frame_from_text(0.0, text))
    assert [store.latest(s, 0.0) for s in store.select("vllm:kv_cache_usage_perc")] == [0.7]
    store.ingest(frame_from_text(1.0, "vllm:gpu_cache_usage_perc 0.4\n"))
    assert [store.latest(s, 1.0) for s in store.select("vllm:kv_cache_usage_perc")] == [0.4]


def test_unknown_vllm_metrics_are_kept() -> None:
    store = Store()
    store.ingest(frame_from_text(0.0, 'vllm:brand_new_metric{engine="0"} 3\n'))
    assert store.select("vllm:brand_new_metric")


def test_per_engine_and_summed_views() -> None:
    store = Store()
    store.ingest(frame_from_text(0.0, multi_engine(fixture("underload"), 4)))
    per_engine = store.latest_by("vllm:num_requests_waiting", 0.0, by=["engine"])
    assert per_engine == {(("engine", str(e)),): 10.0 for e in range(4)}
    assert store.latest_by("vllm:num_requests_waiting", 0.0) == {(): 40.0}


def test_memory_is_bounded_by_capacity_not_uptime() -> None:
    store = Store(capacity=100)
    text = fixture("underload")
    for tick in range(300):
        store.ingest(frame_from_text(float(tick), text))
    assert store.series_count() == 420
    assert store.memory_bytes() == 100 * 8 * 421
    [series] = store.select("vllm:num_preemptions_total")
    assert len(store.points(series, 299.0, 1e9)) == 100


def test_rings_grow_with_the_ticks_held_up_to_the_capacity() -> None:
    """A short session holds what it saw, not an hour of NaN; the bound is unchanged."""
    store = Store(capacity=100)
    text = fixture("underload")
    store.ingest(frame_from_text(0.0, text))
    assert store.memory_bytes() == 64 * 8 * 421 and store.bound_bytes() == 100 * 8 * 421
    for tick in range(1, 65):
        store.ingest(frame_from_text(float(tick), text))
    assert store.memory_bytes() == 100 * 8 * 421


GROWING = st.lists(
    st.sampled_from(["tick", "tick", "gap", "new", "down", "reset"]), min_size=1, max_size=90
)


@settings(max_examples=60, deadline=None)
@given(GROWING)
def test_a_growing_ring_answers_as_one_made_at_its_capacity(steps: list[str]) -> None:
    """Every value, window and time a ring holds is the same whether it started at its
    capacity or grew to it while ticks arrived (gaps and series born late included)."""
    stores = [Store(capacity=40, first_size=40), Store(capacity=40, first_size=2)]
    names = ["vllm:num_requests_waiting"]
    counted = 0.0
    for step, kind in enumerate(steps):
        if kind == "new":
            names.append(f"vllm:num_requests_running_{step}")
        counted = 1.0 if kind == "reset" else counted + step
        values = {name: float(step * (i + 1)) for i, name in enumerate(names)}
        values['vllm:num_preemptions_total{engine="0"}'] = counted
        if kind == "gap":
            values.pop(names[0])
        types = {**GAUGE, **COUNTER}
        shot = down_frame(float(step)) if kind == "down" else frame(float(step), types, values)
        for store in stores:
            store.ingest(shot)
    now = float(len(steps) - 1)
    made, grown = stores
    for name in [*names, "vllm:num_preemptions_total"]:
        for series in made.select(name):
            for window in (3.0, 30.0, 100.0):
                assert grown.points(series, now, window) == made.points(series, now, window)
                assert grown.increase(series, now, window) == made.increase(series, now, window)
            assert grown.last_known(series) == made.last_known(series)


def test_a_ring_reserves_at_most_a_quarter_ahead_and_stops_at_its_capacity() -> None:
    """Slots reserved ahead cost 8 bytes per series each: 600 ticks hold about 600 slots,
    not the next power of two."""
    stores = [Store(capacity=3600), Store(capacity=700)]
    for t in range(800):
        for store in stores:
            store.ingest(frame(float(t), GAUGE, {"vllm:num_requests_waiting": t}))
            if t == 599:
                assert 600 <= store.size <= 750
    grown, capped = stores
    assert 800 <= grown.size <= 1000 and capped.size == 700
    [series] = capped.select("vllm:num_requests_waiting")
    held = capped.points(series, 799.0, 1e9)
    assert len(held) == 700 and held[0] == (100.0, 100.0) and held[-1] == (799.0, 799.0)


def test_series_limit_drops_new_series_with_an_event() -> None:
    store = Store(max_series=2)
    events = store.ingest(frame_from_text(0.0, "vllm:a 1\nvllm:b 2\nvllm:c 3\n"))
    assert store.series_count() == 2
    assert [e.kind for e in events] == ["series_limit"]


def test_frames_must_move_forward_in_time() -> None:
    store = Store()
    store.ingest(frame(5.0, GAUGE, {"vllm:num_requests_waiting": 1}))
    with pytest.raises(ValueError, match="not after"):
        store.ingest(frame(5.0, GAUGE, {"vllm:num_requests_waiting": 1}))


STEP = st.tuples(
    st.sampled_from(["grow", "grow", "grow", "drop_counter", "new_series", "restart", "down"]),
    st.integers(0, 5),
)
COLUMN_TYPES = {
    "vllm:num_preemptions_total": "counter",
    "vllm:num_requests_waiting": "gauge",
    "process_start_time_seconds": "gauge",
}


def column_payload(step: int, kind: str, amount: int, start: float, extra: bool) -> str:
    """A small payload: two counters, a gauge, the start time, maybe an extra series."""
    counter = float(step * 3 + amount) if kind != "drop_counter" else float(amount)
    values = {
        'vllm:num_preemptions_total{engine="0"}': counter,
        'vllm:num_preemptions_total{engine="1"}': float(step),
        "vllm:num_requests_waiting": float(amount),
        "process_start_time_seconds": start,
    }
    if extra:
        values['vllm:num_preemptions_total{engine="2"}'] = float(step)
    return exposition(COLUMN_TYPES, values)


@settings(max_examples=150, deadline=None)
@given(st.lists(STEP, min_size=2, max_size=30))
def test_column_writes_store_what_the_sample_path_stores(steps: list[tuple[str, int]]) -> None:
    """Scrapes shaped like the last one take the column path; every value, reset and event
    must equal the one-sample-at-a-time path's (gaps, restarts, resets, new series)."""
    stores = {True: Store(capacity=16), False: Store(capacity=16, column_writes=False)}
    parser, start, extra = ExpositionParser(), 100.0, False
    events: dict[bool, list[list[tuple[str, str]]]] = {True: [], False: []}
    for step, (kind, amount) in enumerate(steps):
        start += 50.0 if kind == "restart" else 0.0
        extra = extra or kind == "new_series"
        text = column_payload(step, kind, amount, start, extra)
        parsed = parser.parse(text)
        scrape = TargetScrape(TARGET, ScrapeStatus.OK, text, tuple(parsed.samples), parsed.types)
        shot = down_frame(float(step)) if kind == "down" else Frame(float(step), (scrape,))
        for columns, store in stores.items():
            events[columns].append([(e.kind, e.message) for e in store.ingest(shot)])
    assert events[True] == events[False]
    now = float(len(steps) - 1)
    for series in stores[False].select("vllm:num_preemptions_total"):
        for window in (1.0, 5.0, 20.0):
            assert stores[True].increase(series, now, window) == stores[False].increase(
                series, now, window
            )
        assert stores[True].points(series, now, 20.0) == stores[False].points(series, now, 20.0)


def test_a_scrape_shaped_like_the_last_takes_the_column_path() -> None:
    store = Store()
    text = fixture("underload")
    parser = ExpositionParser()
    for tick in range(3):
        parsed = parser.parse(text)
        scrape = TargetScrape(TARGET, ScrapeStatus.OK, text, tuple(parsed.samples), parsed.types)
        store.ingest(Frame(float(tick), (scrape,)))
    assert parser.layout_hits == 2
    assert store.columns_written == 2


def test_per_process_gauge_copies_fold_into_one_series_keeping_the_live_value() -> None:
    # vLLM 0.11.x with --api-server-count 2: one copy per API server process (#28792)
    store = Store()
    for t, live in enumerate((0.25, 0.65, 0.5)):
        text = (
            "# TYPE vllm:kv_cache_usage_perc gauge\n"
            f'vllm:kv_cache_usage_perc{{engine="0",model_name="m",pid="277"}} 0.0\n'
            f'vllm:kv_cache_usage_perc{{engine="0",model_name="m",pid="273"}} {live}\n'
        )
        store.ingest(frame_from_text(float(t), text))
    series = store.select("vllm:kv_cache_usage_perc")
    assert [s.label("pid") for s in series] == [None]
    assert store.max_over_time(series[0], 2.0, 10.0) == 0.65
    assert store.latest(series[0], 2.0) == 0.5


def test_ray_serve_names_are_vllm_series() -> None:
    store = Store()
    for t in range(3):
        text = (
            "# TYPE ray_vllm_num_requests_running gauge\n"
            f'ray_vllm_num_requests_running{{ReplicaId="r1",engine="0"}} {t}\n'
            "# TYPE ray_vllm:generation_tokens_total counter\n"
            f'ray_vllm:generation_tokens_total{{ReplicaId="r1",engine="0"}} {100 * t}\n'
        )
        store.ingest(frame_from_text(float(t), text))
    (running,) = store.select("vllm:num_requests_running")
    (tokens,) = store.select("vllm:generation_tokens_total")
    assert store.latest(running, 2.0) == 2.0
    assert store.rate(tokens, 2.0, 10.0) == pytest.approx(100.0)


def test_an_untyped_total_is_a_counter_across_a_restart() -> None:
    # no # TYPE lines: *_total still only grows between restarts
    store = Store()
    for t, value in enumerate((100.0, 172.0, 10.0, 82.0)):
        store.ingest(
            frame_from_text(float(t), f'vllm:generation_tokens_total{{engine="0"}} {value}\n')
        )
    (series,) = store.select("vllm:generation_tokens_total")
    rate = store.rate(series, 3.0, 10.0)
    assert rate is not None and rate > 0
    assert store.increase(series, 3.0, 10.0) == pytest.approx(72 + 10 + 72)


def test_an_untyped_total_outside_the_catalogue_is_a_counter_too() -> None:
    store = Store()
    for t, value in enumerate((50.0, 60.0, 5.0, 15.0)):
        store.ingest(frame_from_text(float(t), f"proxy_requests_total {value}\n"))
    (series,) = store.select("proxy_requests_total")
    assert store.increase(series, 3.0, 10.0) == pytest.approx(10 + 5 + 10)


def test_junk_that_comes_first_never_costs_the_vllm_series() -> None:
    junk = "".join(f'junk_metric{{n="{n}"}} 1\n' for n in range(5000))
    store = Store(max_series=100)
    for t in range(3):
        text = junk + f'vllm:num_requests_running{{engine="0"}} {t}\n'
        store.ingest(frame_from_text(float(t), "# TYPE vllm:num_requests_running gauge\n" + text))
    (running,) = store.select("vllm:num_requests_running")
    assert store.latest(running, 2.0) == 2.0
    assert store.series_count() <= 100 and store.dropped_series > 0


def test_one_server_s_junk_never_costs_another_server_its_series() -> None:
    store = Store()
    junk = "".join(f'junk_total{{shard="{n}"}} {n}\n' for n in range(OTHER_MAX_SERIES + 100))
    frame = frame_from_texts(0.0, {"http://a:8000": junk, "http://b:8000": fixture("underload")})
    store.ingest(frame)
    kept_junk = store.select("junk_total")
    assert len(kept_junk) == OTHER_MAX_SERIES and store.dropped_series == 100
    parsed = ExpositionParser().parse(fixture("underload")).samples
    others_of_b = {s.series.name for s in parsed if not s.series.name.startswith("vllm:")}
    assert len(others_of_b) > 10
    assert all(store.select(name, {"instance": "http://b:8000"}) for name in others_of_b)


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


def test_a_url_that_alternates_between_processes_is_one_event_not_a_restart_per_scrape() -> None:
    store = Store()
    kinds: list[str] = []
    for t in range(12):
        start = 1.7e9 if t % 2 else 1.8e9
        text = (
            f"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {start}\n"
            f"# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total {t * 100}\n"
        )
        kinds += [event.kind for event in store.ingest(frame_from_text(float(t), text))]
    assert kinds.count("restart") <= 1 and kinds.count("alternating") == 1, kinds
    assert store.alternating(TARGET, 11.0, 60.0) == 2


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


def test_series_the_parser_skipped_are_the_series_limit_s_event() -> None:
    junk = "".join(f'junk_total{{shard="{n}"}} {n}\n' for n in range(2_100))
    store = Store()
    events = store.ingest(frame_from_text(0.0, junk + fixture("underload")))
    assert [e.kind for e in events if e.kind is EventKind.SERIES_LIMIT], events
    assert store.dropped_series >= 100
    assert store.select("vllm:num_requests_waiting")  # vLLM's series all kept


SPACINGS = st.lists(
    st.tuples(
        st.sampled_from([0.25, 1.0, 1.0, 3.0, 40.0]), st.sampled_from(["tick", "gap", "new"])
    ),
    min_size=1,
    max_size=400,
)


@settings(max_examples=40, deadline=None)
@given(SPACINGS)
def test_a_ring_kept_for_a_retention_answers_every_window_in_it_as_a_full_one(
    steps: list[tuple[float, str]],
) -> None:
    """Ticks come closer or further apart (the interval changed, the dashboard paused): a ring
    that keeps 30 s answers every window up to 30 s as a ring that keeps every tick, and what
    it dropped was older than its retention."""
    kept, every = Store(capacity=4000, first_size=4, retention_s=30.0), Store(capacity=4000)
    names = ["vllm:num_requests_waiting"]
    now, counted = 0.0, 0.0
    for step, (spacing, kind) in enumerate(steps):
        now += spacing
        if kind == "new":
            names.append(f"vllm:num_requests_running_{step}")
        counted += step
        values = {name: float(step * (i + 1)) for i, name in enumerate(names)}
        values['vllm:num_preemptions_total{engine="0"}'] = counted
        if kind == "gap":
            values.pop(names[0])
        shot = frame(now, {**GAUGE, **COUNTER}, values)
        kept.ingest(shot)
        every.ingest(shot)
    for name in [*names, "vllm:num_preemptions_total"]:
        for series in every.select(name):
            for window in (1.0, 10.0, 30.0):
                assert kept.points(series, now, window) == every.points(series, now, window)
                assert kept.increase(series, now, window) == every.increase(series, now, window)
                assert kept.rate(series, now, window) == every.rate(series, now, window)
    held_since = kept.held_since()
    assert kept.oldest_tick == 0 or (held_since is not None and held_since <= now - 30.0)


def test_a_watching_store_holds_what_its_readers_reach_not_its_capacity() -> None:
    """At one tick a second for an hour, a retention of ten minutes holds about ten minutes
    (a quarter more at most); ticks four times closer grow it to hold the same ten minutes."""
    store = Store(capacity=3600, retention_s=600.0)
    for t in range(3600):
        store.ingest(frame(float(t), GAUGE, {"vllm:num_requests_waiting": t}))
    assert 601 <= store.size <= 760, store.size
    [series] = store.select("vllm:num_requests_waiting")
    assert store.points(series, 3599.0, 600.0)[0] == (3000.0, 3000.0)
    for quarter in range(1, 4 * 600 + 1):
        store.ingest(frame(3599.0 + quarter / 4, GAUGE, {"vllm:num_requests_waiting": 1.0}))
    now = 3599.0 + 600.0
    assert 2401 <= store.size <= 3600, store.size
    held = store.points(series, now, 600.0)
    assert len(held) == 2400 and held[0][0] == now - 599.75


def test_a_server_down_for_longer_than_the_rings_hold_keeps_its_last_answer() -> None:
    store = Store(capacity=3600, retention_s=60.0)
    store.ingest(frame(0.0, GAUGE, {"vllm:num_requests_waiting": 3}))
    for t in range(1, 200):
        store.ingest(down_frame(float(t)))
    held_since = store.held_since()
    assert held_since is not None and held_since > 0.0
    assert store.target_last_ok(TARGET) == 0.0
    [series] = store.select("vllm:num_requests_waiting")
    assert store.in_last_answer(series, TARGET) and store.last_known(series) is None
