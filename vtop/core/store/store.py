"""The series store: the rings (rings.py), their one writer (ingest.py), and the window and
aggregation queries the rules and views ask, composed; queries take `now`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from vtop.core.frame import Labels, Series
from vtop.core.histogram import Buckets, merge_buckets, optional_float, quantile
from vtop.core.histogram import mean as histogram_mean
from vtop.core.store.ingest import RingWriter
from vtop.core.store.probe_series import ProbeCounters
from vtop.core.store.rings import (
    DEFAULT_CAPACITY,
    DEFAULT_MAX_SERIES,
    DEFAULT_STALE_AFTER_S,
    FIRST_SIZE,
    INSTANCE,
    PROCESS_START,
    Matchers,
    Measure,
    Reaches,
    Rings,
    SeriesFreshness,
    Track,
    group_labels,
    is_cumulative,
)

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_MAX_SERIES",
    "DEFAULT_STALE_AFTER_S",
    "INSTANCE",
    "PROCESS_START",
    "SeriesFreshness",
    "Store",
    "is_cumulative",
]


class Store:
    """Time series for all targets of one vtop session: the rings, their writer, and the
    window queries. The rings' reads of one tick and the writer's record of each target are
    the store's own read API (bound once here: the evaluator calls them in its inner loops)."""

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        max_series: int = DEFAULT_MAX_SERIES,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        column_writes: bool = True,
        first_size: int = FIRST_SIZE,
        retention_s: float | None = None,
        reaches: Reaches | None = None,
    ) -> None:
        self.rings = rings = Rings(capacity, stale_after_s, first_size, retention_s, reaches)
        self.writer = writer = RingWriter(rings, max_series, column_writes)
        self.ingest = writer.ingest
        self.in_last_answer = writer.in_last_answer
        self.target_last_ok = writer.target_last_ok
        self.alternating = writer.alternating
        self.defects = writer.defects
        self.select = rings.select
        self.names = rings.names
        self.latest = rings.latest
        self.last_known = rings.last_known
        self.freshness = rings.freshness
        self.value = rings.value
        self.corrected = rings.corrected
        self.slots = rings.slots
        self.times = rings.times
        self.time_of = rings.time_of
        self.tick_at_or_before = rings.tick_at_or_before
        self.held_since = rings.held_since
        self.series_count = rings.series_count
        self.memory_bytes = rings.memory_bytes
        self.bound_bytes = rings.bound_bytes

    @property
    def tick(self) -> int:
        """The newest tick (-1 before the first frame)."""
        return self.rings.tick

    @property
    def oldest_tick(self) -> int:
        """The oldest tick still held."""
        return self.rings.oldest_tick

    @property
    def size(self) -> int:
        """The ticks the time ring (and every ring but a short one) has room for now."""
        return self.rings.size

    @property
    def capacity(self) -> int:
        """The most ticks held: the bound."""
        return self.rings.capacity

    @property
    def retention_s(self) -> float | None:
        """The seconds of ticks every reader needs (None: the rings grow to the capacity)."""
        return self.rings.retention_s

    @property
    def series_generation(self) -> int:
        """Counts the series added (a selection made at the same count still holds)."""
        return self.rings.series_generation

    @property
    def probes(self) -> ProbeCounters:
        """The front-door canaries seen so far."""
        return self.writer.probes

    @property
    def dropped_series(self) -> int:
        """Series not given a ring (the series limits)."""
        return self.writer.dropped_series

    @property
    def columns_written(self) -> int:
        """Scrapes written as columns (shaped like the target's previous one)."""
        return self.writer.columns_written

    def points(self, series: Series, now: float, window: float) -> list[tuple[float, float]]:
        """(time, value) of present samples with time in (now - window, now]."""
        end = self.tick_at_or_before(now)
        if end is None:
            return []
        track = self.rings.track(series)
        if track is None:
            return []
        first = self.tick_at_or_before(now - window)
        start = self.rings.held_from(track, self.rings.oldest_tick if first is None else first + 1)
        stop = min(end, track.last_tick)
        if stop < start:
            return []
        low, high = start % track.size, stop % track.size
        values = (
            track.values[low : high + 1]
            if low <= high
            else track.values[low:] + track.values[: high + 1]
        )
        return [
            (when, value)
            for when, value in zip(self.times(start, stop), values, strict=True)
            if value == value
        ]

    def _endpoints(
        self, series: Series, now: float, window: float
    ) -> tuple[tuple[float, float], tuple[float, float]] | None:
        """First and last present samples of the window, the base being at or before its start."""
        end = self.tick_at_or_before(now)
        track = self.rings.track(series)
        if end is None or track is None:
            return None
        base = self.tick_at_or_before(now - window)
        wanted = self.rings.oldest_tick if base is None else base
        start = self.rings.held_from(track, wanted)
        if start == wanted < end <= track.last_tick:
            values, size = track.values, track.size
            early, late = values[start % size], values[end % size]
            if early == early and late == late and not track.reset_ticks:
                # the usual case: a value at both ends and no reset to correct for
                return (self.time_of(start), early), (self.time_of(end), late)
        first = self._present(track, start, end, 1)
        last = self._present(track, end, first if first is not None else end, -1)
        if first is None or last is None or last <= first:
            return None
        return (
            (self.time_of(first), self.rings.corrected_at(track, first)),
            (self.time_of(last), self.rings.corrected_at(track, last)),
        )

    def _present(self, track: Track, start: int, stop: int, step: int) -> int | None:
        """First tick from `start` towards `stop` (inclusive) where the ring has a value."""
        low, high = self.rings.held_from(track, min(start, stop)), track.last_tick
        values, size = track.values, track.size
        for tick in range(start, stop + step, step):
            if low <= tick <= high and not math.isnan(values[tick % size]):
                return tick
        return None

    def increase(self, series: Series, now: float, window: float) -> float | None:
        """Growth over the window, counter resets corrected; None with fewer than 2 samples.

        The base is the newest sample at or before `now - window`, so a window shorter than the
        scrape interval still measures the last interval.
        """
        ends = self._endpoints(series, now, window)
        if ends is None:
            return None
        return ends[1][1] - ends[0][1]

    def rate(self, series: Series, now: float, window: float) -> float | None:
        """Per-second increase between the window's first and last samples."""
        ends = self._endpoints(series, now, window)
        if ends is None:
            return None
        (t0, v0), (t1, v1) = ends
        return (v1 - v0) / (t1 - t0)

    def over_time(
        self, series: Series, now: float, window: float, reduce: Callable[[list[float]], float]
    ) -> float | None:
        """Reduce the window's values (avg/min/max...), None when the window is empty."""
        values = [value for _, value in self.points(series, now, window)]
        return reduce(values) if values else None

    def avg_over_time(self, series: Series, now: float, window: float) -> float | None:
        """Mean of the window's samples."""
        return self.over_time(series, now, window, lambda v: math.fsum(v) / len(v))

    def min_over_time(self, series: Series, now: float, window: float) -> float | None:
        """Smallest sample in the window."""
        return self.over_time(series, now, window, min)

    def max_over_time(self, series: Series, now: float, window: float) -> float | None:
        """Largest sample in the window."""
        return self.over_time(series, now, window, max)

    # aggregation and histograms ---------------------------------------------

    def sum_by(
        self,
        measure: Measure,
        name: str,
        now: float,
        window: float,
        matchers: Matchers | None = None,
        by: Iterable[str] = (),
    ) -> dict[Labels, float]:
        """Sum a windowed measure (rate, increase, ...) of `name` per group of `by` labels."""
        keep = frozenset(by)
        totals: dict[Labels, float] = {}
        for series in self.select(name, matchers):
            measured = measure(series, now, window)
            if measured is not None:
                group = group_labels(series, keep)
                totals[group] = totals.get(group, 0.0) + measured
        return totals

    def latest_by(
        self, name: str, now: float, matchers: Matchers | None = None, by: Iterable[str] = ()
    ) -> dict[Labels, float]:
        """Sum of current values per group (e.g. by engine, or all engines with by=())."""
        return self.sum_by(lambda s, t, _w: self.latest(s, t), name, now, 0.0, matchers, by)

    def histogram_buckets(
        self,
        name: str,
        now: float,
        window: float,
        matchers: Matchers | None = None,
        by: Iterable[str] = (),
    ) -> dict[Labels, Buckets]:
        """Bucket increases over the window, summed per group of the `by` labels."""
        keep = frozenset(by)
        grouped: dict[Labels, list[Buckets]] = {}
        for series in self.select(name + "_bucket", matchers):
            upper = optional_float(series.label("le"))
            grown = self.increase(series, now, window)
            if upper is not None and grown is not None:
                grouped.setdefault(group_labels(series, keep), []).append([(upper, grown)])
        return {group: merge_buckets(parts) for group, parts in grouped.items()}

    def histogram_quantile(
        self,
        q: float,
        name: str,
        now: float,
        window: float,
        matchers: Matchers | None = None,
        by: Iterable[str] = (),
    ) -> dict[Labels, float | None]:
        """The q-quantile of observations made during the window, per group."""
        groups = self.histogram_buckets(name, now, window, matchers, by)
        return {group: quantile(q, buckets) for group, buckets in groups.items()}

    def histogram_mean(
        self,
        name: str,
        now: float,
        window: float,
        matchers: Matchers | None = None,
        by: Iterable[str] = (),
    ) -> dict[Labels, float | None]:
        """Mean observation during the window (increase of _sum / increase of _count), per group."""
        sums = self.sum_by(self.increase, name + "_sum", now, window, matchers, by)
        counts = self.sum_by(self.increase, name + "_count", now, window, matchers, by)
        return {group: histogram_mean(sums.get(group), count) for group, count in counts.items()}
