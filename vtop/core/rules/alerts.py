"""Findings from the alerts Prometheus fires for the exported rules (`vtop rules export`).

Over a large fleet Prometheus evaluates the triage itself; vtop then reads its `ALERTS` series
(one per firing alert, labelled with the vtop rule id) instead of every server's raw series,
and shows them as findings of the same rules, triaged in the same order.
"""

from __future__ import annotations

from vtop.core.catalog import ALERTS
from vtop.core.rules.engine import Finding, Triage, triage
from vtop.core.rules.rule import Rule
from vtop.core.store.store import Store

ALERT_LABELS = frozenset({"alertname", "alertstate", "rule_id", "severity", "phase", "instance"})
"""Labels Prometheus or the export adds; the rest (e.g. `engine`) are the finding's own."""


def alert_triage(store: Store, target: str, now: float, rules: list[Rule]) -> Triage:
    """The target's firing vtop alerts at `now` as findings of their rules, triaged."""
    by_id = {rule.id: rule for rule in rules}
    findings: list[Finding] = []
    for series in store.select(ALERTS, {"instance": target, "alertstate": "firing"}):
        rule = by_id.get(series.label("rule_id") or "")
        if rule is None or not store.latest(series, now):
            continue
        labels = tuple((k, v) for k, v in series.labels if k not in ALERT_LABELS)
        alertname = series.label("alertname")
        text = f"Prometheus fires {alertname}: {rule.title} (its evidence is in Prometheus)"
        findings.append(Finding(rule, labels, now, {}, text, ()))
    return Triage(tuple(triage(findings)), ())
