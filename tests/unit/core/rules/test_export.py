"""`vtop rules export`: names, records ahead of alerts, settings, moot rules, value rendering."""

from __future__ import annotations

from vtop.core.config.server_config import NUMERIC
from vtop.core.rules.export import ExportOptions, export_rules, per_instance
from vtop.core.rules.loader import load_rules
from vtop.core.rules.promql.parser import parse
from vtop.core.rules.promql.printer import to_text


def exported(**settings: float) -> list[dict[str, object]]:
    document = export_rules(load_rules(), ExportOptions(settings=settings))
    (group,) = document["groups"]
    return list(group["rules"])


def test_records_come_before_the_alerts_that_use_them() -> None:
    rules = exported()
    names = {str(rule["record"]) for rule in rules if "record" in rule}
    assert "engine:request_queue_time_seconds:rate1m" in names
    seen: set[str] = set()
    for rule in rules:
        assert {name for name in names if name in str(rule["expr"])} <= seen
        if "record" in rule:
            seen.add(str(rule["record"]))
    kinds = ["record" in rule for rule in rules]
    assert kinds == sorted(kinds, reverse=True)


def test_windows_widen_to_four_scrapes() -> None:
    document = export_rules(load_rules(), ExportOptions(scrape_interval_s=30.0))
    exprs = " ".join(str(rule["expr"]) for rule in document["groups"][0]["rules"])
    assert "[1m]" not in exprs and "[2m]" in exprs


def test_a_rule_moot_when_others_fire_exports_only_with_them() -> None:
    plain = {rule.get("alert") for rule in exported()}
    assert "VllmRequestsWaitAndNoLimiterIsIdentified" not in plain  # Q0 needs Q2, Q3, ...
    every = exported(**{name: 1.0 for name in NUMERIC})
    alerts = [rule for rule in every if "alert" in rule]
    (q0,) = [rule for rule in alerts if rule["alert"] == "VllmRequestsWaitAndNoLimiterIsIdentified"]
    assert 'unless on (instance) ALERTS{alertstate=~"firing|pending"' in str(q0["expr"])
    assert "VllmMaxNumSeqsIsTheLimiterNotMemory" in str(q0["expr"])
    assert alerts.index(q0) == len(alerts) - 1  # after the alerts it defers to


def test_a_per_server_rule_aggregates_and_matches_per_instance_in_prometheus() -> None:
    written = parse(
        "sum(rate(a[1m])) > 0 and on () (min by (engine) (b) < 1)"
        " and on (engine) sum without (reason) (c) and ignoring (x) d"
    )
    assert to_text(per_instance(written)) == to_text(
        parse(
            "sum by (instance) (rate(a[1m])) > 0 and on (instance)"
            " (min by (engine, instance) (b) < 1)"
            " and on (engine, instance) sum without (reason) (c) and ignoring (x) d"
        )
    )


def test_only_fleet_rules_compare_servers_in_the_export() -> None:
    alerts = {str(rule.get("alert")): str(rule["expr"]) for rule in exported() if "alert" in rule}
    uneven_engines = alerts["VllmDataParallelEnginesUnevenlyLoaded"]  # per server
    assert "min by (instance)" in uneven_engines and "count by (instance)" in uneven_engines
    assert "min by (model_name) (" in alerts["VllmUnevenLoadAcrossReplicas"]  # across servers
