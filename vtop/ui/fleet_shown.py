"""What the fleet table shows, built once per refresh from the session (pure, beside `shown.py`):
the fleet line and the rows as the screen chose them (sorted, filtered, grouped), with the
engines of data-parallel servers. The fleet screen reads this value and nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field

from vtop.core.session.facts import LIVE
from vtop.core.session.fleet import (
    ROUTER_STATE,
    FleetRow,
    engine_summaries,
    filter_rows,
    fleet_rows,
    fleet_summary,
    sort_rows,
)
from vtop.core.session.fleet_groups import GROUP_KEYS, group_rows
from vtop.core.session.session import Session
from vtop.core.store.summary import TargetSummary
from vtop.ui.format import number, seconds
from vtop.ui.shown import prometheus_down


@dataclass(frozen=True)
class TableChoice:
    """How the user asked for the table: sorted by, which way, grouped by, filtered by."""

    sort_key: str
    descending: bool = False
    group_key: str = GROUP_KEYS[0]
    filter_text: str = ""


@dataclass(frozen=True)
class FleetShown:
    """One refresh of the fleet table."""

    line: str
    """The fleet line: figures across servers and the fleet's findings."""
    rows: tuple[FleetRow, ...]
    """Sorted and filtered, grouped as chosen."""
    engines: dict[str, dict[str, TargetSummary]] = field(default_factory=dict)
    """The engines of each data-parallel server shown (ungrouped only)."""


def build_fleet(session: Session, now: float, mode: str, choice: TableChoice) -> FleetShown:
    """The table's value: every server's row, grouped, filtered and sorted as chosen."""
    every = fleet_rows(session, now)
    listed = group_rows(session, every, choice.group_key)
    rows = sort_rows(filter_rows(listed, choice.filter_text), choice.sort_key, choice.descending)
    engines = (
        {r.target: engine_summaries(session, r.target, now) for r in rows if r.engines > 1}
        if choice.group_key == GROUP_KEYS[0]
        else {}
    )
    return FleetShown(fleet_line(session, mode, every, now), tuple(rows), engines)


def fleet_line(session: Session, mode: str, rows: list[FleetRow], now: float) -> str:
    """Fleet-wide figures and the findings across servers; the TTFT is the rows' own (their
    histograms merged by bucket), so the line agrees with the table."""
    total = fleet_summary(session, rows)
    live = sum(1 for row in rows if row.state in LIVE)
    routers = sum(1 for row in rows if row.state == ROUTER_STATE)
    in_front = f"{routers} router{'s' if routers > 1 else ''}; " if routers else ""
    triage = session.fleet.triage
    across = ", ".join(short_key_of(f.rule.id, f.labels) for f in triage.findings) if triage else ""
    down = prometheus_down(session, now)
    second = (
        f"{down}; figures are the last read"
        if down
        else f"across servers: {across or 'no imbalance'}"
    )
    return (
        f" {len(rows) - routers} servers, {live} live  run {number(total.running)}"
        f"  wait {number(total.waiting)}  gen {number(total.generation_tokens_per_s)} tok/s"
        f"  TTFT p50/p99 {seconds(total.ttft_p50_s)}/{seconds(total.ttft_p99_s)}"
        f"\n {in_front}{second}  {mode}"
    )


def short_key_of(rule_id: str, labels: tuple[tuple[str, str], ...]) -> str:
    """B1@host:port - the rule and the instance it names."""
    instance = dict(labels).get("instance")
    return f"{rule_id}@{instance}" if instance else rule_id
