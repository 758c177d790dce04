"""Bounded ring buffers of every series: one ring of tick times shared by all series, one
float64 per tick per series (NaN = absent), so memory is at most 8 bytes x capacity x series
whatever the uptime. The rings start short and grow as ticks arrive until they reach the
capacity, so a session of a minute holds a minute, not an hour of NaN. A watching session names
how far back its rules read each series: a name read over less than the retention has rings
of its own `Tier`, grown only as far as that reach; of the names no rule reads, histogram
buckets, `_created` times and series not from vLLM keep only their last SHORT_TICKS ticks. A
reader reaching the oldest tick of such a ring lengthens every ring of that name to the rings'
size. Counters keep a short tuple of reset offsets, so an increase is one subtraction.
This module holds the rings (`Rings`: one writer, `RingWriter` in ingest.py, adds ticks and
series; everything else reads) and the reads of one tick; `store` composes the two and queries
windows. Nothing here reads a clock.
"""

from __future__ import annotations

import enum
import math
from array import array
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from vtop.core.frame import Labels, Series

NAN = math.nan
INSTANCE = "instance"
PROCESS_START = "process_start_time_seconds"
PID = "pid"
"""Per-process gauge copies (vLLM 0.11.x with --api-server-count > 1) carry this label; vLLM
later exposes one value ("mostrecent"), so vtop folds them into one series, keeping the largest
(the API servers that receive no engine stats report 0)."""
DEFAULT_CAPACITY = 3600
FIRST_SIZE = 64
"""Ticks a ring holds before it first grows (and the least it grows by)."""
GROWTH_DIVISOR = 4
"""A ring grows by a quarter of its size."""
SHORT_TICKS = 16
"""Ticks held by the ring of a series no reader has reached back for yet (a watching session's
series no rule reads). A reader reaching its oldest tick lengthens every ring of that name to
the rings' size: a view that reads a series over a window from its first tick on loses
nothing; one that first reads it later sees its last SHORT_TICKS ticks, then all."""


@dataclass(frozen=True)
class Reaches:
    """How many seconds back the known readers read each series name (a watching session's
    rules and its diagnosis' window), and any other name that does not `starts_short` (what
    is read of it when asked: a what-if's calibration)."""

    by_name: Mapping[str, float]
    others: float


DEFAULT_MAX_SERIES = 50_000
OTHER_MAX_SERIES = 500
"""Series that are not vLLM's (nor vtop's GPU or restart series) share this smaller cap, per
target: a payload's junk, however much of it comes first, never costs a vLLM series (or
another server's series) its ring. No rule reads them; vLLM 0.32 exposes about 60 (Python,
process, HTTP), so 500 leaves room for a larger HTTP instrumentation while one server's junk
costs at most 500 rings (14 MiB at 3,600 ticks)."""
KEPT_PREFIXES = ("vllm:", "nvml:", "probe:", "ALERTS")
"""Series never crowded out by junk (Prometheus's ALERTS: the fleet's findings)."""


def is_kept(name: str) -> bool:
    """Whether a series is always kept: vLLM's, vtop's own, or the process start time (the
    rest share the cap of OTHER_MAX_SERIES)."""
    return name.startswith(KEPT_PREFIXES) or name == PROCESS_START


SHORT_SUFFIXES = ("_bucket", "_created")


def starts_short(name: str) -> bool:
    """Whether a series no rule reads starts with a short ring: a histogram's bucket (vLLM's
    histograms are most of its payload), a `_created` time, or a series not from vLLM (Python,
    process, HTTP). The rest (gauges, counters, histograms' sums and counts: what a what-if's
    calibration or a view may read back over minutes when asked) are held as the rules' are."""
    return name.endswith(SHORT_SUFFIXES) or not is_kept(name)


DEFAULT_STALE_AFTER_S = 30.0
MAX_TICK_LOOKUPS = 4096

Matchers = Mapping[str, str]
Measure = Callable[[Series, float, float], float | None]


def group_labels(series: Series, keep: frozenset[str]) -> Labels:
    """The series' labels restricted to `keep` (a `by` grouping)."""
    return tuple(pair for pair in series.labels if pair[0] in keep)


