"""Bounded ring buffers of every series, with counter-reset handling and windowed queries.

All series share one ring of tick times; each series keeps one float64 per tick (NaN = absent),
so memory is 8 bytes x capacity x series, whatever the uptime. Counters, histogram buckets and
summary sums/counts keep a short list of reset offsets, so `increase` is one subtraction.
Queries take `now`; the store never reads a clock.
"""

from __future__ import annotations

import enum
import math
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter, lt

from vtop.core.catalog import Normalizer, sample_type
from vtop.core.frame import Event, EventKind, Frame, Labels, SampleColumns, Series, TargetScrape
from vtop.core.histogram import Buckets, merge_buckets, optional_float, quantile
from vtop.core.histogram import mean as histogram_mean
from vtop.core.ingest.exposition import family_of, picker
from vtop.core.ingest.sources.nvml import gpu_scrape

NAN = math.nan
INSTANCE = "instance"
PROCESS_START = "process_start_time_seconds"
PID = "pid"
"""Per-process gauge copies (vLLM 0.11.x with --api-server-count > 1) carry this label; vLLM
later exposes one value ("mostrecent"), so vtop folds them into one series, keeping the largest
(the API servers that receive no engine stats report 0)."""
DEFAULT_CAPACITY = 3600
DEFAULT_MAX_SERIES = 50_000
OTHER_MAX_SERIES = 2_000
"""Series that are not vLLM's (nor vtop's GPU or restart series) share this smaller cap: a
payload's junk, however much of it comes first, never costs a vLLM series its ring."""
KEPT_PREFIXES = ("vllm:", "nvml:")
STARTS_KEPT = 16
KNOWN_PER_SAMPLE = 4
"""A target's resolved-series cache is dropped once it holds this many entries per sample of
the current scrape (a payload whose series change every scrape would otherwise fill it)."""
AT_MOST_ONE = frozenset({"vllm:kv_cache_usage_perc"})
"""Ratios that cannot exceed 1 (a little above, from float rounding, is tolerated)."""
DEFAULT_STALE_AFTER_S = 30.0
MAX_TICK_LOOKUPS = 4096

Matchers = Mapping[str, str]
Measure = Callable[[Series, float, float], float | None]


def _possible(name: str, value: float) -> bool:
    """Whether a vLLM series can have this value."""
    if not 0 <= value < math.inf:
        return False
    return value <= 1.000001 if name in AT_MOST_ONE else True


DEFECTS_KEPT = 5


def _note(state: _TargetState, kind: str, known: _Known) -> None:
    """Remember a defect of this scrape (the first few series of each kind)."""
    found = state.defects.setdefault(kind, [])
    if len(found) < DEFECTS_KEPT:
        found.append(known.raw)


def _group(series: Series, keep: frozenset[str]) -> Labels:
    """The series' labels restricted to `keep` (a `by` grouping)."""
    return tuple(pair for pair in series.labels if pair[0] in keep)


class SeriesState(enum.Enum):
    """Whether a series has a current value; absent and stale are not zero."""

    FRESH = "fresh"
    STALE = "stale"
    ABSENT = "absent"


def is_cumulative(sample_name: str, metric_type: str) -> bool:
    """True for samples that only grow between restarts (counters, histogram/summary totals)."""
    if metric_type == "counter":
        return not sample_name.endswith("_created")
    if metric_type == "histogram":
        return sample_name.endswith(("_bucket", "_count", "_sum"))
    if metric_type == "summary":
        return sample_name.endswith(("_count", "_sum"))
    return False


