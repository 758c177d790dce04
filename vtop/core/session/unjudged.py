"""What a one-shot window saw but could not judge: the difference between "healthy" and "not
seen long enough to tell". A verdict is OK only when this is empty.

A window can hold a problem that no rule has judged yet: a queue, preemptions, a full KV cache
or failed requests while every rule that would explain them is still pending, or a window
shorter than the hold of a rule whose mechanism the server shows (a GPU's clocks, speculative
drafts). Either way the honest verdict is "incomplete", never "ok".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from vtop.core.frame import Series
from vtop.core.rules.engine import Engine, Triage
from vtop.core.rules.promql.ast import selectors
from vtop.core.rules.promql.evaluator import HOST_LEVEL_PREFIX
from vtop.core.rules.rule import Rule
from vtop.core.store.store import Store
from vtop.core.store.summary import FINISHED, KV_USAGE, PREEMPTIONS, QUEUE, RUNNING, WAITING

QUEUE_SEEN = 1.0
"""Requests waiting on average over the window: the queue rules' own threshold."""
KV_FULL = 0.99
"""The KV cache's usage at which no block is left for a new request."""
LENGTHEN_MARGIN_S = 5.0
"""Seconds sampled beyond a rule's `for:` so that it can hold for all of it."""
FAILED_REASONS = ("error",)
"""Finish reasons that mean the server failed the request (an abort is often the client)."""


@dataclass(frozen=True)
class Seen:
    """One problem the window showed, as a figure with its statistic."""

    what: str
    figure: str

    def __str__(self) -> str:
        return f"{self.what} ({self.figure})"


def problems_seen(store: Store, target: str, now: float, window: float) -> list[Seen]:
    """The problems a window shows whatever the rules say: a queue, preemptions, a full KV
    cache, failed requests. Each is never healthy."""
    only = {"instance": target}
    seen: list[Seen] = []
    waiting = _summed(store, store.avg_over_time, WAITING, only, now, window)
    queued = _summed(store, store.rate, f"{QUEUE}_sum", only, now, window)
    if waiting is not None and waiting >= QUEUE_SEEN:
        seen.append(Seen("a queue", f"{waiting:.1f} waiting on average"))
    elif queued is not None and queued >= QUEUE_SEEN:
        seen.append(Seen("a queue", f"{queued:.1f} waiting on average, from the queue times"))
    preempted = _summed(store, store.increase, PREEMPTIONS, only, now, window)
    if preempted is not None and preempted >= 1:
        seen.append(Seen("preemptions", f"{preempted:.0f} in the window"))
    kv = _peak(store, KV_USAGE, only, now, window)
    if kv is not None and kv >= KV_FULL:
        seen.append(Seen("a full KV cache", f"{kv:.0%} at most"))
    failed = math.fsum(
        _summed(store, store.increase, FINISHED, failing, now, window) or 0.0
        for failing in ({**only, "finished_reason": reason} for reason in FAILED_REASONS)
    )
    if failed >= 1:
        seen.append(Seen("failed requests", f"{failed:.0f} finished with an error"))
    return seen


@dataclass(frozen=True)
class GaugeWindow:
    """A gauge over the window: its last value, mean and max (engines added up; the KV
    cache's usage, a fraction, averaged over engines instead)."""

    now: float | None
    mean: float | None
    peak: float | None


WINDOW_GAUGES = {
    "running": RUNNING,
    "waiting": WAITING,
    "kv": KV_USAGE,
}
"""The gauges a report states with their statistic, by the name it shows them under."""


def window_gauges(store: Store, target: str, now: float, window: float) -> dict[str, GaugeWindow]:
    """Each of WINDOW_GAUGES over the window, read from the same store as the findings."""
    only = {"instance": target}
    shown: dict[str, GaugeWindow] = {}
    for label, name in WINDOW_GAUGES.items():
        series = store.select(name, only)
        if not series:
            continue
        parts = [
            (
                store.latest(s, now),
                store.avg_over_time(s, now, window),
                store.max_over_time(s, now, window),
            )
            for s in series
        ]
        combine = _mean_of if label == "kv" else _sum_of
        shown[label] = GaugeWindow(*(combine([p[i] for p in parts]) for i in range(3)))
    return shown


def _sum_of(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None and not math.isnan(v)]
    return math.fsum(known) if known else None


