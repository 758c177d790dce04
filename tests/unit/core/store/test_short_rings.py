"""Short rings: a watching store holds the series its rules read over its retention; a bucket,
a `_created` time or a series not from vLLM that no rule reads holds its last SHORT_TICKS ticks
until a reader reaches back as far, which lengthens every ring of that name. A reader that
reads from the first tick on loses nothing."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.frames import down_frame, frame, frame_from_text
from tests.support.payloads import fixture
from vtop.core.frame import Frame, Series
from vtop.core.rules.loader import load_rules
from vtop.core.rules.promql.samples import instant, range_samples
from vtop.core.session.diagnose import DiagnoseOptions
from vtop.core.session.session import watching_session
from vtop.core.store.rings import SHORT_TICKS
from vtop.core.store.store import Store

LAG = "vllm:lag_seconds_bucket"
"""A histogram's buckets, no rule reads them (a gauge's values: they go down as well)."""
TYPES = {"vllm:lag_seconds": "histogram", "vllm:done": "counter", "vllm:free": "gauge"}
DONE = "vllm:done_total"
FREE = "vllm:free"
"""A counter and a gauge no rule reads: held long from their first tick."""
STEPS = st.lists(
    st.sampled_from(["tick", "tick", "tick", "gap", "new", "down", "reset"]),
    min_size=1,
    max_size=120,
)


def _shot(step: int, kind: str, bounds: list[str], counted: float) -> Frame:
    if kind == "down":
        return down_frame(float(step))
    values = {f'{LAG}{{le="{le}"}}': float(step * (i + 1)) for i, le in enumerate(bounds)}
    values[f'{DONE}{{engine="0"}}'] = counted
    values[FREE] = float(step % 7)
    if kind == "gap":
        values.pop(f'{LAG}{{le="{bounds[0]}"}}')
    return frame(float(step), TYPES, values)


def _reads(store: Store, series: Series, now: float) -> list[object]:
    """What the rules and views ask of a series: windows, rates, instants, raw ranges."""
    answers: list[object] = [store.last_known(series), instant(store, series, now)]
    for window in (5.0, 30.0, 100.0):
        answers += [
            store.points(series, now, window),
            store.increase(series, now, window),
            store.rate(series, now, window),
            tuple(range_samples(store, series, now - window, now)),
        ]
    return answers


@settings(max_examples=50, deadline=None)
@given(STEPS, st.sampled_from([2, 40]))
def test_short_rings_read_from_the_first_tick_answer_as_long_ones(
    steps: list[str], first_size: int
) -> None:
    """Gaps, failed scrapes, counter resets, series born late, rings that grow: a store whose
    every name starts short answers every read, tick after tick, as one whose rings are all
    long, when the reads begin at the first tick (as a view's do)."""
    short = Store(capacity=60, first_size=first_size, long_names=())
    long = Store(capacity=60, first_size=first_size)
    bounds, counted = ["0.5"], 0.0
    for step, kind in enumerate(steps):
        if kind == "new":
            bounds.append(str(step))
        counted = 1.0 if kind == "reset" else counted + step
        shot = _shot(step, kind, bounds, counted)
        short.ingest(shot)
        long.ingest(shot)
        for name in long.names():
            for series in long.select(name):
                assert _reads(short, series, float(step)) == _reads(long, series, float(step))
    tracks = [short.rings.track(s) for name in short.names() for s in short.select(name)]
    assert {t.name for t in tracks if t is not None and t.short} <= {LAG}


def test_a_series_no_reader_reached_holds_its_last_ticks_until_one_does() -> None:
    """Nobody read the buckets for 100 ticks: their ring held the last SHORT_TICKS; the first
    read over a minute lengthens it (what it dropped stays absent, never an old lap's value),
    and from then on it holds every tick like the counter and the gauge beside it."""
    store = Store(capacity=400, long_names=())
    for t in range(100):
        store.ingest(frame(float(t), TYPES, {LAG: float(t), DONE: float(t), FREE: 1.0}))
    [lag], [done] = store.select(LAG), store.select(DONE)
    # 128 ticks of room (64, grown by 64) for the long rings and the times, 16 for the short
    assert store.memory_bytes() == 8 * (128 * 3 + SHORT_TICKS)
    assert store.last_known(lag) == (99.0, 99.0)
    assert len(store.points(done, 99.0, 60.0)) == 60
    held = store.points(lag, 99.0, 60.0)
    assert held == [(float(t), float(t)) for t in range(100 - SHORT_TICKS, 100)]
    assert store.memory_bytes() == 8 * 128 * 4
    for t in range(100, 200):
        store.ingest(frame(float(t), TYPES, {LAG: float(t)}))
    assert store.points(lag, 199.0, 60.0) == [(float(t), float(t)) for t in range(140, 200)]


def test_a_later_series_of_a_lengthened_name_is_long_from_its_first_tick() -> None:
    store = Store(capacity=400, long_names=())
    for t in range(20):
        store.ingest(frame(float(t), TYPES, {f'{LAG}{{le="1"}}': 1.0}))
    [first] = store.select(LAG)
    assert len(store.points(first, 19.0, 60.0)) == SHORT_TICKS  # lengthened from here on
    for t in range(20, 60):
        store.ingest(frame(float(t), TYPES, {f'{LAG}{{le="1"}}': 1.0, f'{LAG}{{le="2"}}': 2.0}))
    [second] = [s for s in store.select(LAG) if s != first]
    assert len(store.points(second, 59.0, 60.0)) == 40
    assert len(store.points(first, 59.0, 60.0)) == 40 + SHORT_TICKS


def test_a_watching_session_holds_the_rule_series_long_and_the_rest_short() -> None:
    """Of the real capture's 420 series, a watching session keeps short rings for the buckets,
    `_created` times and series not from vLLM that its rules do not read (the summary's
    end-to-end latency buckets lengthened when it reads them): more than half of them."""
    rules = load_rules()
    session = watching_session(rules, DiagnoseOptions(), servers=1)
    every = Store(capacity=session.store.capacity)
    text = fixture("underload")
    for t in range(30):
        shot = frame_from_text(float(t), text)
        session.ingest(shot)
        every.ingest(shot)
    read = {name for rule in rules for name in rule.names_read}
    store = session.store
    tracks = [store.rings.track(s) for name in store.names() for s in store.select(name)]
    long = [t for t in tracks if t is not None and not t.short]
    assert {t.name for t in long} >= {t.name for t in tracks if t and t.name in read}
    assert store.series_count() == every.series_count() == len(tracks) == 420
    assert len(long) < 420 / 2, len(long)
    assert all(
        t.name.endswith(("_bucket", "_created")) or not t.name.startswith("vllm:")
        for t in tracks
        if t and t.short
    )
    assert store.memory_bytes() == 8 * (
        store.size * (len(long) + 1) + SHORT_TICKS * (420 - len(long))
    )
    assert every.memory_bytes() == 8 * store.size * 421


def test_what_a_what_if_and_a_verify_read_when_asked_is_held_long_from_the_first_tick() -> None:
    """A what-if calibrates on up to two minutes of the session's store and a verify measures
    its window, both only when asked: every series they read was held long all along (none
    is lengthened when they first read it, which would have cost it all but 16 ticks), even
    when the session's rules read none of them (a user's own rule set)."""
    from vtop.core.manage.verdict import measure as verify_measure
    from vtop.core.whatif.calibrate import CannotModelError, measure, refusal, step_points

    session = watching_session([], DiagnoseOptions(), servers=1)
    text = fixture("underload")
    for t in range(130):
        session.ingest(frame_from_text(float(t), text))
    store, [target] = session.store, list(session.targets)
    shorts = sorted(str(s) for n in store.names() for s in store.select(n) if _short(store, s))
    measure(store, target, 129.0, 120.0)
    refusal(store, target, 129.0, 120.0)
    verify_measure(store, target, 129.0, 15.0)
    with contextlib.suppress(CannotModelError):  # no steps in an unchanging capture
        step_points(store, target, 129.0, 120.0, engines=1, kv_tokens=1000.0)
    after = sorted(str(s) for n in store.names() for s in store.select(n) if _short(store, s))
    assert shorts and after == shorts


def _short(store: Store, series: Series) -> bool:
    track = store.rings.track(series)
    return track is not None and track.short
