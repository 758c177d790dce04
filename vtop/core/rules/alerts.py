"""Findings from the alerts Prometheus fires for the exported rules (`vtop rules export`).

Over a large fleet Prometheus evaluates the triage itself; vtop then reads its `ALERTS` series
(one per firing alert, labelled with the vtop rule id) instead of every server's raw series,
and shows them as findings of the same rules, triaged in the same order.
"""

from __future__ import annotations

import dataclasses

from vtop.core.catalog import ALERTS, ALERTS_FOR_STATE
from vtop.core.frame import Labels, Series
from vtop.core.rules.engine import Finding, Triage, triage
from vtop.core.rules.promql.printer import VTOP_MADE_PREFIXES, for_prometheus
from vtop.core.rules.rule import Rule
from vtop.core.store.store import Store

JUDGED_LABEL = "vtop_judged"
"""On the alerts vtop makes of the conditions Prometheus evaluated for it (rules/judge.py)."""
ALERT_LABELS = frozenset({"alertname", "alertstate", "rule_id", "severity", "phase", JUDGED_LABEL})
"""Labels Prometheus or the export adds; the rest (e.g. `engine`) are the finding's own."""
FIRING = {"alertstate": "firing"}


def alert_triage(store: Store, target: str, now: float, rules: list[Rule]) -> Triage:
    """The target's firing alerts of per-server rules at `now`, as their findings, triaged."""
    local = [rule for rule in rules if rule.scope == "target"]
    series = store.select(ALERTS, {"instance": target, **FIRING})
    return _triaged(store, series, now, local, drop=ALERT_LABELS | {"instance"})


def fleet_alert_triage(store: Store, now: float, rules: list[Rule]) -> Triage:
    """The firing alerts of fleet-scope rules (e.g. B1), each about the instance it names."""
    fleet = [rule for rule in rules if rule.scope == "fleet"]
    return _triaged(store, store.select(ALERTS, FIRING), now, fleet, drop=ALERT_LABELS)


def _triaged(
    store: Store, series: list[Series], now: float, rules: list[Rule], drop: frozenset[str]
) -> Triage:
    """Findings of the alerts that are current and name one of `rules`."""
    by_id = {rule.id: rule for rule in rules}
    findings: list[Finding] = []
    for alert in series:
        rule = by_id.get(alert.label("rule_id") or "")
        if rule is None or not store.latest(alert, now):
            continue
        labels: Labels = tuple((k, v) for k, v in alert.labels if k not in drop)
        since = _since(store, alert, now)
        fires = f"Prometheus fires {alert.label('alertname')}"
        text = (
            f"judged in Prometheus: {rule.title} (its evidence: `d` on this server in vtop)"
            if alert.label(JUDGED_LABEL)
            else f"{fires}: {rule.title} (the evidence is there)"
        )
        findings.append(Finding(rule, labels, since, {}, text, ()))
    return Triage(tuple(triage(findings)), ())


def _since(store: Store, alert: Series, now: float) -> float:
    """When the alert's condition began to hold: its ALERTS_FOR_STATE value, else `now`."""
    state = tuple((k, v) for k, v in alert.labels if k != "alertstate")
    for series in store.select(ALERTS_FOR_STATE, dict(state)):
        if series.labels == state:
            value = store.latest(series, now)
            if value is not None and value <= now:
                return value
    return now


def vtop_made_rules(rules: list[Rule]) -> list[Rule]:
    """The per-server rules no Prometheus can evaluate any branch of: each reads a series vtop
    makes (the GPU rules read `nvml:`, joined from dcgm-exporter's series). With the findings
    from Prometheus, vtop still evaluates these itself; a rule with a branch Prometheus can
    evaluate (F5) is judged there, never twice."""
    return [
        rule
        for rule in rules
        if rule.scope == "target" and for_prometheus(rule.expr, prefixes=VTOP_MADE_PREFIXES) is None
    ]


def merged(from_prometheus: Triage, here: Triage) -> Triage:
    """The findings Prometheus gave and the ones vtop found itself, triaged as one (each
    finding's symptoms taken apart first, so a cause in one explains a symptom in the other)."""
    flat = [
        dataclasses.replace(finding, symptoms=())
        for part in (from_prometheus, here)
        for found in part.findings
        for finding in (found, *found.symptoms)
    ]
    return Triage(
        tuple(triage(flat)),
        here.unchecked,
        (*from_prometheus.errors, *here.errors),
        (*from_prometheus.pending, *here.pending),
    )
