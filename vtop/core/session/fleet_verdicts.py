"""The fleet's diagnosis by group: for each namespace and each model its replicas, their
verdicts counted, their requests added up, and the worst replica with what it has. The first
lines of a thousand-replica report, before the replicas one by one (the dashboard's grouped
table is fleet_groups)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from vtop.core.rules.engine import Triage
from vtop.core.session.facts import label_values, model_names
from vtop.core.session.fleet_groups import NO_VALUE
from vtop.core.status import Status
from vtop.core.store.store import Store
from vtop.core.store.summary import TargetSummary

GROUPED_BY: dict[str, Callable[[Store, str], Sequence[str]]] = {
    "namespace": lambda store, target: label_values(store, target, "namespace"),
    "model": model_names,
}
"""What the report groups by, and how a replica's group is read (models by served name)."""


class Judged(Protocol):
    """What the groups read of a replica's diagnosis (`session.diagnose.Diagnosis`)."""

    @property
    def target(self) -> str: ...
    @property
    def verdict(self) -> Status: ...
    @property
    def summary(self) -> TargetSummary | None: ...
    @property
    def triage(self) -> Triage | None: ...
    @property
    def reason(self) -> str | None: ...


J = TypeVar("J", bound=Judged)


def worst_first(servers: Sequence[J]) -> list[J]:
    """Servers by verdict, worst first (a server that could not be diagnosed before the
    healthy ones), then by name: the order of every fleet report and of each group."""
    return sorted(servers, key=lambda d: (d.verdict.rank, d.target))


@dataclass(frozen=True)
class GroupVerdict:
    """One group of replicas as the fleet's diagnosis reads it."""

    key: str
    value: str
    replicas: int
    verdicts: tuple[tuple[str, int], ...]
    """(verdict, replicas), the worst verdict first."""
    running: float | None
    waiting: float | None
    """Summed over the replicas whose figure is known (None: no replica's is)."""
    worst: str
    worst_says: str
    """The worst replica's primary finding (`M1 preemption storm ...`) or why it has none."""


def group_verdicts(store: Store, servers: Sequence[Judged]) -> list[GroupVerdict]:
    """Each namespace's and each model's group, the groups with the worst replicas first; a
    key is left out when no replica carries its label."""
    groups: list[GroupVerdict] = []
    for key, names_of in GROUPED_BY.items():
        members: dict[str, list[Judged]] = {}
        for server in servers:
            value = ",".join(names_of(store, server.target)) or NO_VALUE
            members.setdefault(value, []).append(server)
        if set(members) == {NO_VALUE}:
            continue
        found = [_group(key, value, replicas) for value, replicas in members.items()]
        groups += sorted(found, key=lambda g: (Status(g.verdicts[0][0]).rank, g.key, g.value))
    return groups


def _group(key: str, value: str, replicas: list[Judged]) -> GroupVerdict:
    counted = Counter(d.verdict for d in replicas)
    verdicts = tuple(
        (status.value, counted[status]) for status in sorted(counted, key=lambda s: s.rank)
    )
    worst = worst_first(replicas)[0]
    return GroupVerdict(
        key,
        value,
        len(replicas),
        verdicts,
        _sum([d.summary.running if d.summary else None for d in replicas]),
        _sum([d.summary.waiting if d.summary else None for d in replicas]),
        worst.target,
        _says(worst),
    )


def _says(diagnosis: Judged) -> str:
    """The replica's primary finding, or why it has no verdict, or that it has none."""
    primary = diagnosis.triage.primary if diagnosis.triage else None
    if primary is not None:
        return f"{primary.rule.id} {primary.rule.title}"
    return diagnosis.reason or "no finding"


def _sum(figures: list[float | None]) -> float | None:
    known = [figure for figure in figures if figure is not None]
    return sum(known) if known else None
