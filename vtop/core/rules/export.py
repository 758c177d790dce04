"""vtop's rules as Prometheus alerting rules: the records they use as recording rules in the
same group ahead of them (evaluated first, as vtop evaluates them), alert names, labels and
annotations by Prometheus's conventions, windows widened for the scrape interval, and the
`vtop:` settings an operator gives substituted as numbers."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vtop.core.rules.promql.ast import (
    Aggregate,
    Binary,
    Call,
    Expr,
    Negate,
    Number,
    Selector,
    map_selectors,
    selectors,
)
from vtop.core.rules.promql.parser import parse
from vtop.core.rules.promql.printer import VTOP_MADE_PREFIXES, for_prometheus, is_local, to_text
from vtop.core.rules.records import Record, closure
from vtop.core.rules.rule import Rule

INSTANCE = "instance"
SAMPLES_PER_WINDOW = 4
"""A window holds at least four scrapes, so rate() always has two samples (Prometheus's advice)."""
GROUP = "vtop-triage"


@dataclass(frozen=True)
class ExportOptions:
    """How the export adapts the rules to one Prometheus."""

    scrape_interval_s: float = 15.0
    evaluation_interval_s: float = 15.0
    settings: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """`vtop:` settings (without the prefix) that hold for every server this Prometheus sees."""
    runbook_base: str | None = None
    """Where the operator publishes vtop's rules reference (docs/rules.md): each alert's
    runbook_url is its rule's anchor there; without it, alerts carry no runbook_url."""


def runbook_url(base: str, rule: Rule) -> str:
    """The rule's anchor in the rules reference: `BASE#m1` (the page has a heading per id)."""
    return f"{base.split('#', 1)[0]}#{rule.id.lower()}"


def alert_name(rule: Rule) -> str:
    """VllmPreemptionStorm: the title's words before any parenthesis, CamelCase, prefixed."""
    words = re.findall(r"[A-Za-z0-9]+", rule.title.split("(")[0])
    return "Vllm" + "".join(word[:1].upper() + word[1:] for word in words)


def adapted(expr: Expr, options: ExportOptions) -> Expr:
    """Settings given as numbers; windows no shorter than four scrape intervals."""
    widest = SAMPLES_PER_WINDOW * options.scrape_interval_s

    def replace(selector: Selector) -> Expr:
        setting = selector.name.removeprefix("vtop:")
        if selector.name.startswith("vtop:") and setting in options.settings:
            return Number(float(options.settings[setting]))
        if selector.range_s is not None and selector.range_s < widest:
            return dataclasses.replace(selector, range_s=widest)
        return selector

    return map_selectors(expr, replace)


def per_instance(expr: Expr) -> Expr:
    """A per-server expression as Prometheus must read it over a fleet: vtop evaluates a
    target's rules on that server's series alone, Prometheus on every server's at once, so
    each aggregation keeps `instance` and each `on (...)` matches on it too."""
    if isinstance(expr, Aggregate):
        inner = per_instance(expr.expr)
        if expr.without or INSTANCE in expr.labels:
            return dataclasses.replace(expr, expr=inner)
        return dataclasses.replace(expr, expr=inner, labels=(*expr.labels, INSTANCE))
    if isinstance(expr, Binary):
        left, right = per_instance(expr.left), per_instance(expr.right)
        on = expr.on
        if on is not None and INSTANCE not in on:
            on = (*on, INSTANCE)
        return dataclasses.replace(expr, left=left, right=right, on=on)
    if isinstance(expr, Call):
        return dataclasses.replace(expr, args=tuple(map(per_instance, expr.args)))
    if isinstance(expr, Negate):
        return dataclasses.replace(expr, expr=per_instance(expr.expr))
    return expr


def _records(rules: list[Rule], options: ExportOptions) -> dict[str, Expr]:
    """Every record the rules name, adapted and per server, in definition order."""
    found: dict[str, Record] = {}
    for rule in rules:
        for record in rule.records:
            found.setdefault(record.name, record)
    return {name: per_instance(adapted(record.expr, options)) for name, record in found.items()}


def _local_records(records: dict[str, Expr]) -> frozenset[str]:
    """Records that read data only vtop has, directly or through other records."""
    local: set[str] = set()
    for name, expr in records.items():
        if is_local(expr, frozenset(local)):
            local.add(name)
    return frozenset(local)


def _alert(rule: Rule, expr: Expr, name: str, options: ExportOptions) -> dict[str, Any]:
    """One alerting rule."""
    for_s = max(rule.for_s, options.evaluation_interval_s) if rule.for_s else 0.0
    return {
        "alert": name,
        "expr": to_text(expr),
        **({"for": f"{int(for_s)}s"} if for_s else {}),
        "labels": {"severity": rule.severity, "phase": rule.phase, "rule_id": rule.id},
        "annotations": {
            "summary": f"{rule.title} on {{{{ $labels.instance }}}}",
            "description": (
                f"vtop rule {rule.id} ({rule.phase} phase) holds on {{{{ $labels.instance }}}}"
                " with value {{ $value }}. Run `vtop diagnose` against this server for the"
                " evidence and the flag change."
            ),
            **(
                {"runbook_url": runbook_url(options.runbook_base, rule)}
                if options.runbook_base
                else {}
            ),
        },
    }


def export_rules(rules: list[Rule], options: ExportOptions | None = None) -> dict[str, Any]:
    """The rules Prometheus can evaluate, with the records they use ahead of them, as one
    rule group (records in the same group are evaluated first, at the same instant)."""
    options = options or ExportOptions()
    records = _records(rules, options)
    local = _local_records(records)
    conditions = _conditions(rules, options, local)
    names = _names([rule for rule in rules if rule.id in conditions])
    alerts, used = [], set()
    for rule in sorted(rules, key=lambda rule: bool(rule.unless_found)):
        condition = conditions.get(rule.id)
        if condition is None:
            continue
        deferred_to = [names[other] for other in rule.unless_found if other in names]
        if deferred_to:
            condition = _unless_firing(condition, deferred_to)
        used.update(closure(condition, records))
        alerts.append(_alert(rule, condition, names[rule.id], options))
    recorded = [
        {"record": name, "expr": to_text(expr)} for name, expr in records.items() if name in used
    ]
    interval = f"{int(options.evaluation_interval_s)}s"
    return {"groups": [{"name": GROUP, "interval": interval, "rules": recorded + alerts}]}


def _conditions(
    rules: list[Rule], options: ExportOptions, local: frozenset[str]
) -> dict[str, Expr]:
    """The exportable condition of each rule by id. A rule that is moot when others fire
    (`unless_found`) exports only with all of them, or it would alarm where vtop says the
    cause is another finding; except those reading series only vtop makes (NVML, canaries,
    LoRA demand), which no Prometheus can evaluate: there the alert defers to the rest."""
    conditions = {}
    for rule in rules:
        written = adapted(rule.written_expr or rule.expr, options)
        if rule.scope == "target":
            written = per_instance(written)
        exportable = for_prometheus(written, local)
        if exportable is not None:
            conditions[rule.id] = exportable
    return {
        rule_id: condition
        for rule_id, condition in conditions.items()
        if all(
            other in conditions or _reads_vtop_made(_by_id(rules)[other])
            for other in _by_id(rules)[rule_id].unless_found
        )
    }


def _reads_vtop_made(rule: Rule) -> bool:
    """True when the rule's condition reads a series vtop makes itself."""
    return any(s.name.startswith(VTOP_MADE_PREFIXES) for s in selectors(rule.expr))


def _by_id(rules: list[Rule]) -> dict[str, Rule]:
    return {rule.id: rule for rule in rules}


def _names(rules: list[Rule]) -> dict[str, str]:
    """A unique alert name per rule id."""
    names: dict[str, str] = {}
    for rule in rules:
        name = alert_name(rule)
        names[rule.id] = name + rule.id.replace("-", "") if name in names.values() else name
    return names


def _unless_firing(condition: Expr, alerts: list[str]) -> Expr:
    """The condition unless one of `alerts` fires or is pending for the same server (they come
    earlier in the group, so their ALERTS series of this evaluation are already written). A
    pending one counts: vtop reports the specific rule whose condition holds, not yet for its
    `for:`, in place of the one that defers to it (Q0, "no limiter identified"), and an alert
    that fired where vtop names the limiter would contradict it."""
    names = "|".join(sorted(alerts))
    firing = parse(f'ALERTS{{alertstate=~"firing|pending", alertname=~"{names}"}}')
    return Binary("unless", condition, firing, on=(INSTANCE,))
