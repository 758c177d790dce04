"""The triage evaluated by Prometheus: each rule's condition for the whole fleet in one query.

Over a large fleet pulling every server's raw series costs more than the triage itself (69 KB
and 14 ms of CPU per server per tick). The rules are PromQL, so the engine that holds the data
can evaluate them: per group of servers sharing their settings, every per-server rule's
condition (its records inlined, aggregations kept per instance, the group's `vtop:` settings as
numbers) is tagged with its rule id and joined with `or` into one query; the fleet rules into
another. What Prometheus answers is which condition holds for which server; how long it has
held, and which finding gives way to which (`for:`, `unless_found`, `explains`), is tracked
here across evaluations exactly as the engine does (engine.py), so the findings are the ones a
direct scrape's triage names. The evidence and flag changes are not computed here: they need
the raw series of that server (a drill-down).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from vtop.core.frame import Labels
from vtop.core.rules.alerts import JUDGED_LABEL
from vtop.core.rules.export import ExportOptions, adapted, alert_name, per_instance
from vtop.core.rules.promql.ast import Aggregate, Binary, Call, Expr, Negate, Number, selectors
from vtop.core.rules.promql.binary import ARITHMETIC, COMPARISON
from vtop.core.rules.promql.printer import for_prometheus, to_text
from vtop.core.rules.rule import Rule

RULE_LABEL = "vtop_rule"
"""The label each condition's answer carries: which rule holds."""
INSTANCE = "instance"


@dataclass(frozen=True)
class Held:
    """A condition Prometheus says holds now: for which server, which rule, which labels."""

    instance: str
    rule_id: str
    labels: Labels


@dataclass(frozen=True)
class Fired:
    """A finding of a rule judged in Prometheus: held long enough, not given way."""

    instance: str
    rule: Rule
    labels: Labels
    since: float


class FleetJudge:
    """The judged queries of a rule set, and the holds tracked across evaluations."""

    def __init__(self, rules: list[Rule], scrape_interval_s: float = 15.0) -> None:
        self.rules = {rule.id: rule for rule in rules}
        self.scrape_interval_s = scrape_interval_s
        self.hold_cap_s: float | None = None
        """As the engine's: a one-shot window shorter than a rule's `for:` judges it sooner."""
        self._queries: dict[frozenset[tuple[str, float]], tuple[str | None, frozenset[str]]] = {}
        self._holds = Holds(self)

    def target_query(self, settings: Mapping[str, float]) -> str | None:
        """Every per-server rule's condition Prometheus can evaluate with these settings,
        tagged by rule id and joined with `or` (None: none can be)."""
        return self._target(settings)[0]

    def judged_ids(self, settings: Mapping[str, float]) -> frozenset[str]:
        """The per-server rules judged in Prometheus with these settings (the rest read a
        setting nobody knows, or a series only vtop makes: GPUs, canaries, spans)."""
        return self._target(settings)[1]

    def _target(self, settings: Mapping[str, float]) -> tuple[str | None, frozenset[str]]:
        key = frozenset(settings.items())
        if key not in self._queries:
            options = ExportOptions(self.scrape_interval_s, self.scrape_interval_s, settings)
            conditions = {
                rule.id: judged_condition(rule, options, per_server=True)
                for rule in self.rules.values()
                if rule.scope == "target"
            }
            judged = {rule_id: c for rule_id, c in conditions.items() if c is not None}
            queried = {rule_id: c for rule_id, c in judged.items() if not isinstance(c, bool)}
            self._queries[key] = (joined(queried), frozenset(judged))
        return self._queries[key]

    def fleet_query(self) -> str | None:
        """The fleet rules' conditions (comparisons across servers), tagged and joined."""
        options = ExportOptions(self.scrape_interval_s, self.scrape_interval_s, {})
        conditions = {
            rule.id: judged_condition(rule, options, per_server=False)
            for rule in self.rules.values()
            if rule.scope == "fleet"
        }
        return joined(
            {
                rule_id: c
                for rule_id, c in conditions.items()
                if c is not None and not isinstance(c, bool)
            }
        )

    def alert_labels(self, rule: Rule) -> dict[str, str]:
        """The labels of the ALERTS series Prometheus would write for this rule's alert."""
        return {
            "alertname": alert_name(rule),
            "alertstate": "firing",
            "rule_id": rule.id,
            "severity": rule.severity,
            "phase": rule.phase,
            JUDGED_LABEL: "1",
        }

    def fired(self, now: float, held: Iterable[Held]) -> list[Fired]:
        """What holds at `now` (Prometheus's answers), as findings: held for each rule's
        `for:`, with the findings that give way to others removed (engine.py's order)."""
        return self._holds.update(now, held)

    def alerts(
        self, now: float, answers: Iterable[Mapping[str, str]]
    ) -> list[tuple[dict[str, str], float]]:
        """The labels of the ALERTS series Prometheus would write at `now` for what its
        answers say holds (the answer's own labels, instance and job kept, the alert's), each
        with the time its condition began to hold."""
        held = [h for labels in answers if (h := held_from(labels)) is not None]
        jobs = {labels.get(INSTANCE, ""): labels.get("job") for labels in answers}
        found = []
        for fired in self.fired(now, held):
            job = jobs.get(fired.instance)
            own = {**dict(fired.labels), INSTANCE: fired.instance}
            labels = {**own, **({"job": job} if job else {}), **self.alert_labels(fired.rule)}
            found.append((labels, fired.since))
        return found


