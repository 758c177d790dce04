"""The rule tests as a promtool test file for the exported rules: every expectation a test
makes about an exported rule becomes an `alert_rule_test` whose firing alerts (labels and
rendered annotations) vtop computes from the exported condition, so `promtool test rules`
proves Prometheus fires and stays quiet where vtop does. Where Prometheus does not fire on data
vtop fires on (an `or` branch only vtop can evaluate was dropped, or a range reaches back before
the series starts, where vtop starts it at its first sample) the export says so instead of
expecting an alert Prometheus cannot give; where it would fire on data vtop's test says is
quiet, that is an error."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from vtop.core.frame import Labels
from vtop.core.ops.rule_unittest import TARGET, case_frames
from vtop.core.rules.export import ExportOptions, export_rules
from vtop.core.rules.promql.binary import NAME, EvaluationError
from vtop.core.rules.promql.evaluator import FLEET, Context, evaluate_named
from vtop.core.rules.promql.parser import parse, parse_duration
from vtop.core.rules.records import Record, expand
from vtop.core.rules.rule import Rule
from vtop.core.store.store import INSTANCE, Store

INTERVAL_S = 1.0
"""The rule tests' scrape interval, and the exported group's evaluation interval here."""
RULES_FILE = "vtop.rules.yml"
TESTS_FILE = "vtop.rules_test.yml"
NO_VALUE = ""
"""What Prometheus's templates print for a label the alert does not have."""


@dataclass
class ExportedTests:
    """The rules and their promtool tests, with what could not be carried over."""

    rules: dict[str, Any]
    tests: dict[str, Any]
    stricter: list[str] = field(default_factory=list)
    """Expectations vtop fires on that the exported (stricter) condition cannot."""
    errors: list[str] = field(default_factory=list)
    """Expectations vtop is quiet on that the exported condition would fire on."""
    checked: int = 0


@dataclass(frozen=True)
class _Alert:
    """One exported alerting rule, with its condition expanded for vtop."""

    rule: Rule
    document: dict[str, Any]
    condition: Any


def go_value(value: float) -> str:
    """A float as Go's fmt prints it (%v: shortest digits; an exponent below 1e-4 and from
    1e6 on), as `{{ $value }}` renders in an annotation."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exponent
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        power = point - 1
        return f"{sign}{mantissa}e{'+' if power >= 0 else '-'}{abs(power):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _render(template: str, labels: dict[str, str], value: float) -> str:
    """The two placeholders the exported annotations use."""
    instance = labels.get(INSTANCE, NO_VALUE)
    return template.replace("{{ $labels.instance }}", instance).replace(
        "{{ $value }}", go_value(value)
    )


def _alerts(rules: list[Rule], document: dict[str, Any]) -> list[_Alert]:
    """The exported alerts with their conditions parsed and the exported records expanded."""
    by_id = {rule.id: rule for rule in rules}
    records: dict[str, Record] = {}
    alerts = []
    for item in document["groups"][0]["rules"]:
        expr = expand(parse(item["expr"]), records)
        if "record" in item:
            records[item["record"]] = Record(item["record"], expr, item["expr"], expr)
        else:
            alerts.append(_Alert(by_id[item["labels"]["rule_id"]], item, expr))
    return alerts


def _labels(labels: Labels) -> dict[str, str]:
    """An alert's labels from a result's: no name, and no instance for the test's own server."""
    kept = dict(labels)
    kept.pop(NAME, None)
    if kept.get(INSTANCE) == TARGET:
        kept.pop(INSTANCE)
    return kept


def _active(alert: _Alert, store: Store, when: float) -> dict[Labels, float]:
    """The condition's elements at `when` (label sets as the alert will have them)."""
    try:
        context = Context(store, FLEET, when, from_first_sample=False)
        value = evaluate_named(alert.condition, context)
    except EvaluationError:
        return {}
    if isinstance(value, float):
        return {(): value}
    return {tuple(sorted(_labels(labels).items())): v for labels, v in value.items()}


