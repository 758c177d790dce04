"""The rings' one writer: counter resets and restarts as events, aliases and per-process copies
folded, column writes equal to the sample path, series limits, junk, alternation, a target's
last answer."""

from __future__ import annotations

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
from tests.support.payloads import fixture
from tests.support.store_feeding import COUNTER, GAUGE, feed_counter, preemptions
from vtop.core.frame import EventKind, Frame, ScrapeStatus, TargetScrape
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.store.rings import OTHER_MAX_SERIES
from vtop.core.store.store import Store


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


def test_series_limit_drops_new_series_with_an_event() -> None:
    store = Store(max_series=2)
    events = store.ingest(frame_from_text(0.0, "vllm:a 1\nvllm:b 2\nvllm:c 3\n"))
    assert store.series_count() == 2
    assert [e.kind for e in events] == ["series_limit"]


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


def test_series_the_parser_skipped_are_the_series_limit_s_event() -> None:
    junk = "".join(f'junk_total{{shard="{n}"}} {n}\n' for n in range(2_100))
    store = Store()
    events = store.ingest(frame_from_text(0.0, junk + fixture("underload")))
    assert [e.kind for e in events if e.kind is EventKind.SERIES_LIMIT], events
    assert store.dropped_series >= 100
    assert store.select("vllm:num_requests_waiting")  # vLLM's series all kept


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