def judged_condition(rule: Rule, options: ExportOptions, per_server: bool) -> Expr | bool | None:
    """The rule's condition as Prometheus evaluates it over the fleet (records inlined, the
    settings as numbers, comparisons of settings alone decided here), without the `or`
    branches only vtop can read; False when a comparison of settings rules it out; None when
    it cannot be judged there (it reads a setting nobody knows or a series only vtop makes)."""
    written = adapted(rule.expr, options)
    if per_server:
        written = per_instance(written)
    condition = for_prometheus(written)
    if condition is None:
        return None
    decided = folded(condition)
    if decided is False:
        return False
    if decided is None or isinstance(decided, bool) or not selectors(decided):
        return None
    return decided


def folded(expr: Expr) -> Expr | bool | None:
    """The expression with comparisons of numbers decided (settings given as numbers leave
    `1 == 1` where vtop compares a setting; PromQL refuses a comparison of scalars without
    `bool`): True where one holds and is the whole condition's side of an `and`, False where
    one fails (the condition cannot hold), None where a constant is left that PromQL could not
    take (the rule is then not judged in Prometheus)."""
    if isinstance(expr, Binary):
        return _folded_binary(expr)
    if isinstance(expr, Call):
        args = [folded(arg) for arg in expr.args]
        if not all(_is_expr(arg) for arg in args):
            return None
        return dataclasses.replace(expr, args=tuple(args))  # type: ignore[arg-type]
    if isinstance(expr, Aggregate | Negate):
        inner = folded(expr.expr)
        return dataclasses.replace(expr, expr=inner) if _is_expr(inner) else None  # type: ignore[arg-type]
    return expr


def _folded_binary(expr: Binary) -> Expr | bool | None:
    if expr.op in COMPARISON and not expr.return_bool and not selectors(expr):
        first, second = _constant(expr.left), _constant(expr.right)
        if first is None or second is None:
            return None
        return COMPARISON[expr.op](first, second)
    left, right = folded(expr.left), folded(expr.right)
    if expr.op == "and":
        if left is False or right is False:
            return False
        if left is True:
            return right
        if right is True:
            return left
    elif expr.op == "or":
        if left is False:
            return right
        if right is False:
            return left
    elif expr.op == "unless":
        if left is False:
            return False
        if right is False:
            return left
    if not (_is_expr(left) and _is_expr(right)):
        return None
    return dataclasses.replace(expr, left=left, right=right)  # type: ignore[arg-type]


def _is_expr(value: Expr | bool | None) -> bool:
    return value is not None and not isinstance(value, bool)


