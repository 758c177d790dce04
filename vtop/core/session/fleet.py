"""The fleet view: one row per server, per-engine splits, and fleet-wide figures.

Fleet-wide and per-engine figures come from the store with label matchers, so histograms are
merged by adding buckets (quantiles of the merged distribution, never averaged quantiles).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vtop.core.session.facts import LIVE, label_values, last_restarts, target_facts
from vtop.core.session.router import is_router, router_view
from vtop.core.session.session import Session, TargetView
from vtop.core.status import Status
from vtop.core.store.summary import TargetSummary, merged_ttft, summarize

SORT_KEYS = ("finding", "target", "state", "running", "waiting", "kv", "preempt", "ttft", "gen")
"""The table opens sorted by its first: the worst finding first."""


@dataclass(frozen=True)
class FleetRow:
    """One server in the fleet table."""

    target: str
    state: str
    model: str
    engines: int
    summary: TargetSummary | None
    finding: str
    """The primary finding ('B1 uneven load ...') or '' when there is none."""
    severity: Status
    opens: str | None = None
    """The server Enter opens from this row (a group's worst replica; None: the row's own)."""


def fleet_rows(session: Session, now: float) -> list[FleetRow]:
    """A row per server the session has seen, with fleet findings naming their instance."""
    restarts = last_restarts(session)
    routers = {name for name in session.targets if is_router(session.store, name)}
    servers = [name for name in session.targets if name not in routers]
    return [
        _router_row(session, name, servers, now)
        if name in routers
        else _row(session, view, now, restarts)
        for name, view in session.targets.items()
    ]


ROUTER_STATE = "router"
"""A router's row's state: it is no server (not counted as one, no figures added)."""
ROUTER_WINDOW_S = 60.0
"""The window a router row's backends are read over (the rules' minute)."""


def _router_row(session: Session, target: str, servers: list[str], now: float) -> FleetRow:
    """A router's row: no server (no figures added to the fleet's), its backends, and a
    warning when one is slow at the router but not in its engine."""
    view = router_view(session.store, target, servers, now, ROUTER_WINDOW_S)
    slow = [b for b in view.backends if b.slow_on_the_path]
    finding = f"router of {len(view.backends)} backend(s)"
    if slow:
        finding += f"; {len(slow)} slow on the path, not in the engine"
    severity = Status.WARNING if slow else Status.INFO
    return FleetRow(target, ROUTER_STATE, "router", 0, None, finding, severity)


def _row(session: Session, view: TargetView, now: float, restarts: dict[str, float]) -> FleetRow:
    """The row of one server: its own primary finding first, else a fleet finding about it."""
    facts = target_facts(session, view, now, restarts)
    primary = view.triage.primary if view.triage else None
    finding, severity = "", Status.OK
    if primary is not None:
        finding, severity = f"{primary.rule.id} {primary.rule.title}", Status(primary.rule.severity)
    elif facts.fleet_about:
        about = facts.fleet_about[0].rule
        finding, severity = f"{about.id} {about.title}", Status.WARNING
    elif view.triage is None or not facts.current:
        finding = f"no verdict: {facts.state if not facts.current else 'no data yet'}"
        severity = Status.UNKNOWN
    return FleetRow(
        view.target, facts.state, facts.model, facts.engines, view.summary, finding, severity
    )


def engine_summaries(session: Session, target: str, now: float) -> dict[str, TargetSummary]:
    """Headline figures per data-parallel engine of one server (empty for a single engine)."""
    engines = label_values(session.store, target, "engine")
    if len(engines) < 2:
        return {}
    window = session.options.window_s
    return {
        engine: summarize(
            session.store, target, now, window, {"instance": target, "engine": engine}
        )
        for engine in engines
    }


def fleet_summary(session: Session, rows: list[FleetRow]) -> TargetSummary:
    """Figures over the live servers of the rows: gauges and rates added from the rows, TTFT
    from the buckets behind the rows' own TTFT (added, so the line agrees with the table)."""
    return added_up(session, rows, "fleet", lambda live: max(_kv(live), default=None))


def _kv(rows: list[FleetRow]) -> list[float]:
    return [r.summary.kv_usage for r in rows if r.summary and r.summary.kv_usage is not None]


def added_up(
    session: Session,
    rows: list[FleetRow],
    name: str,
    kv_usage: Callable[[list[FleetRow]], float | None],
) -> TargetSummary:
    """The live rows' figures as one: requests and rates added, TTFT from their buckets added
    together, the KV use as `kv_usage` reads it over those rows."""
    live_rows = [row for row in rows if row.state in LIVE and row.summary is not None]
    live = [row.summary for row in live_rows if row.summary is not None]

    def total(field: str) -> float | None:
        values = [value for s in live if (value := getattr(s, field)) is not None]
        return math.fsum(values) if values else None

    p50, p99 = merged_ttft(session.targets[row.target].ttft_buckets for row in live_rows)
    return TargetSummary(
        name,
        running=total("running"),
        waiting=total("waiting"),
        kv_usage=kv_usage(live_rows),
        preemptions_per_s=total("preemptions_per_s"),
        prompt_tokens_per_s=total("prompt_tokens_per_s"),
        generation_tokens_per_s=total("generation_tokens_per_s"),
        requests_per_s=total("requests_per_s"),
        ttft_p50_s=p50,
        ttft_p99_s=p99,
    )


def sort_rows(rows: list[FleetRow], key: str, descending: bool) -> list[FleetRow]:
    """Rows ordered by a column; unknown figures always last."""
    known = [(value, row) for row in rows if (value := _sort_value(row, key)) is not None]
    unknown = [row for row in rows if _sort_value(row, key) is None]
    known.sort(key=lambda pair: pair[0], reverse=descending)
    return [row for _, row in known] + unknown


def _sort_value(row: FleetRow, key: str) -> Any:
    """The value a column sorts by (findings: the worst severity first, then by name)."""
    if key == "finding":
        return (row.severity.rank, row.finding, row.target)
    if key in ("target", "state"):
        return str(getattr(row, key))
    summary = row.summary
    if summary is None:
        return None
    figures = {
        "running": summary.running,
        "waiting": summary.waiting,
        "kv": summary.kv_usage,
        "preempt": summary.preemptions_per_s,
        "ttft": summary.ttft_p99_s,
        "gen": summary.generation_tokens_per_s,
    }
    return figures[key]


def filter_rows(rows: list[FleetRow], text: str) -> list[FleetRow]:
    """Rows whose target, model, state or finding contains `text` (case-insensitive)."""
    needle = text.strip().lower()
    if not needle:
        return rows
    return [
        row
        for row in rows
        if needle in f"{row.target} {row.model} {row.state} {row.finding}".lower()
    ]
