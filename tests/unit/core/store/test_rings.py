"""The rings: a bounded size whatever the uptime, grown as ticks arrive up to the capacity or
kept to a retention, gaps never filled with old values, ticks in order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.frames import (
    down_frame,
    frame,
    frame_from_text,
)
from tests.support.payloads import fixture
from tests.support.store_feeding import COUNTER, GAUGE, feed_counter, preemptions
from vtop.core.store.store import Store


def test_series_gap_is_not_filled_with_old_lap_values() -> None:
    store = Store(capacity=4)
    feed_counter(store, [1, 2, 3, 4])
    for when in (4.0, 5.0, 6.0):
        store.ingest(frame(when, GAUGE, {"vllm:num_requests_waiting": 1}))
    store.ingest(frame(7.0, COUNTER, {'vllm:num_preemptions_total{engine="0"}': 9}))
    assert store.points(preemptions(), 7.0, 10.0) == [(7.0, 9.0)]
    assert store.increase(preemptions(), 7.0, 10.0) is None


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


def test_frames_must_move_forward_in_time() -> None:
    store = Store()
    store.ingest(frame(5.0, GAUGE, {"vllm:num_requests_waiting": 1}))
    with pytest.raises(ValueError, match="not after"):
        store.ingest(frame(5.0, GAUGE, {"vllm:num_requests_waiting": 1}))


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
