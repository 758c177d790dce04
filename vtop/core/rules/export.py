"""vtop's rules as Prometheus alerting rules (those that need no vtop-only data)."""

from __future__ import annotations

from typing import Any

from vtop.core.rules.loader import Rule


def export_rules(rules: list[Rule]) -> dict[str, Any]:
    """Rules that use only real vLLM metrics, as a Prometheus alerting-rules document."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for rule in rules:
        expr = rule.prometheus_expr()
        if expr is None:
            continue
        groups.setdefault(rule.phase, []).append(
            {
                "alert": "vtop_" + rule.id.replace("-", "_"),
                "expr": expr,
                "for": f"{int(rule.for_s)}s",
                "labels": {"severity": rule.severity, "phase": rule.phase},
                "annotations": {"summary": rule.title, "source": rule.source or rule.path},
            }
        )
    return {
        "groups": [{"name": f"vtop-{phase}", "rules": items} for phase, items in groups.items()]
    }