def _mean_of(values: list[float | None]) -> float | None:
    total = _sum_of(values)
    known = [v for v in values if v is not None and not math.isnan(v)]
    return None if total is None else total / len(known)


def watch_note(triage: Triage | None, store: Store, target: str, now: float, window: float) -> str:
    """For a watching view with no warning or critical finding: what the window shows that is
    not healthy (a queue, preemptions, a full KV cache, failed requests, a rule pending), so
    the dashboard and `--plain` never say OK over a problem. Empty when there is none."""
    if triage is None or any(f.rule.severity != "info" for f in triage.findings):
        return ""
    seen = [str(item) for item in problems_seen(store, target, now, window)]
    seen += [
        f"{item.rule.id} pending {item.held_s:.0f} s of {item.rule.for_s:g}"
        for item in triage.pending
        if item.rule.severity != "info"
    ]
    return "; ".join(seen)


def mechanism_shown(rule: Rule, store: Store, target: str, now: float) -> bool:
    """True when the server shows what the rule judges: every series its condition reads
    exists and one of them is non-zero (a text-only model exports the multimodal cache's
    counters at 0; a server without speculative decoding has no drafts)."""
    names = {s.name for s in selectors(rule.expr) if not s.name.startswith("vtop:")}
    if not names:
        return False
    found = [_series_of(name, store, target) for name in names]
    if not all(found):
        return False
    return any(_non_zero(store, series, now) for group in found for series in group)


def has_inputs(rule: Rule, store: Store, target: str) -> bool:
    """True when some series the rule's condition reads exists for the target."""
    names = {s.name for s in selectors(rule.expr) if not s.name.startswith("vtop:")}
    return any(_series_of(name, store, target) for name in names)


def short_rules(engine: Engine, store: Store, target: str, now: float, window: float) -> list[Rule]:
    """The per-server rules that must hold longer than the window and whose mechanism the
    server shows: a window this short cannot call them healthy."""
    return [
        rule
        for rule in engine.rules
        if rule.scope == "target"
        and engine.hold_needed_s(rule) > window
        and mechanism_shown(rule, store, target, now)
    ]


def not_judged(
    triage: Triage, engine: Engine, store: Store, target: str, now: float, window: float
) -> list[str]:
    """Why a window without a warning or critical finding is still not healthy: the problems
    it saw, the rules still pending, the rules it was too short for (empty: healthy)."""
    lines = [f"seen: {seen}" for seen in problems_seen(store, target, now, window)]
    lines += [
        f"pending: {item.rule.id} {item.rule.title} held {item.held_s:.0f} s of "
        f"{item.rule.for_s:g} s"
        for item in triage.pending
        if item.rule.severity != "info"
    ]
    found = {f.rule.id for f in triage.findings}
    short = [r for r in short_rules(engine, store, target, now, window) if r.id not in found]
    if short:
        needed = math.ceil(max(rule.for_s for rule in short) + LENGTHEN_MARGIN_S)
        named = ", ".join(rule.id for rule in short)
        lines.append(
            f"too short: {named} need(s) longer than the {window:.0f} s window "
            f"(--window {needed} judges them)"
        )
    return lines


Measure = Callable[[Series, float, float], float | None]


def _summed(
    store: Store,
    measure: Measure,
    name: str,
    matchers: dict[str, str],
    now: float,
    window: float,
) -> float | None:
    """A windowed measure summed over the target's series (None: no series measured)."""
    values = [
        value
        for series in store.select(name, matchers)
        if (value := measure(series, now, window)) is not None
    ]
    return math.fsum(values) if values else None


def _peak(
    store: Store, name: str, matchers: dict[str, str], now: float, window: float
) -> float | None:
    """The largest value of any of the target's series of `name` in the window."""
    peaks = [store.max_over_time(s, now, window) for s in store.select(name, matchers)]
    known = [p for p in peaks if p is not None]
    return max(known) if known else None


def _series_of(name: str, store: Store, target: str) -> list[Series]:
    """The store's series of the name for the target (host-level ones for all)."""
    local = None if name.startswith(HOST_LEVEL_PREFIX) else {"instance": target}
    return store.select(name, local)


def _non_zero(store: Store, series: Series, now: float) -> bool:
    """True when the series' newest value is a number other than zero."""
    value = store.latest(series, now)
    return value is not None and not math.isnan(value) and value != 0
