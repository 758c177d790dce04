"""A target's summaries over time as columns: bounded, read by time, unknowns never values."""

from __future__ import annotations

import dataclasses
import math
import tracemalloc

from vtop.core.session.history import SummaryHistory
from vtop.core.store.summary import TargetSummary, unknown_summary


def summary(running: float | None, waiting: float | None = 1.0) -> TargetSummary:
    return dataclasses.replace(
        unknown_summary("t"), running=running, waiting=waiting, finish_shares=(("stop", 1.0),)
    )


def test_the_newest_points_are_kept_within_the_bound_and_read_by_time() -> None:
    history = SummaryHistory(4)
    assert len(history) == 0 and history.first_time is None and history.latest is None
    for t in range(10):
        history.append(float(t), summary(None if t == 7 else float(t)))
    assert len(history) == 4 and history.first_time == 6.0
    assert list(history.points("running", -math.inf, math.inf)) == [(6, 6), (8, 8), (9, 9)]
    assert list(history.points("running", 6.5, 8.0)) == [(8.0, 8.0)]
    assert list(history.newest_first("running", 7.0)) == [(9.0, 9.0), (8.0, 8.0)]
    assert history.latest == summary(9.0)  # whole, finish shares included
    assert list(history.points("stop_per_s", 0.0, math.inf)) == []  # no finished count
    history.append(10.0, dataclasses.replace(summary(1.0), requests_per_s=2.0))
    assert list(history.points("stop_per_s", 0.0, math.inf)) == [(10.0, 2.0)]


def test_an_hour_of_summaries_costs_columns_not_objects() -> None:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        history = SummaryHistory(3600)
        for t in range(5000):
            history.append(float(t), summary(float(t) + 0.5, float(t) * 2.0))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(history) == 3600 and history.first_time == 1400.0
    assert held < 3600 * 300, held  # one summary object a tick was 930 bytes