class SeriesFreshness(enum.Enum):
    """Whether a series has a current value; absent and stale are not zero."""

    FRESH = "fresh"
    STALE = "stale"
    ABSENT = "absent"


def is_cumulative(sample_name: str, metric_type: str) -> bool:
    """True for samples that only grow between restarts (counters, histogram/summary totals,
    and undeclared `*_total` series, which are counters by convention)."""
    if metric_type == "counter":
        return not sample_name.endswith("_created")
    if metric_type == "histogram":
        return sample_name.endswith(("_bucket", "_count", "_sum"))
    if metric_type == "summary":
        return sample_name.endswith(("_count", "_sum"))
    if metric_type in ("untyped", "unknown"):
        return sample_name.endswith("_total")
    return False


class Track:
    """Ring of values of one series (the writer fills it; `Rings` reads it)."""

    __slots__ = (
        "cumulative",
        "first_tick",
        "last_raw",
        "last_tick",
        "name",
        "reset_offsets",
        "reset_ticks",
        "size",
        "tier",
        "values",
    )

    def __init__(
        self, size: int, cumulative: bool, tick: int, name: str = "", tier: Tier | None = None
    ) -> None:
        self.values = array("d", [NAN]) * size
        self.size = size
        """Slots in the ring: a tick's value is at `tick % size`."""
        self.tier = tier
        """The shorter rings this one is one of (None: it has the rings' size)."""
        self.name = name
        self.cumulative = cumulative
        self.first_tick = tick
        self.last_tick = tick - 1
        self.last_raw = NAN
        self.reset_ticks: tuple[int, ...] = ()
        self.reset_offsets: tuple[float, ...] = ()
        """Cumulative offset in force from each reset tick on (tuples: most rings never see a
        reset, and an empty tuple is shared, an empty list is not)."""

    def offset_at(self, tick: int) -> float:
        """Sum of the pre-reset values of all resets at or before `tick`."""
        position = bisect_right(self.reset_ticks, tick)
        return self.reset_offsets[position - 1] if position else 0.0

    def record_reset(self, tick: int, previous: float, oldest_tick: int) -> None:
        """Remember a reset after a last value of `previous`; forget resets out of the ring.

        The newest reset before the ring's oldest tick is kept: the ring starts with its offset.
        """
        total = (self.reset_offsets[-1] if self.reset_offsets else 0.0) + previous
        self.reset_ticks = (*self.reset_ticks, tick)
        self.reset_offsets = (*self.reset_offsets, total)
        expired = bisect_right(self.reset_ticks, oldest_tick) - 1
        if expired > 0:
            self.reset_ticks = self.reset_ticks[expired:]
            self.reset_offsets = self.reset_offsets[expired:]


class Tier:
    """Rings shorter than the rings' size, all of one size: those of names read back at most
    `reach_s` (grown until they hold that long), or short ones (reach None: SHORT_TICKS)."""

    __slots__ = ("reach_s", "size", "tracks")

    def __init__(self, reach_s: float | None, size: int) -> None:
        self.reach_s = reach_s
        self.size = size
        self.tracks: list[Track] = []
        """Its rings (a list: a set costs four times the bytes, and only a lengthening, once
        per name, takes rings out)."""


