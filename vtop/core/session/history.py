"""One target's headline figures over time (the charts' data), held as columns.

A summary a tick held as an object costs 930 bytes (17 boxed floats, the finish shares), 3.3 MB
an hour at 1 s; as a column of float64 per figure (21 with the finish reasons) it costs 8 bytes
a figure, and a chart reads its window through a bisection instead of a walk over every object.
Only the newest summary is kept whole (the panels read it). An unknown figure is NaN in its
column and never read back as a value.
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Protocol

from vtop.core.store.summary import TargetSummary

NOT_FIGURES = ("target", "finish_shares")
FIGURES = (
    *(f.name for f in dataclasses.fields(TargetSummary) if f.name not in NOT_FIGURES),
    *(name for name, value in vars(TargetSummary).items() if isinstance(value, property)),
)
"""The numeric figures of a summary, its fields and its properties (the requests finished per
second for each reason), each one column."""
SLACK_DIVISOR = 4
"""The columns run up to a quarter past the bound before the oldest quarter is cut at once (a
cut moves every column's values)."""


class ChartHistory(Protocol):
    """A read-only view of one target's figures over time: what a chart reads (the session
    appends to the `SummaryHistory` behind it; a view reads it up to its own `now`)."""

    @property
    def first_time(self) -> float | None:
        """When the oldest figure held was taken."""
        ...

    def points(self, figure: str, since: float, until: float) -> Iterator[tuple[float, float]]:
        """(time, value) of a figure's known values with since <= time <= until."""
        ...


class SummaryHistory:
    """The newest `max_points` summaries of one target, oldest first, as columns."""

    def __init__(self, max_points: int) -> None:
        self.max_points = max(1, max_points)
        self.times = array("d")
        self.columns = {name: array("d") for name in FIGURES}
        self.latest: TargetSummary | None = None
        """The newest summary, whole."""

    def __len__(self) -> int:
        return min(len(self.times), self.max_points)

    def append(self, timestamp: float, summary: TargetSummary) -> None:
        """Add the newest summary (timestamps in order); the oldest go beyond the bound."""
        self.latest = summary
        self.times.append(timestamp)
        for name, column in self.columns.items():
            value = getattr(summary, name)
            column.append(math.nan if value is None else value)
        excess = len(self.times) - self.max_points
        if excess > self.max_points // SLACK_DIVISOR:
            del self.times[:excess]
            for column in self.columns.values():
                del column[:excess]

    @property
    def first_time(self) -> float | None:
        """When the oldest figure held was taken (None: none yet)."""
        return self.times[self._first_index(-math.inf)] if self.times else None

    def _first_index(self, since: float) -> int:
        """The index of the oldest point within the bound taken at `since` or later (the
        columns' slack past the bound is never read)."""
        return max(0, len(self.times) - self.max_points, bisect_left(self.times, since))

    def points(self, figure: str, since: float, until: float) -> Iterator[tuple[float, float]]:
        """(time, value) of a figure's known values with since <= time <= until, oldest first."""
        start = self._first_index(since)
        stop = bisect_right(self.times, until)
        column = self.columns[figure]
        for index in range(start, stop):
            value = column[index]
            if not math.isnan(value):
                yield self.times[index], value

    def newest_first(self, figure: str, since: float) -> Iterator[tuple[float, float]]:
        """(time, value) of a figure's known values taken at `since` or later, newest first."""
        start = self._first_index(since)
        column = self.columns[figure]
        for index in range(len(self.times) - 1, start - 1, -1):
            value = column[index]
            if not math.isnan(value):
                yield self.times[index], value
