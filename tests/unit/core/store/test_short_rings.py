"""Short rings: a watching store holds the series its rules read over its retention; a bucket,
a `_created` time or a series not from vLLM that no rule reads holds its last SHORT_TICKS ticks
until a reader reaches back as far, which lengthens every ring of that name. A reader that
reads from the first tick on loses nothing."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.frames import down_frame, frame, frame_from_text
from tests.support.payloads import fixture
from vtop.core.frame import Frame, Series
from vtop.core.rules.loader import load_rules
from vtop.core.rules.promql.samples import instant, range_samples
from vtop.core.session.diagnose import DiagnoseOptions
from vtop.core.session.session import (
    READ_WHEN_ASKED_S,
    watching_reaches,
    watching_retention_s,
    watching_session,
)
from vtop.core.store.rings import SHORT_TICKS, Reaches, starts_short
from vtop.core.store.store import Store
from vtop.core.store.summary import WINDOW_NAMES

LAG = "vllm:lag_seconds_bucket"
"""A histogram's buckets, no rule reads them (a gauge's values: they go down as well)."""
TYPES = {"vllm:lag_seconds": "histogram", "vllm:done": "counter", "vllm:free": "gauge"}
DONE = "vllm:done_total"
FREE = "vllm:free"
"""A counter and a gauge no rule reads: held long from their first tick."""
EVERY_NAME_LONG = Reaches({}, math.inf)
"""Every name held long but the buckets, `_created` times and series not from vLLM."""
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


def _fed_alike(steps: list[str], *stores: Store) -> Iterator[int]:
    """Each step's frame into every store alike (a bucket born at each "new" step, the counter
    reset at each "reset"); yields the step after."""
    bounds, counted = ["0.5"], 0.0
    for step, kind in enumerate(steps):
        if kind == "new":
            bounds.append(str(step))
        counted = 1.0 if kind == "reset" else counted + step
        shot = _shot(step, kind, bounds, counted)
        for store in stores:
            store.ingest(shot)
        yield step


def _reads(store: Store, series: Series, now: float, *windows: float) -> list[object]:
    """What the rules and views ask of a series: windows, rates, instants, raw ranges."""
    answers: list[object] = [store.last_known(series), instant(store, series, now)]
    for window in windows or (5.0, 30.0, 100.0):
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
    short = Store(capacity=60, first_size=first_size, reaches=EVERY_NAME_LONG)
    long = Store(capacity=60, first_size=first_size)
    for step in _fed_alike(steps, short, long):
        for name in long.names():
            for series in long.select(name):
                assert _reads(short, series, float(step)) == _reads(long, series, float(step))
    tracks = [short.rings.track(s) for name in short.names() for s in short.select(name)]
    assert {t.name for t in tracks if t is not None and t.tier is not None} <= {LAG}


@settings(max_examples=50, deadline=None)
@given(STEPS, st.sampled_from([2, 40]), st.sampled_from([3.0, 12.0]))
def test_rings_of_a_reach_answer_reads_within_it_as_long_ones(
    steps: list[str], first_size: int, reach: float
) -> None:
    """The same frames into rings held over a reach shorter than the retention: every read no
    further back than the reach, at every tick, answers as the long rings do (never a ring
    lengthened), whatever the reads did before (the last value known, however old, is not
    such a read)."""
    tiered = Store(
        capacity=60,
        first_size=first_size,
        retention_s=40.0,
        reaches=Reaches({LAG: reach, DONE: reach}, math.inf),
    )
    long = Store(capacity=60, first_size=first_size, retention_s=40.0)
    for step in _fed_alike(steps, tiered, long):
        for name in (LAG, DONE):
            for series in long.select(name):
                reads = _reads(tiered, series, float(step), 1.0, reach)[1:]
                assert reads == _reads(long, series, float(step), 1.0, reach)[1:]
    tracks = [tiered.rings.track(s) for name in (LAG, DONE) for s in tiered.select(name)]
    assert all(t is not None and t.tier is not None for t in tracks)


def test_a_series_no_reader_reached_holds_its_last_ticks_until_one_does() -> None:
    """Nobody read the buckets for 100 ticks: their ring held the last SHORT_TICKS; the first
    read over a minute lengthens it (what it dropped stays absent, never an old lap's value),
    and from then on it holds every tick like the counter and the gauge beside it."""
    store = Store(capacity=400, reaches=EVERY_NAME_LONG)
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
    store = Store(capacity=400, reaches=EVERY_NAME_LONG)
    for t in range(20):
        store.ingest(frame(float(t), TYPES, {f'{LAG}{{le="1"}}': 1.0}))
    [first] = store.select(LAG)
    assert len(store.points(first, 19.0, 60.0)) == SHORT_TICKS  # lengthened from here on
    for t in range(20, 60):
        store.ingest(frame(float(t), TYPES, {f'{LAG}{{le="1"}}': 1.0, f'{LAG}{{le="2"}}': 2.0}))
    [second] = [s for s in store.select(LAG) if s != first]
    assert len(store.points(second, 59.0, 60.0)) == 40
    assert len(store.points(first, 59.0, 60.0)) == 40 + SHORT_TICKS


def test_a_watching_session_holds_each_rule_series_over_its_reach_and_the_rest_short() -> None:
    """Of the real capture's 420 series, a watching session keeps short rings for the buckets,
    `_created` times and series not from vLLM that neither its rules nor a diagnosis read:
    more than half of them; the series its rules read have the rings of their reach's tier (at
    least two minutes) or, read over the whole retention, the rings' size; so have the names a
    diagnosis reads over all the session holds; any other, two minutes."""
    rules = load_rules()
    options = DiagnoseOptions()
    session = watching_session(rules, options, servers=1)
    every = Store(capacity=session.store.capacity)
    text = fixture("underload")
    for t in range(30):
        shot = frame_from_text(float(t), text)
        session.ingest(shot)
        every.ingest(shot)
    reach = watching_reaches(rules, options).by_name
    store = session.store
    tracks = [store.rings.track(s) for name in store.names() for s in store.select(name)]
    assert store.series_count() == every.series_count() == len(tracks) == 420
    read = [t for t in tracks if t is not None and t.name in reach]
    assert all(
        (t.tier is None) == (reach[t.name] >= watching_retention_s(rules, options))
        and (t.tier is None or t.tier.reach_s == reach[t.name] >= READ_WHEN_ASKED_S)
        for t in read
    )
    assert {t.tier.reach_s for t in read if t.tier} == {120.0, 300.0}
    assert all(t.tier is None for t in tracks if t and t.name in WINDOW_NAMES)
    others = [t for t in tracks if t and t.name not in reach and not starts_short(t.name)]
    assert others and all(t.tier and t.tier.reach_s == READ_WHEN_ASKED_S for t in others)
    short = [t for t in tracks if t and t.tier is not None and t.tier.reach_s is None]
    assert len(short) > 420 / 2, len(short)
    assert all(
        t.name.endswith(("_bucket", "_created")) or not t.name.startswith("vllm:") for t in short
    )
    assert store.memory_bytes() == 8 * (
        store.size * (420 - len(short) + 1) + SHORT_TICKS * len(short)
    )
    assert every.memory_bytes() == 8 * store.size * 421


def test_rings_of_a_reach_grow_until_they_hold_it_and_a_reader_beyond_lengthens_them() -> None:
    """Read at most a minute back, the buckets' rings stop at 64 ticks and the counter's, two
    minutes, at 128, while the gauge's grow over the retention; reads within the reach answer
    as a store of long rings does; a read further back lengthens every ring of that name."""
    reach = {LAG: 60.0, DONE: 120.0}
    tiered = Store(capacity=400, retention_s=300.0, reaches=Reaches(reach, math.inf))
    long = Store(capacity=400, retention_s=300.0)
    for t in range(400):
        shot = frame(float(t), TYPES, {f'{LAG}{{le="1"}}': float(t), DONE: float(t), FREE: 1.0})
        tiered.ingest(shot)
        long.ingest(shot)
    [lag], [done], [free] = tiered.select(LAG), tiered.select(DONE), tiered.select(FREE)
    sizes = [tiered.rings.track(s).size for s in (lag, done, free)]  # type: ignore[union-attr]
    assert sizes == [64, 128, 320]
    assert tiered.memory_bytes() == 8 * (320 * 2 + 64 + 128)
    assert long.memory_bytes() == 8 * 320 * 4
    for series, within in ((lag, 60.0), (done, 120.0), (free, 300.0)):
        for window in (5.0, within / 2, within):
            assert _reads(tiered, series, 399.0, window) == _reads(long, series, 399.0, window)
    assert tiered.memory_bytes() == 8 * (320 * 2 + 64 + 128)
    held = tiered.points(lag, 399.0, 120.0)
    assert held == [(float(t), float(t)) for t in range(336, 400)]
    assert tiered.rings.track(lag).size == 320  # type: ignore[union-attr]


def test_what_a_what_if_and_a_verify_read_when_asked_is_held_long_from_the_first_tick() -> None:
    """A what-if calibrates on up to two minutes of the session's store and a verify measures
    its window, both only when asked: every series they read was held long all along (none
    is lengthened when they first read it, which would have cost it all but 16 ticks), even
    when the session's rules read none of them (a user's own rule set)."""
    session = watching_session([], DiagnoseOptions(), servers=1)
    text = fixture("underload")
    for t in range(130):
        session.ingest(frame_from_text(float(t), text))
    store, [target] = session.store, list(session.targets)
    shorts = sorted(str(s) for n in store.names() for s in store.select(n) if _short(store, s))
    _read_when_asked(store, target, 129.0)
    after = sorted(str(s) for n in store.names() for s in store.select(n) if _short(store, s))
    assert shorts and after == shorts


def test_what_the_views_a_diagnosis_and_a_what_if_read_lengthens_no_ring() -> None:
    """With the shipped rules, once the rings of every reach have dropped their first ticks,
    the dashboard's figures of the server, the fleet table, a diagnosis over all the session
    holds, a what-if's calibration and a verify read nothing a ring dropped: no ring is
    lengthened (its first read would have lost what it dropped)."""
    from vtop.core.session.diagnose import diagnosis
    from vtop.core.session.facts import target_detail, target_facts
    from vtop.core.session.fleet import fleet_rows

    options = DiagnoseOptions()
    session = watching_session(load_rules(), options, servers=1)
    text = fixture("underload")
    ticks = 340
    for t in range(ticks):
        session.ingest(frame_from_text(float(t), text))
    store, [target] = session.store, list(session.targets)
    tracks = [store.rings.track(s) for n in store.names() for s in store.select(n)]
    sizes = {t.tier.reach_s: t.size for t in tracks if t is not None and t.tier is not None}
    assert sizes.keys() == {None, 120.0, 300.0} and max(sizes.values()) < ticks, sizes
    now, tiers = ticks - 1.0, [(t, t.tier) for t in tracks if t]
    target_detail(session, target_facts(session, session.target(target), now), now, 15.0)
    fleet_rows(session, now)
    diagnosis(session, target)
    _read_when_asked(store, target, now)
    lengthened = sorted({t.name for t, tier in tiers if t.tier is not tier})
    assert not lengthened


def _read_when_asked(store: Store, target: str, now: float) -> None:
    """What a what-if (over two minutes) and a verify read."""
    from vtop.core.manage.verdict import measure as verify_measure
    from vtop.core.whatif.calibrate import CannotModelError, measure, refusal, step_points

    measure(store, target, now, READ_WHEN_ASKED_S)
    refusal(store, target, now, READ_WHEN_ASKED_S)
    verify_measure(store, target, now, 15.0)
    with contextlib.suppress(CannotModelError):  # no steps in an unchanging capture
        step_points(store, target, now, READ_WHEN_ASKED_S, engines=1, kv_tokens=1000.0)


def _short(store: Store, series: Series) -> bool:
    track = store.rings.track(series)
    return track is not None and track.tier is not None