class Rings:
    """The rings of every series, their ticks, and what one tick holds."""

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        first_size: int = FIRST_SIZE,
        retention_s: float | None = None,
        reaches: Reaches | None = None,
    ) -> None:
        self.capacity = capacity
        """The most ticks held: the bound."""
        self.retention_s = retention_s
        """The seconds of ticks every reader needs (the widest window a rule or a view reads):
        once the tick after the oldest is that old, a new tick overwrites the oldest instead of
        growing the rings. None: the rings grow to the capacity."""
        self.first_size = max(1, min(first_size, capacity))
        self.size = self.first_size
        """The ticks every ring has room for now: the ring index is `tick % size`. It grows
        (up to the capacity) before a tick would overwrite one still needed: in place before
        the first wrap, laid out afresh after one (when ticks came closer together)."""
        self.stale_after_s = stale_after_s
        self.tick = -1
        self._times = array("d", [NAN]) * self.size
        self._tracks: dict[Series, Track] = {}
        self.series_generation = 0
        """Counts the series added: a selection made at the same count still holds (series are
        added, never removed)."""
        self._by_name: dict[str, list[Series]] = {}
        self._by_instance: dict[str | None, dict[str, list[Series]]] = {}
        """Series by instance, then name: a fleet's per-server queries touch only their own
        (a dict per instance: no key tuple per series; most lists hold one series)."""
        self._tick_lookups: dict[float, int | None] = {}
        self._oldest = 0
        self._reaches = reaches
        """How far back each name is read (None: every ring has the rings' size). A name read
        less far back than the retention has rings of its reach's tier, a name no reader named
        short rings when it `starts_short`, either until a reader reaches back further
        (`held_from`)."""
        self._lengthened: set[str] = set()
        """Names whose rings a reader lengthened: their later series have the rings' size."""
        self._short = Tier(None, SHORT_TICKS)
        known = set() if reaches is None else {*reaches.by_name.values(), reaches.others}
        self._tiers = {
            reach: Tier(reach, self.first_size)
            for reach in sorted(known)
            if retention_s is not None and reach < retention_s
        }

    # the writer's -----------------------------------------------------------

    def advance(self, timestamp: float) -> None:
        """A new tick at `timestamp` (later than the last), room made for it."""
        if self.tick >= 0 and timestamp <= self.time_of(self.tick):
            raise ValueError(f"frame at {timestamp} is not after the previous tick")
        self.tick += 1
        self._room_for(self.tick, timestamp)
        self._tiers_room_for(self.tick, timestamp)
        self._times[self.tick % self.size] = timestamp
        self._tick_lookups.clear()
        self._oldest = max(self._oldest, self.tick - self.size + 1)

    def track(self, series: Series) -> Track | None:
        """The ring of a series (None when it has none)."""
        return self._tracks.get(series)

    def add_track(self, series: Series, cumulative: bool) -> Track:
        """A new ring for a series, starting at the current tick (of its name's tier, or the
        rings' size)."""
        tier = self._tier_of(series.name)
        size = self.size if tier is None else tier.size
        track = Track(size, cumulative, self.tick, series.name, tier)
        if tier is not None:
            tier.tracks.append(track)
        self._tracks[series] = track
        self.series_generation += 1
        self._by_name.setdefault(series.name, []).append(series)
        named = self._by_instance.setdefault(series.label(INSTANCE), {})
        if series.name in named:
            named[series.name].append(series)
        else:
            named[series.name] = [series]  # one slot, not the four an append reserves
        return track

    def _tier_of(self, name: str) -> Tier | None:
        """The tier of a new ring of `name`: its reach's, the short one's, or None (the rings'
        size: every name of a store that was not told what is read, or one lengthened)."""
        reaches = self._reaches
        if reaches is None or name in self._lengthened:
            return None
        reach = reaches.by_name.get(name)
        if reach is None and starts_short(name):
            return self._short if self.capacity > SHORT_TICKS else None
        return self._tiers.get(reaches.others if reach is None else reach)

    def fill_gap(self, track: Track) -> None:
        """Mark ticks between the series' last value and the current tick as absent."""
        start = max(track.last_tick + 1, self._oldest, self.tick - track.size + 1)
        for tick in range(start, self.tick):
            track.values[tick % track.size] = NAN

    def held_from(self, track: Track, wanted: int) -> int:
        """The first tick from `wanted` on that the track's ring can hold. A short ring asked
        for its oldest tick or older is lengthened first, with every ring of its name: a reader
        reaches that far back, and the next tick would drop what it read (the ticks it already
        dropped stay absent). A ring of a reach's tier, which grows before it drops a tick
        within its reach, is lengthened so when asked for a tick it dropped."""
        start, held = max(wanted, track.first_tick, self._oldest), self.tick - track.size + 1
        tier = track.tier
        if tier is not None and (start < held or (start == held and tier.reach_s is None)):
            self._lengthen(track.name)
        return max(start, self.tick - track.size + 1)

    def _lengthen(self, name: str) -> None:
        """Give every shorter ring of `name` the rings' size, and every later series of it."""
        self._lengthened.add(name)
        tiers: set[Tier] = set()
        for series in self._by_name.get(name, ()):
            track = self._tracks[series]
            if track.tier is None:
                continue
            laid = array("d", [NAN]) * self.size
            kept = max(self.tick - track.size + 1, track.first_tick, self._oldest)
            for tick in range(kept, track.last_tick + 1):
                laid[tick % self.size] = track.values[tick % track.size]
            tiers.add(track.tier)
            track.values, track.size, track.tier = laid, self.size, None
        for tier in tiers:
            tier.tracks = [track for track in tier.tracks if track.tier is tier]

    # reads ------------------------------------------------------------------

    @property
    def oldest_tick(self) -> int:
        """The oldest tick still in the ring."""
        return self._oldest

    def held_since(self) -> float | None:
        """The time of the oldest tick held (None before the first)."""
        return None if self.tick < 0 else self.time_of(self._oldest)

    def time_of(self, tick: int) -> float:
        """Timestamp of a tick in the ring."""
        return self._times[tick % self.size]

    def _room_for(self, tick: int, timestamp: float) -> None:
        """Grow every ring (by a quarter, up to the capacity) unless `tick` can overwrite the
        oldest tick: the rings are at their capacity, or the tick after the oldest is already
        as old as the retention (it is then the base of the widest window). A quarter, not
        double: the slots reserved ahead cost 8 bytes per series each (1.3 MB at 600 ticks of
        a vLLM payload), and a growth copies each ring once, a few dozen times in an hour."""
        grown = self._grown_size(tick, timestamp, self.size, self.capacity, self.retention_s)
        if grown is None:
            return
        self._times = _grown(self._times, tick, self.size, grown)
        for track in self._tracks.values():
            if track.tier is None:
                track.values = _grown(track.values, tick, self.size, grown)
                track.size = grown
        self.size = grown

    def _tiers_room_for(self, tick: int, timestamp: float) -> None:
        """Grow each reach's tier (as `_room_for`, up to the rings' size) unless `tick` can
        overwrite its oldest tick: the tick after that one is as old as the reach."""
        for tier in self._tiers.values():
            size = tier.size
            grown = self._grown_size(tick, timestamp, size, self.size, tier.reach_s)
            if grown is None:
                continue
            for track in tier.tracks:
                track.values = _grown(track.values, tick, size, grown)
                track.size = grown
            tier.size = grown

    def _grown_size(
        self, tick: int, timestamp: float, size: int, most: int, reach_s: float | None
    ) -> int | None:
        """The size rings of `size` slots grow to before `tick` (by a quarter, up to `most`),
        None when `tick` can overwrite their oldest: they are at `most`, or the tick after
        their oldest is already `reach_s` old (None: they grow to `most`)."""
        if tick < size or size >= most:
            return None
        if reach_s is not None and self.time_of(tick - size + 1) <= timestamp - reach_s:
            return None
        return min(size + max(self.first_size, size // GROWTH_DIVISOR), most)

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
        return NAN if track is None else self.value_at(track, tick)

    def slots(self, series: Series, first: int, last: int) -> tuple[int, Sequence[float], bool]:
        """The stored slots of ticks `first`..`last` held for the series (NaN payloads kept:
        `presence` tells them apart), with the tick of the first one, and whether the values
        never go down across them: true for a counter with no reset recorded after the first
        slot (every stored decrease is recorded as a reset, and a held-back value is stored
        unchanged), so a range function need not look for one; false when not known (a gauge)."""
        track = self._tracks.get(series)
        if track is None:
            return first, (), False
        start = self.held_from(track, first)
        stop = min(last, track.last_tick)
        if stop < start:
            return start, (), False
        grows = track.cumulative and _no_reset(track.reset_ticks, start, stop)
        low, high = start % track.size, stop % track.size
        if low <= high:
            return start, track.values[low : high + 1], grows
        return start, track.values[low:] + track.values[: high + 1], grows

    def times(self, first: int, last: int) -> list[float]:
        """The timestamps of ticks `first`..`last` (all in the ring), oldest first."""
        if last < first:
            return []
        low, high = first % self.size, last % self.size
        if low <= high:
            return self._times[low : high + 1].tolist()
        return self._times[low:].tolist() + self._times[: high + 1].tolist()

    def value_at(self, track: Track, tick: int) -> float:
        """A ring's value at a tick (NaN when absent or out of the ring)."""
        if not track.first_tick <= tick <= track.last_tick or tick < self._oldest:
            return NAN
        if track.tier is not None and tick <= self.tick - track.size + 1:
            self.held_from(track, tick)
        return track.values[tick % track.size]

    def corrected(self, series: Series, tick: int) -> float:
        """The value at a tick plus the counter resets before it (monotonic for counters)."""
        track = self._tracks.get(series)
        return NAN if track is None else self.corrected_at(track, tick)

    def corrected_at(self, track: Track, tick: int) -> float:
        """A ring's value at a tick plus its counter resets before it."""
        stored = self.value_at(track, tick)
        return stored + track.offset_at(tick) if track.reset_ticks else stored

    # selection --------------------------------------------------------------

    def names(self) -> list[str]:
        """Every metric name held."""
        return sorted(self._by_name)

    def select(self, name: str, matchers: Matchers | None = None) -> list[Series]:
        """Series of `name` whose labels equal every matcher."""
        if matchers and INSTANCE in matchers:
            found = self._by_instance.get(matchers[INSTANCE], {}).get(name, [])
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
        """Bytes held by the value rings and the time ring now (at most `bound_bytes`)."""
        tiers = [self._short, *self._tiers.values()]
        shorter = sum(len(tier.tracks) for tier in tiers)
        held = sum(tier.size * len(tier.tracks) for tier in tiers)
        return 8 * (self.size * (len(self._tracks) - shorter + 1) + held)

    def bound_bytes(self) -> int:
        """Bytes the value rings and the time ring of the series held come to at capacity."""
        return self.capacity * 8 * (len(self._tracks) + 1)

    # point queries ----------------------------------------------------------

    def freshness(self, series: Series, now: float) -> SeriesFreshness:
        """Fresh, stale (not in the latest scrape or too old) or absent (never seen)."""
        if series not in self._tracks:
            return SeriesFreshness.ABSENT
        return SeriesFreshness.STALE if self.latest(series, now) is None else SeriesFreshness.FRESH

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
        """(time, value) of the newest value the rings still hold."""
        track = self._tracks.get(series)
        if track is None or track.last_tick < max(self._oldest, self.tick - track.size + 1):
            return None
        return self.time_of(track.last_tick), track.values[track.last_tick % track.size]


def _grown(ring: array[float], tick: int, size: int, grown: int) -> array[float]:
    """A ring of `size` slots given `grown` slots before `tick` is written: extended in place
    while ticks 0..tick-1 are at their own index (before the first wrap), else laid out
    afresh."""
    if tick == size:
        ring.extend(array("d", [NAN]) * (grown - size))
        return ring
    return _relaid(ring, tick - size, size, grown)


def _relaid(ring: array[float], oldest: int, size: int, grown: int) -> array[float]:
    """A full ring of `size` slots, whose oldest tick is `oldest`, laid out in `grown` slots
    (every tick at `tick % grown`)."""
    start = oldest % size
    in_order = ring[start:] + ring[:start]
    laid = array("d", [NAN]) * grown
    at = oldest % grown
    head = min(size, grown - at)
    laid[at : at + head] = in_order[:head]
    laid[: size - head] = in_order[head:]
    return laid


def _no_reset(resets: tuple[int, ...], first: int, last: int) -> bool:
    """Whether no reset tick falls after `first` up to `last` (`resets` ascending)."""
    if not resets or resets[-1] <= first:
        return True
    return resets[bisect_right(resets, first)] > last
