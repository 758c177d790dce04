"""The samples a selector sees, as Prometheus 3 sees them: an instant selector takes the newest
sample within the 5-minute lookback (left-open: a sample exactly 5 minutes old is not seen)
unless a staleness marker came after it; a range selector takes every sample in
(t - range, t], the start excluded. NaN samples are values; stale slots and gaps are not
samples.

One deliberate difference: a range reaching back to or before the store's first tick starts at
that tick and includes it (vtop cannot know what it did not see; Prometheus would divide by the
whole range).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from vtop.core.frame import Series
from vtop.core.store.presence import is_gap, is_value_nan
from vtop.core.store.store import Store

LOOKBACK_S = 300.0
NAN = float("nan")


def edge(time: float) -> float:
    """A range's or the lookback's start, to the microsecond: times in Prometheus are whole
    milliseconds, and the rounding error of a subtraction (4 - 1.001 is 2.9989999999999997)
    must not move a sample across the edge."""
    return round(time, 6)


def instant(
    store: Store, series: Series, when: float, lookback: float = LOOKBACK_S
) -> float | None:
    """The series' value at `when`: its newest sample younger than the lookback, unless the
    series went stale after it."""
    tick = store.tick_at_or_before(when)
    oldest, too_old = store.oldest_tick, edge(when - lookback)
    while tick is not None and tick >= oldest:
        if store.time_of(tick) <= too_old:
            return None
        slot = store.value(series, tick)
        if slot == slot:
            return slot
        if is_value_nan(slot):
            return NAN
        if not is_gap(slot):
            return None
        tick -= 1
    return None


def range_start(store: Store, start: float) -> tuple[float, bool]:
    """The range's start, or the store's first tick when the range reaches back to it or
    further; and whether a sample at the start is inside (only at that first tick)."""
    held_since = store.held_since()
    if held_since is None or start > held_since:
        return start, False
    return held_since, True


class RangeSamples(NamedTuple):
    """A series' samples in a range: what every function of a range needs (no list of times)."""

    first_time: float
    last_time: float
    values: Sequence[float]
    grows: bool = False
    """The values never go down (a counter with no reset in the range, known from the store):
    rate and increase need not look for a reset."""


NO_SAMPLES = RangeSamples(NAN, NAN, ())


def range_samples(
    store: Store, series: Series, start: float, end: float, *, from_start: bool = False
) -> RangeSamples:
    """The series' samples with start < time <= end, or start <= time <= end `from_start`
    (NaN times and no values when it has none)."""
    last = store.tick_at_or_before(end)
    if last is None:
        return NO_SAMPLES
    before = store.tick_at_or_before(start)
    if before is None:
        first = store.oldest_tick
    else:
        first = before if from_start and store.time_of(before) == start else before + 1
    origin, slots, grows = store.slots(series, first, last)
    if not slots:
        return NO_SAMPLES
    total = sum(slots)
    if total == total:  # no NaN among the slots (it would make the sum NaN): every one a sample
        final = origin + len(slots) - 1
        return RangeSamples(store.time_of(origin), store.time_of(final), slots, grows)
    ticks: list[int] = []
    values: list[float] = []
    for offset, slot in enumerate(slots):
        if slot == slot:
            ticks.append(origin + offset)
            values.append(slot)
        elif is_value_nan(slot):
            ticks.append(origin + offset)
            values.append(NAN)
    if not ticks:
        return NO_SAMPLES
    return RangeSamples(store.time_of(ticks[0]), store.time_of(ticks[-1]), values)