class _Track:
    """Ring of values of one series."""

    __slots__ = (
        "cumulative",
        "first_tick",
        "last_raw",
        "last_tick",
        "reset_offsets",
        "reset_ticks",
        "values",
    )

    def __init__(self, capacity: int, cumulative: bool, tick: int) -> None:
        self.values = array("d", [NAN]) * capacity
        self.cumulative = cumulative
        self.first_tick = tick
        self.last_tick = tick - 1
        self.last_raw = NAN
        self.reset_ticks: list[int] = []
        self.reset_offsets: list[float] = []
        """Cumulative offset in force from each reset tick on."""

    def offset_at(self, tick: int) -> float:
        """Sum of the pre-reset values of all resets at or before `tick`."""
        position = bisect_right(self.reset_ticks, tick)
        return self.reset_offsets[position - 1] if position else 0.0

    def record_reset(self, tick: int, previous: float, oldest_tick: int) -> None:
        """Remember a reset after a last value of `previous`; forget resets out of the ring.

        The newest reset before the ring's oldest tick is kept: the ring starts with its offset.
        """
        total = (self.reset_offsets[-1] if self.reset_offsets else 0.0) + previous
        self.reset_ticks.append(tick)
        self.reset_offsets.append(total)
        expired = bisect_right(self.reset_ticks, oldest_tick) - 1
        if expired > 0:
            del self.reset_ticks[:expired]
            del self.reset_offsets[:expired]


class _Known:
    """A target's raw series resolved to its stored identity and ring."""

    __slots__ = ("alias", "cumulative", "fold", "raw", "series", "track", "vllm")

    def __init__(
        self, raw: Series, series: Series, alias: bool, cumulative: bool, fold: bool = False
    ) -> None:
        self.raw = raw
        self.series = series
        self.alias = alias
        self.cumulative = cumulative
        self.fold = fold
        """One of several per-process copies of a gauge (a `pid` label): the largest is kept."""
        self.vllm = series.name.startswith("vllm:")
        """vLLM's values are counts, tokens, seconds and ratios: never negative or infinite."""
        self.track: _Track | None = None


class _Columns:
    """A target's last scrape as columns: its raw series in order and the rings they fill.

    When the next scrape has the same series in the same order (the usual case: only values
    move), it is written column by column without resolving a series or checking a reset one
    sample at a time. The counters' last raw values are kept here, not in each ring, until
    the sample path takes over again (`settle`).
    """

    __slots__ = (
        "cumulative",
        "last_grown",
        "pick_checked",
        "pick_cumulative",
        "pick_ratios",
        "raw",
        "start_index",
        "tick",
        "tracks",
    )

    def __init__(self, raw: Sequence[Series], tracks: list[_Track], tick: int) -> None:
        self.raw = raw
        self.tracks = tracks
        self.tick = tick
        indices = [i for i, track in enumerate(tracks) if track.cumulative]
        self.cumulative = [tracks[i] for i in indices]
        self.pick_cumulative = picker(indices)
        checked = [i for i, series in enumerate(raw) if series.name.startswith("vllm:")]
        self.pick_checked = picker(checked) if checked else None
        ratios = [i for i, series in enumerate(raw) if series.name in AT_MOST_ONE]
        self.pick_ratios = picker(ratios) if ratios else None
        self.last_grown = tuple(track.last_raw for track in self.cumulative)
        self.start_index = next(
            (i for i, series in enumerate(raw) if series.name == PROCESS_START), None
        )

    def write(self, values: list[float], tick: int, row: int) -> bool:
        """Write one scrape's values at `tick`; False (nothing written) if a counter went down
        or a vLLM value is impossible (the sample path then judges each one)."""
        if self.pick_checked is not None:
            checked: tuple[float, ...] = self.pick_checked(values)
            total = sum(checked)
            if not (total == total and total < math.inf and min(checked) >= 0):
                return False
        if self.pick_ratios is not None and max(self.pick_ratios(values)) > 1.000001:
            return False
        if self.cumulative:
            grown = self.pick_cumulative(values)
            if any(map(lt, grown, self.last_grown)):
                return False
            self.last_grown = grown
        for track, value in zip(self.tracks, values, strict=True):
            track.values[row] = value
            track.last_tick = tick
        self.tick = tick
        return True

    def settle(self) -> None:
        """Give the rings their counters' last raw values back (the sample path reads them)."""
        for track, value in zip(self.cumulative, self.last_grown, strict=True):
            track.last_raw = value


