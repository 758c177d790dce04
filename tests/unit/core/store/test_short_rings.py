"""Short rings: a watching store holds the series its rules read over its retention, the
others' last SHORT_TICKS ticks until a reader reaches back as far, which lengthens every ring
of that name. A reader that reads from the first tick on loses nothing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.frames import down_frame, frame, frame_from_text
from tests.support.payloads import fixture
from tests.support.store_feeding import COUNTER, GAUGE
from vtop.core.frame import Series
from vtop.core.rules.loader import load_rules
from vtop.core.rules.promql.samples import instant, range_samples
from vtop.core.session.diagnose import DiagnoseOptions
from vtop.core.session.session import watching_session
from vtop.core.store.rings import SHORT_TICKS
from vtop.core.store.store import Store

WAITING = "vllm:num_requests_waiting"
STEPS = st.lists(
    st.sampled_from(["tick", "tick", "tick", "gap", "new", "down", "reset"]),
    min_size=1,
    max_size=120,
)


def _shot(step: int, kind: str, names: list[str], counted: float) -> object:
    values = {name: float(step * (i + 1)) for i, name in enumerate(names)}
    values['vllm:num_preemptions_total{engine="0"}'] = counted
    if kind == "gap":
        values.pop(names[0])
    return (
        down_frame(float(step))
        if kind == "down"
        else frame(float(step), {**GAUGE, **COUNTER}, values)
    )


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
    names, counted = [WAITING], 0.0
    for step, kind in enumerate(steps):
        if kind == "new":
            names.append(f"vllm:num_requests_running_{step}")
        counted = 1.0 if kind == "reset" else counted + step
        shot = _shot(step, kind, names, counted)
        short.ingest(shot)  # type: ignore[arg-type]
        long.ingest(shot)  # type: ignore[arg-type]
        for name in [*names, "vllm:num_preemptions_total"]:
            for series in long.select(name):
                assert _reads(short, series, float(step)) == _reads(long, series, float(step))


def test_a_series_no_reader_reached_holds_its_last_ticks_until_one_does() -> None:
    """Nobody read the waiting queue for 100 ticks: its ring held the last SHORT_TICKS; the
    first read over a minute lengthens it (what it dropped stays absent, never an old lap's
    value), and from then on it holds every tick like the rule-read series beside it."""
    store = Store(capacity=400, long_names={"vllm:num_preemptions_total"})
    types = {**GAUGE, **COUNTER}
    for t in range(100):
        values = {WAITING: float(t), 'vllm:num_preemptions_total{engine="0"}': float(t)}
        store.ingest(frame(float(t), types, values))
    [waiting] = store.select(WAITING)
    [preempted] = store.select("vllm:num_preemptions_total")
    # 128 ticks of room (64, grown by 64) for the long ring and the times, 16 for the short
    assert store.memory_bytes() == 8 * (128 * 2 + SHORT_TICKS)
    assert store.last_known(waiting) == (99.0, 99.0)
    assert len(store.points(preempted, 99.0, 60.0)) == 60
    held = store.points(waiting, 99.0, 60.0)
    assert held == [(float(t), float(t)) for t in range(100 - SHORT_TICKS, 100)]
    assert store.memory_bytes() == 8 * 128 * 3
    for t in range(100, 200):
        store.ingest(frame(float(t), GAUGE, {WAITING: float(t)}))
    assert store.points(waiting, 199.0, 60.0) == [(float(t), float(t)) for t in range(140, 200)]


def test_a_later_series_of_a_lengthened_name_is_long_from_its_first_tick() -> None:
    store = Store(capacity=400, long_names=())
    for t in range(20):
        store.ingest(frame(float(t), GAUGE, {WAITING: 1.0}))
    [first] = store.select(WAITING)
    assert len(store.points(first, 19.0, 60.0)) == SHORT_TICKS  # lengthened from here on
    for t in range(20, 60):
        store.ingest(frame(float(t), GAUGE, {WAITING: 1.0, f'{WAITING}{{engine="1"}}': 2.0}))
    [second] = [s for s in store.select(WAITING) if s != first]
    assert len(store.points(second, 59.0, 60.0)) == 40
    assert len(store.points(first, 59.0, 60.0)) == 40 + SHORT_TICKS


def test_a_watching_session_holds_the_rule_series_long_and_the_rest_short() -> None:
    """Of the real capture's 420 series, a watching session keeps long rings only for what its
    rules and views read (159 of them): the others hold SHORT_TICKS ticks."""
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
    assert store.memory_bytes() == 8 * (
        store.size * (len(long) + 1) + SHORT_TICKS * (420 - len(long))
    )
    assert every.memory_bytes() == 8 * store.size * 421
