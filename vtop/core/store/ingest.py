"""The one writer of the rings: frames written as columns when a scrape is shaped like the
last one, else sample by sample with resets, defects, aliases and restarts detected; what it
saw of each target (its last answer, alternation, defects) is read from here."""

from __future__ import annotations

import math
from operator import itemgetter

from vtop.core.catalog import Normalizer, family_of, sample_type
from vtop.core.frame import Event, EventKind, Frame, SampleColumns, Series, TargetScrape
from vtop.core.store.gpu_series import gpu_scrape
from vtop.core.store.lora_series import with_lora_series
from vtop.core.store.presence import VALUE_NAN, is_gap
from vtop.core.store.probe_series import ProbeCounters
from vtop.core.store.rings import (
    DEFAULT_MAX_SERIES,
    INSTANCE,
    NAN,
    OTHER_MAX_SERIES,
    PID,
    PROCESS_START,
    Rings,
    Track,
    is_cumulative,
    is_kept,
)
from vtop.core.store.target_record import (
    KNOWN_PER_SAMPLE,
    STARTS_KEPT,
    Columns,
    Known,
    TargetRecord,
    is_possible,
    note_defect,
)


class RingWriter:
    """Writes frames into the rings, one tick per frame."""

    def __init__(
        self, rings: Rings, max_series: int = DEFAULT_MAX_SERIES, column_writes: bool = True
    ) -> None:
        self.rings = rings
        self.max_series = max_series
        self.column_writes = column_writes
        """False: every sample takes the one-by-one path (the reference columns are tested on)."""
        self.dropped_series = 0
        self.columns_written = 0
        """Scrapes written as columns (shaped like the target's previous one)."""
        self.probes = ProbeCounters()
        """The front-door canaries seen so far (their series are written every frame after
        the first, like a scrape)."""
        self._targets: dict[str, TargetRecord] = {}
        self._normalizer = Normalizer()

    def ingest(self, frame: Frame) -> list[Event]:
        """Add one frame as a new tick; return events it revealed (resets, limits)."""
        self.rings.advance(frame.timestamp)
        events: list[Event] = []
        scrapes = frame.scrapes if frame.gpu is None else (*frame.scrapes, gpu_scrape(frame.gpu))
        if frame.probes or self.probes.last:
            self.probes.add(frame.probes)
            scrapes = (*scrapes, self.probes.scrape())
        for scrape in scrapes:
            if scrape.ok:
                events.extend(self._ingest_scrape(with_lora_series(scrape), frame.timestamp))
        return events

    def _ingest_scrape(self, scrape: TargetScrape, timestamp: float) -> list[Event]:
        """Write one target's samples at the current tick."""
        state = self._targets.setdefault(scrape.target, TargetRecord(known={}))
        state.last_ok_tick, state.last_ok_time = self.rings.tick, timestamp
        if self._ingest_columns(state, scrape):
            self.columns_written += 1
            return []
        if state.columns is not None:
            state.columns.settle()
        alternated_before = state.alternating_tick
        restarted = self._restarted(state, scrape)
        alternating = state.alternating_tick == self.rings.tick
        state.defects = {}
        resets, dropped_before = 0, self.dropped_series
        self.dropped_series += scrape.skipped_series
        aliases: list[tuple[Known, float]] = []
        for sample in scrape.samples:
            known = state.known.get(id(sample.series))
            if known is None or known.raw is not sample.series:
                known = self._resolve(state, scrape, sample.series)
            if known.alias or known.fold:
                aliases.append((known, sample.value))
            else:
                resets += self._write(known, sample.value, restarted, state)
        for known, value in aliases:
            track = known.track or self.rings.track(known.series)
            if track is None or track.last_tick != self.rings.tick:
                resets += self._write(known, value, restarted, state)
            elif known.fold:
                row = self.rings.tick % track.size
                track.values[row] = max(track.values[row], value)
        state.columns = self._columns(state, scrape) if not aliases and self.column_writes else None
        if alternating:
            return self._alternation(state, scrape.target, timestamp, alternated_before)
        return self._events(scrape.target, timestamp, restarted, resets, dropped_before)

    def _alternation(
        self, state: TargetRecord, target: str, timestamp: float, alternated_before: int
    ) -> list[Event]:
        """A start time that came back: the URL alternates between processes (a load
        balancer), not a restart per scrape; said once, when it begins (not again while the
        last time it was seen is still in the rings)."""
        if alternated_before >= self.rings.oldest_tick:
            return []
        processes = len(set(state.starts))
        message = (
            f"this URL alternates between {processes} vLLM processes (a load balancer?): "
            "not a restart; scrape each replica's own URL"
        )
        return [Event(timestamp, EventKind.ALTERNATING, target, message)]

    def _ingest_columns(self, state: TargetRecord, scrape: TargetScrape) -> bool:
        """Write a scrape shaped like the target's last one at once; False when it is not
        (new or missing series, a gap, a restart or a counter reset: the sample path)."""
        columns = state.columns
        if columns is None or columns.tick != self.rings.tick - 1:
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
        return columns.write(values, self.rings.tick)

    def _columns(self, state: TargetRecord, scrape: TargetScrape) -> Columns | None:
        """The columns of a scrape just written, when every sample has its own ring."""
        samples = scrape.samples
        raw = samples.series if isinstance(samples, SampleColumns) else tuple(s[0] for s in samples)
        knowns = [state.known.get(id(series)) for series in raw]
        tracks = [known.track for known in knowns if known is not None and known.track]
        if len(tracks) != len(raw) or len(set(map(id, tracks))) != len(tracks):
            return None
        return Columns(raw, tracks, self.rings.tick)

    def _restarted(self, state: TargetRecord, scrape: TargetScrape) -> bool:
        """True when the target's process start time changed since its last scrape (and note
        a start time coming back: the URL alternates between processes)."""
        start = next((s.value for s in scrape.samples if s.series.name == PROCESS_START), None)
        previous, state.process_start = state.process_start, start
        changed = previous is not None and start is not None and start != previous
        if start is not None and (not state.starts or state.starts[-1] != start):
            if start in state.starts:
                state.alternating_tick = self.rings.tick
            state.starts = [*state.starts[-STARTS_KEPT + 1 :], start]
        return changed

    def alternating(self, target: str, now: float, window: float) -> int:
        """How many processes answer the target's URL in turn, 0 when one does: a start time
        that came back within `window` of `now` (a load balancer in front of several)."""
        state = self._targets.get(target)
        if state is None or state.alternating_tick < self.rings.oldest_tick:
            return 0
        if self.rings.time_of(state.alternating_tick) < now - window:
            return 0
        return len(set(state.starts))

    def defects(self, target: str) -> dict[str, list[Series]]:
        """Defects of the target's last scrape by kind, with the first few raw series (see
        `_write`)."""
        state = self._targets.get(target)
        return dict(state.defects) if state is not None else {}

    def _resolve(self, state: TargetRecord, scrape: TargetScrape, raw: Series) -> Known:
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
        known = Known(raw, canonical, alias, is_cumulative(raw.name, metric_type), fold)
        state.known[id(raw)] = known
        return known

    def _write(self, known: Known, value: float, restarted: bool, state: TargetRecord) -> int:
        """Store one value at the current tick; return 1 if it was a counter reset.

        A vLLM value no metric can have (NaN, infinite, negative, a usage ratio above 1) is
        stored as absent; another series' NaN is stored as a NaN value, a gap as a gap; a series
        written twice in one scrape keeps its first value; a counter that goes down while the
        process start time is known and unchanged is a defect of the endpoint, not a restart:
        its previous value is held. Each is noted in `state.defects`.
        """
        track = known.track
        if track is None:
            track = known.track = self.rings.track(known.series) or self._new_track(known, state)
            if track is None:
                return 0
        if track.last_tick == self.rings.tick:
            note_defect(state, "duplicate series", known)
            return 0
        if track.last_tick < self.rings.tick - 1:
            self.rings.fill_gap(track)
        if value != value and (is_gap(value) or not known.vllm):
            track.values[self.rings.tick % track.size] = value if is_gap(value) else VALUE_NAN
            track.last_tick = self.rings.tick
            return 0
        if known.vllm and not is_possible(known.series.name, value):
            note_defect(state, "impossible value", known)
            value = NAN
        reset = 0
        if track.cumulative and not math.isnan(value):
            previous = track.last_raw
            if not math.isnan(previous) and (value < previous or restarted):
                if not restarted and state.process_start is not None:
                    note_defect(state, "counter went backwards", known)
                    value = previous
                else:
                    track.record_reset(self.rings.tick, previous, self.rings.oldest_tick)
                    reset = 1
            track.last_raw = value
        track.values[self.rings.tick % track.size] = value
        track.last_tick = self.rings.tick
        return reset

    def _new_track(self, known: Known, state: TargetRecord) -> Track | None:
        """Create a series ring, unless the series limit is reached (or the target's share
        of series not from vLLM: one server's junk never costs another's series a ring)."""
        other = not is_kept(known.series.name)
        if self.rings.series_count() >= self.max_series or (
            other and state.other_series >= min(OTHER_MAX_SERIES, self.max_series // 2)
        ):
            self.dropped_series += 1
            return None
        state.other_series += other
        return self.rings.add_track(known.series, known.cumulative)

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

    def in_last_answer(self, series: Series, target: str) -> bool:
        """Whether the series was in the target's last successful scrape (however long ago)."""
        track, state = self.rings.track(series), self._targets.get(target)
        return track is not None and state is not None and track.last_tick == state.last_ok_tick

    def target_last_ok(self, target: str) -> float | None:
        """Time of the target's last successful scrape (however long ago)."""
        state = self._targets.get(target)
        return None if state is None else state.last_ok_time