def _constant(expr: Expr) -> float | None:
    """The value of an expression of numbers alone (None: not only numbers and + - * /)."""
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, Negate):
        inner = _constant(expr.expr)
        return None if inner is None else -inner
    if isinstance(expr, Binary) and expr.op in ARITHMETIC:
        left, right = _constant(expr.left), _constant(expr.right)
        if left is None or right is None:
            return None
        return float(ARITHMETIC[expr.op](left, right))
    return None


def joined(tagged: Mapping[str, Expr]) -> str | None:
    """`label_replace(C1, "vtop_rule", "M1", "", "") or ...`: one answer, every condition
    (distinct by their tag, so `or` drops none)."""
    parts = [
        f'label_replace({to_text(condition)}, "{RULE_LABEL}", "{rule_id}", "", "")'
        for rule_id, condition in tagged.items()
    ]
    return " or ".join(parts) if parts else None


@dataclass
class Holds:
    """Since when each (server, rule, labels) has held, and what that makes a finding."""

    judge: FleetJudge
    since: dict[tuple[str, str, Labels], float] = field(default_factory=dict)

    def update(self, now: float, held: Iterable[Held]) -> list[Fired]:
        """Conditions holding now, with their start kept from earlier evaluations."""
        current = {(h.instance, h.rule_id, h.labels) for h in held if h.rule_id in self.judge.rules}
        self.since = {key: self.since.get(key, now) for key in current}
        by_instance: dict[str, list[tuple[str, Labels, float]]] = {}
        for (instance, rule_id, labels), since in self.since.items():
            by_instance.setdefault(instance, []).append((rule_id, labels, since))
        found: list[Fired] = []
        for instance, holding in sorted(by_instance.items()):
            found += self._findings(instance, holding, now)
        return found

    def _needed_s(self, rule: Rule) -> float:
        cap = self.judge.hold_cap_s
        return rule.for_s if cap is None else min(rule.for_s, cap)

    def _findings(
        self, instance: str, holding: list[tuple[str, Labels, float]], now: float
    ) -> list[Fired]:
        """One server's: due (held for `for:`) and pending split, then the engine's order: a
        fallback gives way to a rule it defers to that is pending (promoted), a symptom's cause
        pending is promoted, and a finding deferring to one that fired is dropped."""
        rules = self.judge.rules
        due = [(rules[r], labels, s) for r, labels, s in holding if now - s >= self._needed(r)]
        pending = [(rules[r], labels, s) for r, labels, s in holding if now - s < self._needed(r)]
        fired_ids = {rule.id for rule, _, _ in due}
        kept: list[tuple[Rule, Labels, float]] = []
        promoted: dict[tuple[str, Labels], tuple[Rule, Labels, float]] = {}
        for rule, labels, since in due:
            waiting_on = [p for p in pending if p[0].id in rule.unless_found]
            if waiting_on and not fired_ids.intersection(rule.unless_found):
                promoted.update({(p[0].id, p[1]): p for p in waiting_on})
                continue
            kept.append((rule, labels, since))
            causes = [p for p in pending if rule.id in p[0].explains and p[0].severity != "info"]
            promoted.update({(p[0].id, p[1]): p for p in causes})
        kept += promoted.values()
        fired_ids = {rule.id for rule, _, _ in kept}
        return [
            Fired(instance, rule, labels, since)
            for rule, labels, since in kept
            if not fired_ids.intersection(rule.unless_found)
        ]

    def _needed(self, rule_id: str) -> float:
        return self._needed_s(self.judge.rules[rule_id])


NOT_OWN = frozenset({RULE_LABEL, INSTANCE, "job", "__name__"})
"""Labels of an answer that are not the finding's own: the tag, the target's, the name."""


def held_from(labels: Mapping[str, str]) -> Held | None:
    """A Prometheus answer's labels as what holds (None: not a judged condition's answer)."""
    rule_id = labels.get(RULE_LABEL)
    if rule_id is None:
        return None
    own = tuple(sorted((k, v) for k, v in labels.items() if k not in NOT_OWN))
    return Held(labels.get(INSTANCE, ""), rule_id, own)


__all__ = [
    "RULE_LABEL",
    "Fired",
    "FleetJudge",
    "Held",
    "Holds",
    "held_from",
    "joined",
    "judged_condition",
]