@dataclass
class _TargetState:
    """Per-target caches and restart detection.

    `known` is keyed by the id of the parser's Series objects, which the parser reuses across
    ticks: an int lookup instead of hashing nested label tuples. The entry keeps its Series
    alive, so the id cannot be reused while the entry exists.
    """

    known: dict[int, _Known]
    last_ok_tick: int = -1
    process_start: float | None = None
    columns: _Columns | None = None
    starts: list[float] = field(default_factory=list)
    """Process start times seen, newest last (at most STARTS_KEPT): one coming back means the
    URL alternates between processes (a load balancer), not that vLLM restarted."""
    defects: dict[str, list[Series]] = field(default_factory=dict)
    """Defects of this scrape by kind (impossible value, duplicate, counter going back): the
    first few raw series of each."""
    alternating_tick: int = -1
    """The last tick at which a process start time seen before came back."""


class Store:
    """Time series for all targets of one vtop session."""

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        max_series: int = DEFAULT_MAX_SERIES,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        column_writes: bool = True,
    ) -> None:
        self.capacity = capacity
        self.column_writes = column_writes
        """False: every sample takes the one-by-one path (the reference columns are tested on)."""
        self.max_series = max_series
        self.stale_after_s = stale_after_s
        self.tick = -1
        self.dropped_series = 0
        self._other_series = 0
        self.columns_written = 0
        """Scrapes written as columns (shaped like the target's previous one)."""
        self._times = array("d", [NAN]) * capacity
        self._tracks: dict[Series, _Track] = {}
        self._by_name: dict[str, list[Series]] = {}
        self._by_instance: dict[tuple[str, str | None], list[Series]] = {}
        """Series by (name, instance): a fleet's per-server queries touch only their own."""
        self._targets: dict[str, _TargetState] = {}
        self._normalizer = Normalizer()
        self._tick_lookups: dict[float, int | None] = {}
        self._oldest = 0

    # ingest -----------------------------------------------------------------

    def ingest(self, frame: Frame) -> list[Event]:
        """Add one frame as a new tick; return events it revealed (resets, limits)."""
        if self.tick >= 0 and frame.timestamp <= self._times[self.tick % self.capacity]:
            raise ValueError(f"frame at {frame.timestamp} is not after the previous tick")
        self.tick += 1
        self._times[self.tick % self.capacity] = frame.timestamp
        self._tick_lookups.clear()
        self._oldest = max(0, self.tick - self.capacity + 1)
        events: list[Event] = []
        scrapes = frame.scrapes if frame.gpu is None else (*frame.scrapes, gpu_scrape(frame.gpu))
        for scrape in scrapes:
            if scrape.ok:
                events.extend(self._ingest_scrape(scrape, frame.timestamp))
        return events

    def _ingest_scrape(self, scrape: TargetScrape, timestamp: float) -> list[Event]:
        """Write one target's samples at the current tick."""
        state = self._targets.setdefault(scrape.target, _TargetState(known={}))
        state.last_ok_tick = self.tick
        if self._ingest_columns(state, scrape):
            self.columns_written += 1
            return []
        if state.columns is not None:
            state.columns.settle()
        restarted = self._restarted(state, scrape)
        state.defects = {}
        resets, dropped_before = 0, self.dropped_series
        aliases: list[tuple[_Known, float]] = []
        for sample in scrape.samples:
            known = state.known.get(id(sample.series))
            if known is None or known.raw is not sample.series:
                known = self._resolve(state, scrape, sample.series)
            if known.alias or known.fold:
                aliases.append((known, sample.value))
            else:
                resets += self._write(known, sample.value, restarted, state)
        for known, value in aliases:
            track = known.track or self._tracks.get(known.series)
            if track is None or track.last_tick != self.tick:
                resets += self._write(known, value, restarted, state)
            elif known.fold:
                row = self.tick % self.capacity
                track.values[row] = max(track.values[row], value)
        state.columns = self._columns(state, scrape) if not aliases and self.column_writes else None
        return self._events(scrape.target, timestamp, restarted, resets, dropped_before)

    def _ingest_columns(self, state: _TargetState, scrape: TargetScrape) -> bool:
        """Write a scrape shaped like the target's last one at once; False when it is not
        (new or missing series, a gap, a restart or a counter reset: the sample path)."""
        columns = state.columns
        if columns is None or columns.tick != self.tick - 1:
            return False
        samples = scrape.samples
        if isinstance(samples, SampleColumns):
            if samples.series is not columns.raw and samples.series != columns.raw:
                return False
            columns.raw, values = samples.series, samples.values
        elif tuple(map(itemgetter(0), samples)) == columns.raw:
            values = list(map(itemgetter(1), samples))
        else:
            return False
        if columns.start_index is not None and values[columns.start_index] != state.process_start:
            return False
        return columns.write(values, self.tick, self.tick % self.capacity)

    def _columns(self, state: _TargetState, scrape: TargetScrape) -> _Columns | None:
        """The columns of a scrape just written, when every sample has its own ring."""
        samples = scrape.samples
        raw = samples.series if isinstance(samples, SampleColumns) else tuple(s[0] for s in samples)
        knowns = [state.known.get(id(series)) for series in raw]
        tracks = [known.track for known in knowns if known is not None and known.track]
        if len(tracks) != len(raw) or len(set(map(id, tracks))) != len(tracks):
            return None
        return _Columns(raw, tracks, self.tick)

    def _restarted(self, state: _TargetState, scrape: TargetScrape) -> bool:
        """True when the target's process start time changed since its last scrape (and note
        a start time coming back: the URL alternates between processes)."""
        start = next((s.value for s in scrape.samples if s.series.name == PROCESS_START), None)
        previous, state.process_start = state.process_start, start
        changed = previous is not None and start is not None and start != previous
        if start is not None and (not state.starts or state.starts[-1] != start):
            if start in state.starts:
                state.alternating_tick = self.tick
            state.starts = [*state.starts[-STARTS_KEPT + 1 :], start]
        return changed

    def alternating(self, target: str, now: float, window: float) -> int:
        """How many processes answer the target's URL in turn, 0 when one does: a start time
        that came back within `window` of `now` (a load balancer in front of several)."""
        state = self._targets.get(target)
        if state is None or state.alternating_tick < self.oldest_tick:
            return 0
        if self.time_of(state.alternating_tick) < now - window:
            return 0
        return len(set(state.starts))

    def defects(self, target: str) -> dict[str, list[Series]]:
        """Defects of the target's last scrape by kind, with the first few raw series (see
        `_write`)."""
        state = self._targets.get(target)
        return dict(state.defects) if state is not None else {}

    def _resolve(self, state: _TargetState, scrape: TargetScrape, raw: Series) -> _Known:
        """Canonical name, instance label and cumulativeness of a new raw series."""
        canonical, alias = self._normalizer.normalize(raw)
        _, metric_type = family_of(raw.name, scrape.metric_types)
        if metric_type == "untyped":
            metric_type = sample_type(canonical.name)
        fold = metric_type == "gauge" and canonical.label(PID) is not None
        if fold:
            canonical = Series(canonical.name, canonical.without(frozenset({PID})))
        if canonical.label(INSTANCE) is None:
            canonical = canonical.with_label(INSTANCE, scrape.target)
        if len(state.known) >= min(
            2 * self.max_series, KNOWN_PER_SAMPLE * len(scrape.samples) + 1000
        ):
            state.known.clear()
        known = _Known(raw, canonical, alias, is_cumulative(raw.name, metric_type), fold)
        state.known[id(raw)] = known
        return known

    def _write(self, known: _Known, value: float, restarted: bool, state: _TargetState) -> int:
        """Store one value at the current tick; return 1 if it was a counter reset.

        A vLLM value no metric can have (NaN, infinite, negative, a usage ratio above 1) is
        stored as absent; a series written twice in one scrape keeps its first value; a counter
        that goes down while the process start time is known and unchanged is a defect of the
        endpoint, not a restart: its previous value is held. Each is noted in `state.defects`.
        """
        track = known.track
        if track is None:
            track = known.track = self._tracks.get(known.series) or self._new_track(known)
            if track is None:
                return 0
        if track.last_tick == self.tick:
            _note(state, "duplicate series", known)
            return 0
        if track.last_tick < self.tick - 1:
            self._fill_gap(track)
        if known.vllm and not _possible(known.series.name, value):
            _note(state, "impossible value", known)
            value = NAN
        reset = 0
        if track.cumulative and not math.isnan(value):
            previous = track.last_raw
            if not math.isnan(previous) and (value < previous or restarted):
                if not restarted and state.process_start is not None:
                    _note(state, "counter went backwards", known)
                    value = previous
                else:
                    track.record_reset(self.tick, previous, self.oldest_tick)
                    reset = 1
            track.last_raw = value
        track.values[self.tick % self.capacity] = value
        track.last_tick = self.tick
        return reset

    def _new_track(self, known: _Known) -> _Track | None:
        """Create a series ring, unless the series limit is reached."""
        other = (
            not known.series.name.startswith(KEPT_PREFIXES) and known.series.name != PROCESS_START
        )
        if len(self._tracks) >= self.max_series or (
            other and self._other_series >= min(OTHER_MAX_SERIES, self.max_series // 2)
        ):
            self.dropped_series += 1
            return None
        self._other_series += other
        track = _Track(self.capacity, known.cumulative, self.tick)
        self._tracks[known.series] = track
        self._by_name.setdefault(known.series.name, []).append(known.series)
        key = (known.series.name, known.series.label(INSTANCE))
        self._by_instance.setdefault(key, []).append(known.series)
        return track

    def _fill_gap(self, track: _Track) -> None:
        """Mark ticks between the series' last value and now as absent."""
        start = max(track.last_tick + 1, self.tick - self.capacity + 1)
        for tick in range(start, self.tick):
            track.values[tick % self.capacity] = NAN

    def _events(
        self, target: str, timestamp: float, restarted: bool, resets: int, dropped_before: int
    ) -> list[Event]:
        """Events for one target's ingest."""
        events: list[Event] = []
        if restarted:
            events.append(Event(timestamp, EventKind.RESTART, target, "process start time changed"))
        if resets:
            message = f"{resets} counters reset (vLLM restarted?)"
            events.append(Event(timestamp, EventKind.COUNTER_RESET, target, message))
        if self.dropped_series > dropped_before:
            message = (
                f"series limit reached ({self.max_series} in all, {OTHER_MAX_SERIES} not from "
                "vLLM); new series dropped"
            )
            events.append(Event(timestamp, EventKind.SERIES_LIMIT, target, message))
        return events

    # ticks ------------------------------------------------------------------

    @property
    def oldest_tick(self) -> int:
        """The oldest tick still in the ring."""
        return self._oldest

    def time_of(self, tick: int) -> float:
        """Timestamp of a tick in the ring."""
        return self._times[tick % self.capacity]

    def tick_at_or_before(self, when: float) -> int | None:
        """The newest tick at or before `when`, None when all ticks are later or gone.

        Remembered until the next tick: one evaluation asks for the same few times thousands
        of times.
        """
        if when in self._tick_lookups:
            return self._tick_lookups[when]
        found = None
        if self.tick >= 0:
            ticks = range(self.oldest_tick, self.tick + 1)
            position = bisect_right(ticks, when, key=self.time_of)
            found = None if position == 0 else ticks[position - 1]
        if len(self._tick_lookups) < MAX_TICK_LOOKUPS:
            self._tick_lookups[when] = found
        return found

    def value(self, series: Series, tick: int) -> float:
        """The stored value of a series at a tick (NaN when absent)."""
        track = self._tracks.get(series)
        return NAN if track is None else self._at(track, tick)

    def _at(self, track: _Track, tick: int) -> float:
        """A ring's value at a tick (NaN when absent or out of the ring)."""
        if not track.first_tick <= tick <= track.last_tick or tick < self._oldest:
            return NAN
        return track.values[tick % self.capacity]

    def corrected(self, series: Series, tick: int) -> float:
        """The value at a tick plus the counter resets before it (monotonic for counters)."""
        track = self._tracks.get(series)
        return NAN if track is None else self._corrected(track, tick)

    def _corrected(self, track: _Track, tick: int) -> float:
        """A ring's value at a tick plus its counter resets before it."""
        stored = self._at(track, tick)
        return stored + track.offset_at(tick) if track.reset_ticks else stored

    # selection --------------------------------------------------------------

    def names(self) -> list[str]:
        """Every metric name held."""
        return sorted(self._by_name)

    def select(self, name: str, matchers: Matchers | None = None) -> list[Series]:
        """Series of `name` whose labels equal every matcher."""
        if matchers and INSTANCE in matchers:
            found = self._by_instance.get((name, matchers[INSTANCE]), [])
        else:
            found = self._by_name.get(name, [])
        if not matchers:
            return list(found)
        wanted = [(k, v) for k, v in matchers.items() if k != INSTANCE]
        return [series for series in found if all(series.label(k) == v for k, v in wanted)]

    def series_count(self) -> int:
        """How many series are held."""
        return len(self._tracks)

    def memory_bytes(self) -> int:
        """Bytes held by the value rings and the time ring (the bounded part)."""
        return self.capacity * 8 * (len(self._tracks) + 1)

    # point queries ----------------------------------------------------------

    def state(self, series: Series, now: float) -> SeriesState:
        """Fresh, stale (not in the latest scrape or too old) or absent (never seen)."""
        if series not in self._tracks:
            return SeriesState.ABSENT
        return SeriesState.STALE if self.latest(series, now) is None else SeriesState.FRESH

    def latest(self, series: Series, now: float) -> float | None:
        """The value as exposed in the newest tick at or before `now`; None when absent or stale.

        Stale: the newest tick lacks the series (its scrape failed or it vanished), or that tick
        is older than `stale_after_s`.
        """
        tick = self.tick_at_or_before(now)
        if tick is None or self.time_of(tick) < now - self.stale_after_s:
            return None
        stored = self.value(series, tick)
        return None if math.isnan(stored) else stored

    def last_known(self, series: Series) -> tuple[float, float] | None:
        """(time, value) of the newest value ever seen, however old."""
        track = self._tracks.get(series)
        if track is None or track.last_tick < self.oldest_tick:
            return None
        return self.time_of(track.last_tick), track.values[track.last_tick % self.capacity]

    def target_last_ok(self, target: str) -> float | None:
        """Time of the target's last successful scrape."""
        state = self._targets.get(target)
        if state is None or state.last_ok_tick < self.oldest_tick:
            return None
        return self.time_of(state.last_ok_tick)

    # window queries ---------------------------------------------------------

    def points(self, series: Series, now: float, window: float) -> list[tuple[float, float]]:
        """(time, value) of present samples with time in (now - window, now]."""
        end = self.tick_at_or_before(now)
        if end is None:
            return []
        track = self._tracks.get(series)
        if track is None:
            return []
        first = self.tick_at_or_before(now - window)
        start = max(self._oldest if first is None else first + 1, track.first_tick)
        stop = min(end, track.last_tick)
        pairs = ((self.time_of(t), track.values[t % self.capacity]) for t in range(start, stop + 1))
        return [(when, value) for when, value in pairs if not math.isnan(value)]

    def _endpoints(
        self, series: Series, now: float, window: float
    ) -> tuple[tuple[float, float], tuple[float, float]] | None:
        """First and last present samples of the window, the base being at or before its start."""
        end = self.tick_at_or_before(now)
        track = self._tracks.get(series)
        if end is None or track is None:
            return None
        base = self.tick_at_or_before(now - window)
        first = self._present(track, self._oldest if base is None else base, end, 1)
        last = self._present(track, end, first if first is not None else end, -1)
        if first is None or last is None or last <= first:
            return None
        return (
            (self.time_of(first), self._corrected(track, first)),
            (self.time_of(last), self._corrected(track, last)),
        )

    def _present(self, track: _Track, start: int, stop: int, step: int) -> int | None:
        """First tick from `start` towards `stop` (inclusive) where the ring has a value."""
        low, high = max(track.first_tick, self._oldest), track.last_tick
        values, capacity = track.values, self.capacity
        for tick in range(start, stop + step, step):
            if low <= tick <= high and not math.isnan(values[tick % capacity]):
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
                group = _group(series, keep)
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
                grouped.setdefault(_group(series, keep), []).append([(upper, grown)])
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