def _firing(alert: _Alert, store: Store, at: float) -> dict[Labels, float]:
    """Alerts firing at `at` as Prometheus decides: active at every evaluation for `for`."""
    for_s = parse_duration(alert.document["for"]) if "for" in alert.document else 0.0
    ticks = round(at / INTERVAL_S)
    firing = {}
    for labels, value in _active(alert, store, at).items():
        since = ticks
        while since > 0 and labels in _active(alert, store, (since - 1) * INTERVAL_S):
            since -= 1
        if (ticks - since) * INTERVAL_S >= for_s:
            firing[labels] = value
    return firing


def _expected(alert: _Alert, labels: Labels, value: float) -> dict[str, Any]:
    """One exp_alerts entry: the alert's labels and its rendered annotations."""
    own = dict(labels)
    return {
        "exp_labels": {**own, **alert.document["labels"]},
        "exp_annotations": {
            key: _render(text, own, value) for key, text in alert.document["annotations"].items()
        },
    }


def _store(case: dict[str, Any]) -> Store | None:
    """The case's data (evaluations at earlier times read the same rings), or None when vtop's
    ingest would not keep the series as written (a renamed or folded vLLM series, a value it
    refuses: Prometheus would see other data)."""
    frames = case_frames(case, INTERVAL_S)
    store = Store()
    for frame in frames:
        store.ingest(frame)
        if any(store.defects(scrape.target) for scrape in frame.scrapes):
            return None
    written = {
        (sample.series.name, sample.series.labels)
        for frame in frames
        for scrape in frame.scrapes
        for sample in scrape.samples
    }
    kept = {
        (series.name, series.without(frozenset({INSTANCE})))
        for name in {name for name, _ in written}
        for series in store.select(name)
    }
    return store if written <= kept else None


def _case_tests(
    case: dict[str, Any], alerts: list[_Alert], result: ExportedTests, where: str
) -> list[dict[str, Any]]:
    """alert_rule_test entries for one case."""
    if str(case.get("infer", "")).lower() == "true" or case.get("interval", "1s") != "1s":
        return []
    store = _store(case)
    if store is None:
        return []
    tests = []
    for expectation in case["expect"]:
        at = parse_duration(str(expectation["at"]))
        fire, quiet = set(expectation.get("fire") or []), set(expectation.get("quiet") or [])
        for alert in alerts:
            rule = alert.rule
            if rule.id not in fire | quiet:
                continue
            firing = _firing(alert, store, at)
            if rule.id in fire and not firing:
                result.stricter.append(f"{where} at {at:g}s: {rule.id} ({alert.document['alert']})")
            if rule.id in quiet and firing:
                result.errors.append(f"{where} at {at:g}s: {rule.id} would fire in Prometheus")
            result.checked += 1
            tests.append(
                {
                    "eval_time": f"{at:g}s",
                    "alertname": alert.document["alert"],
                    "exp_alerts": [_expected(alert, *item) for item in sorted(firing.items())],
                }
            )
    return tests


def export_tests(rules: list[Rule], tests_dirs: list[Path]) -> ExportedTests:
    """The export for 1 s scrapes and evaluations (the tests' interval; no settings, since
    each test case has its own), and its promtool tests from the test files in `tests_dirs`."""
    document = export_rules(rules, ExportOptions(INTERVAL_S, INTERVAL_S))
    result = ExportedTests(document, {})
    alerts = _alerts(rules, document)
    groups = []
    for path in sorted(p for directory in tests_dirs for p in directory.glob("*.yaml")):
        cases = (yaml.load(path.read_text(), Loader=yaml.BaseLoader) or {}).get("tests") or []
        for case in cases:
            where = f"{path.name} [{case.get('name', '?')}]"
            entries = _case_tests(case, alerts, result, where)
            if entries:
                groups.append(
                    {
                        "name": where,
                        "interval": f"{INTERVAL_S:g}s",
                        "input_series": [
                            {"series": head, "values": str(values)}
                            for head, values in case["series"].items()
                        ],
                        "alert_rule_test": entries,
                    }
                )
    result.tests = {
        "rule_files": [RULES_FILE],
        "evaluation_interval": f"{INTERVAL_S:g}s",
        "tests": groups,
    }
    return result
