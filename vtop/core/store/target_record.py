"""What the writer keeps per target between scrapes: its raw series resolved to their rings
(`Known`), its last scrape as columns to write the next one at once (`Columns`), and the
target's record (`TargetRecord`: restarts, alternation, defects, its last answer)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import lt

from vtop.core.frame import Series, picker
from vtop.core.store.rings import PROCESS_START, Track

STARTS_KEPT = 16
KNOWN_PER_SAMPLE = 4
"""A target's resolved-series cache is dropped once it holds this many entries per sample of
the current scrape (a payload whose series change every scrape would otherwise fill it)."""
AT_MOST_ONE = frozenset({"vllm:kv_cache_usage_perc"})
"""Ratios that cannot exceed 1 (a little above, from float rounding, is tolerated)."""


def is_possible(name: str, value: float) -> bool:
    """Whether a vLLM series can have this value."""
    if not 0 <= value < math.inf:
        return False
    return value <= 1.000001 if name in AT_MOST_ONE else True


DEFECTS_KEPT = 5


def note_defect(state: TargetRecord, kind: str, known: Known) -> None:
    """Remember a defect of this scrape (the first few series of each kind)."""
    found = state.defects.setdefault(kind, [])
    if len(found) < DEFECTS_KEPT:
        found.append(known.raw)


class Known:
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
        self.track: Track | None = None


class Columns:
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

    def __init__(self, raw: Sequence[Series], tracks: list[Track], tick: int) -> None:
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

    def write(self, values: list[float], tick: int) -> bool:
        """Write one scrape's values at `tick`; False (nothing written) if a counter went down
        or a vLLM value is impossible (the sample path then judges each one)."""
        total_all = sum(values)
        if total_all != total_all:
            return False  # a NaN (or +Inf and -Inf): the sample path tells value from marker
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
            track.values[tick % track.size] = value
            track.last_tick = tick
        self.tick = tick
        return True

    def settle(self) -> None:
        """Give the rings their counters' last raw values back (the sample path reads them)."""
        for track, value in zip(self.cumulative, self.last_grown, strict=True):
            track.last_raw = value


@dataclass
class TargetRecord:
    """Per-target caches and restart detection.

    `known` is keyed by the id of the parser's Series objects, which the parser reuses across
    ticks: an int lookup instead of hashing nested label tuples. The entry keeps its Series
    alive, so the id cannot be reused while the entry exists.
    """

    known: dict[int, Known]
    last_ok_tick: int = -1
    last_ok_time: float | None = None
    """Kept beside the tick: a server down for longer than the rings hold still has a last
    answer."""
    process_start: float | None = None
    columns: Columns | None = None
    starts: list[float] = field(default_factory=list)
    """Process start times seen, newest last (at most STARTS_KEPT): one coming back means the
    URL alternates between processes (a load balancer), not that vLLM restarted."""
    defects: dict[str, list[Series]] = field(default_factory=dict)
    """Defects of this scrape by kind (impossible value, duplicate, counter going back): the
    first few raw series of each."""
    alternating_tick: int = -1
    """The last tick at which a process start time seen before came back."""
    other_series: int = 0
    """Rings made for this target's series not from vLLM (they share a cap per target)."""
