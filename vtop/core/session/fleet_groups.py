"""The fleet by group: the labels a Kubernetes deployment gives its replicas (namespace, model),
each group rolled up from its replicas and pointing at its worst one.

Roll-ups are the merged distribution, never averages of per-replica figures: requests and
rates add up, TTFT quantiles come from the replicas' buckets added together, and the KV
cache's use is weighted by each replica's capacity (a 10% full 80 GB replica and a 90% full
24 GB one are not 50% full together).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

from vtop.core.session.facts import LIVE, label_values
from vtop.core.session.fleet import FleetRow, added_up, sort_rows
from vtop.core.session.session import Session
from vtop.core.status import Status
from vtop.core.store.summary import TargetSummary

GROUP_KEYS = ("server", "namespace", "model")
"""What the fleet table lists: each server, or a row per namespace or per model."""
NO_VALUE = "(none)"
"""The group of replicas without the label (a direct scrape has no namespace)."""


def group_of(session: Session, row: FleetRow, key: str) -> str:
    """The row's group under `key`: its namespace (its series' target label) or its model."""
    if key == "model":
        return row.model if row.model and row.model != "?" else NO_VALUE
    values = label_values(session.store, row.target, key)
    return ",".join(values) if values else NO_VALUE


def group_rows(session: Session, rows: list[FleetRow], key: str) -> list[FleetRow]:
    """A row per group of `key`, rolled up from its replicas; Enter on it opens the worst."""
    if key == "server":
        return rows
    groups: dict[str, list[FleetRow]] = {}
    for row in rows:
        groups.setdefault(group_of(session, row, key), []).append(row)
    return [_group_row(session, key, value, members) for value, members in groups.items()]


def _group_row(session: Session, key: str, value: str, members: list[FleetRow]) -> FleetRow:
    """One group: its replicas by state, the roll-up, and how many replicas are in trouble
    (critical, warning or without a verdict) before the worst one's finding (`1/4: M1 ...`)."""
    worst = sort_rows(members, "finding", False)[0]
    states = Counter(row.state for row in members)
    by_state = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
    troubled = [row for row in members if row.severity.troubled]
    finding = f"{len(troubled)}/{len(members)}: {worst.finding}" if troubled else ""
    models = sorted({row.model for row in members})
    group = FleetRow(
        f"{key} {value} ({len(members)})",
        by_state,
        ",".join(models) if key != "model" else value,
        sum(row.engines for row in members),
        rolled_up(session, members, f"{key} {value}"),
        finding,
        worst.severity if troubled else Status.OK,
    )
    return replace(group, opens=worst.target)


def rolled_up(session: Session, rows: list[FleetRow], name: str) -> TargetSummary | None:
    """The replicas' figures as one (`added_up`), the KV use weighted by capacity."""
    if not any(row.state in LIVE and row.summary is not None for row in rows):
        return None
    return added_up(session, rows, name, lambda live: _weighted_kv(session, live))


def _weighted_kv(session: Session, rows: list[FleetRow]) -> float | None:
    """KV use over the group's whole cache: each replica's use weighted by its capacity in
    tokens (vLLM reports it in cache_config_info); the replicas' plain mean where one's
    capacity is unknown."""
    pairs = []
    for row in rows:
        usage = row.summary.kv_usage if row.summary is not None else None
        if usage is not None:
            capacity = session.targets[row.target].config.number("kv_capacity_tokens")
            pairs.append((usage, capacity))
    if not pairs:
        return None
    if any(capacity is None or capacity <= 0 for _, capacity in pairs):
        return math.fsum(usage for usage, _ in pairs) / len(pairs)
    weight = math.fsum(capacity for _, capacity in pairs if capacity is not None)
    return math.fsum(usage * (capacity or 0.0) for usage, capacity in pairs) / weight
