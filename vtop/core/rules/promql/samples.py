"""The samples a selector sees, as Prometheus 2.x sees them: an instant selector takes the newest
sample within the 5-minute lookback unless a staleness marker came after it; a range selector
takes every sample in [t - range, t], both ends included. NaN samples are values; stale slots
and gaps are not samples.

One deliberate difference: a range reaching back before the store's first tick starts at that
tick (vtop cannot know what it did not see; Prometheus would divide by the whole range).
"""

from __future__ import annotations

from vtop.core.frame import Series
from vtop.core.store.presence import is_gap, is_value_nan
from vtop.core.store.store import Store

LOOKBACK_S = 300.0
NAN = float("nan")


def instant(
    store: Store, series: Series, when: float, lookback: float = LOOKBACK_S
) -> float | None:
    """The series' value at `when`: its newest sample no older than the lookback, unless the
    series went stale after it."""
    tick = store.tick_at_or_before(when)
    oldest = store.oldest_tick
    while tick is not None and tick >= oldest:
        if store.time_of(tick) < when - lookback:
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


def range_start(store: Store, start: float) -> float:
    """The range's start, or the store's first tick when the range reaches further back."""
    if store.tick < 0:
        return start
    return max(start, store.time_of(store.oldest_tick))


def range_samples(
    store: Store, series: Series, start: float, end: float
) -> tuple[list[float], list[float]]:
    """Times and values of the series' samples with start <= time <= end."""
    last = store.tick_at_or_before(end)
    if last is None:
        return [], []
    before = store.tick_at_or_before(start)
    if before is None:
        first = store.oldest_tick
    else:
        first = before if store.time_of(before) == start else before + 1
    origin, slots = store.slots(series, first, last)
    total = sum(slots)
    if total == total:  # no NaN among the slots (it would make the sum NaN): every one a sample
        return store.times(origin, origin + len(slots) - 1), list(slots)
    times: list[float] = []
    values: list[float] = []
    for offset, slot in enumerate(slots):
        if slot == slot:
            times.append(store.time_of(origin + offset))
            values.append(slot)
        elif is_value_nan(slot):
            times.append(store.time_of(origin + offset))
            values.append(NAN)
    return times, values
