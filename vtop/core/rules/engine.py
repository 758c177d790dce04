"""Evaluate rules over the store and triage the findings: queue -> memory -> compute.

The engine is stateful only for `for:` durations (when each condition started holding), like
Prometheus alerting; everything else is a function of the store at `now`.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping
from dataclasses import dataclass, field

from vtop.core.config.server_config import FLAG_NAMES, HOW_TO_KNOW
from vtop.core.frame import Labels
from vtop.core.rules.promql.ast import Expr
from vtop.core.rules.promql.evaluator import (
    FLEET,
    Context,
    EvaluationError,
    Picks,
    UnknownValueError,
    evaluate,
)
from vtop.core.rules.rule import PHASES, Rule, Suggestion
from vtop.core.status import Status, worst_status
from vtop.core.store.store import Store

DEBOUNCE_MAX_S = 10.0
"""The longest `for:` that only debounces a flapping condition (see `Engine.hold_cap_s`)."""
PHASE_ORDER = {phase: index for index, phase in enumerate(PHASES)}


@dataclass(frozen=True)
class ProposedChange:
    """A suggestion with its values computed from the live numbers."""

    flag: str
    current: float | None
    proposed: float | str | None
    why: str
    effect: str
    unknown: tuple[str, ...] = ()

    def as_flag(self) -> str | None:
        """The literal `vllm serve` argument, None when the value could not be computed."""
        if isinstance(self.proposed, str):
            return self.proposed
        if self.proposed is None:
            return None
        return f"{self.flag} {_number_text(self.proposed)}"

    def argument(self) -> list[str] | None:
        """The change as `vllm serve` argv items (the flag, then its value if it takes one);
        None when its value could not be computed or when it is advice in words (an nginx
        setting, "(remove --enforce-eager)"), which no restart can apply."""
        text = self.as_flag()
        words = None if text is None else text.split()
        if not words or words[0] != self.flag or len(words) > 2:
            return None
        return words


@dataclass(frozen=True)
class Finding:
    """A rule that holds for one label set (e.g. one engine)."""

    rule: Rule
    labels: Labels
    since: float
    evidence: dict[str, float | None]
    diagnosis: str
    changes: tuple[ProposedChange, ...]
    symptoms: tuple[Finding, ...] = ()

    @property
    def key(self) -> str:
        """Rule id plus labels, e.g. M1{engine="0"}."""
        inner = ",".join(f'{k}="{v}"' for k, v in self.labels)
        return f"{self.rule.id}{{{inner}}}" if inner else self.rule.id


@dataclass(frozen=True)
class Unchecked:
    """A rule that could not be evaluated, and what would let it run."""

    rule: Rule
    missing: tuple[str, ...]
    how: str


@dataclass(frozen=True)
class Pending:
    """A rule whose condition holds but not yet for its `for:` (Prometheus's pending alert)."""

    rule: Rule
    labels: Labels
    held_s: float


@dataclass(frozen=True)
class Triage:
    """Findings ordered by triage, the primary first, symptoms attached to their cause."""

    findings: tuple[Finding, ...]
    unchecked: tuple[Unchecked, ...]
    errors: tuple[str, ...] = ()
    pending: tuple[Pending, ...] = ()

    @property
    def primary(self) -> Finding | None:
        """The root cause to act on first."""
        return self.findings[0] if self.findings else None

    @property
    def severity(self) -> Status:
        """The worst severity among findings (ok when none)."""
        ranked = [f.rule.severity for f in self.findings]
        ranked += [s.rule.severity for f in self.findings for s in f.symptoms]
        return worst_status(ranked)


def _number_text(value: float) -> str:
    """16.0 -> '16', 0.95 -> '0.95'."""
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def reduce_value(value: float | dict[Labels, float], labels: Labels) -> float | None:
    """One number from an evidence value: the finding's own element when there is one."""
    if isinstance(value, float):
        number: float | None = value
    elif labels in value:
        number = value[labels]
    elif len(value) == 1:
        number = next(iter(value.values()))
    else:
        number = max(value.values(), default=None)
    return None if number is None or math.isnan(number) else number


class _Formatter(string.Formatter):
    """Formats diagnosis text; unknown evidence prints as 'unknown'."""

    def format_field(self, value: object, format_spec: str) -> str:
        if value is None:
            return "unknown"
        return str(super().format_field(value, format_spec))


@dataclass
class Engine:
    """Evaluates a rule set repeatedly; remembers since when each condition holds."""

    rules: list[Rule]
    active_since: dict[tuple[str, str], dict[Labels, float]] = field(default_factory=dict)
    """Per (target, rule id): since when the condition has held, per label set."""
    lazy: bool = True
    """Leave an operator's right side unread when its left is empty (see `Context.lazy`)."""
    hold_cap_s: float | None = None
    """The longest debounce hold a rule needs (None: each its own `for:`). A one-shot window
    shorter than a rule's `for:` sets it (`one_shot_hold_s`): a condition that held through
    most of what was seen is judged, not left pending until after the window ends. Only holds
    of up to DEBOUNCE_MAX_S are debounces; a longer one is part of the evidence (a GPU's clocks
    over 30 s) and a shorter window leaves that rule not checked."""
    _picks: Picks = field(default_factory=dict)
    """The selectors' picks, kept across ticks while the store and its series stay the same."""
    _picked_in: Store | None = None
    _scopes: dict[str, list[Rule]] | None = None

    def evaluate(
        self, store: Store, target: str, now: float, config: Mapping[str, float | None]
    ) -> Triage:
        """All per-server rules for one target at `now`, triaged."""
        context = Context(store, target, now, config, lazy=self.lazy, picks=self._kept(store))
        return self._evaluate(self._of_scope("target"), context)

    def forget(self, target: str) -> None:
        """Nothing of the target's conditions holds (their inputs are gone): what an
        evaluation on no data would leave."""
        for key in [key for key in self.active_since if key[0] == target]:
            del self.active_since[key]

    def evaluate_fleet(self, store: Store, now: float) -> Triage:
        """The fleet-scope rules over every server in the store (findings keyed by instance)."""
        context = Context(store, FLEET, now, lazy=self.lazy, picks=self._kept(store))
        return self._evaluate(self._of_scope("fleet"), context)

    def _of_scope(self, scope: str) -> list[Rule]:
        """The rules of one scope (`target` or `fleet`), sorted out once."""
        if self._scopes is None:
            self._scopes = {
                name: [rule for rule in self.rules if rule.scope == name]
                for name in ("target", "fleet")
            }
        return self._scopes[scope]

    def _kept(self, store: Store) -> Picks:
        """The picks kept for this store (forgotten when another store is evaluated)."""
        if self._picked_in is not store:
            self._picks, self._picked_in = {}, store
        return self._picks

    def _evaluate(self, rules: list[Rule], context: Context) -> Triage:
        """Evaluate rules in one context and triage what holds. Every condition is evaluated
        (each keeps its `for:` state), the evidence only of findings no other finding defers
        them to (`unless_found`): the evidence of a suppressed finding would be thrown away."""
        due: list[tuple[Rule, Labels, float]] = []
        unchecked: list[Unchecked] = []
        errors: list[str] = []
        pending: list[Pending] = []
        for rule in rules:
            try:
                due.extend(self._holding(rule, context, pending))
            except UnknownValueError as missing:
                unchecked.append(Unchecked(rule, (missing.name,), _how_to_know(missing.name)))
            except EvaluationError as problem:
                errors.append(f"{rule.path}:{rule.line}: rule {rule.id}: {problem}")
        due, pending = _promoted(due, pending, context.now)
        fired = {rule.id for rule, _, _ in due}
        findings = [
            self._finding(rule, labels, since, context)
            for rule, labels, since in due
            if not fired.intersection(rule.unless_found)
        ]
        pending = [p for p in pending if not fired.intersection(p.rule.unless_found)]
        return Triage(tuple(triage(findings)), tuple(unchecked), tuple(errors), tuple(pending))

    def _holding(
        self, rule: Rule, context: Context, pending: list[Pending]
    ) -> list[tuple[Rule, Labels, float]]:
        """The label sets (with since when) for which a rule's condition has held for its
        `for` duration; those holding for less are added to `pending`."""
        value = evaluate(rule.expr, context)
        holding: dict[Labels, float] = {}
        if isinstance(value, dict):
            holding = value
        elif value and not math.isnan(value):
            holding = {(): value}
        key = (context.target, rule.id)
        if not holding:  # most rules, most ticks
            self.active_since.pop(key, None)
            return []
        before = self.active_since.get(key, {})
        since_by_labels = {labels: before.get(labels, context.now) for labels in holding}
        self.active_since[key] = since_by_labels
        needed = self.hold_needed_s(rule)
        pending.extend(
            Pending(rule, labels, context.now - since)
            for labels, since in since_by_labels.items()
            if context.now - since < needed
        )
        return [
            (rule, labels, since)
            for labels, since in since_by_labels.items()
            if context.now - since >= needed
        ]

    def hold_needed_s(self, rule: Rule) -> float:
        """How long the rule's condition must hold to be a finding here."""
        if self.hold_cap_s is None or rule.for_s > DEBOUNCE_MAX_S:
            return rule.for_s
        return min(rule.for_s, self.hold_cap_s)

    def _finding(self, rule: Rule, labels: Labels, since: float, context: Context) -> Finding:
        """Evidence, diagnosis and computed suggestions for a holding rule."""
        evidence = {
            name: _safe_value(expr, context, labels) for name, expr in rule.evidence.items()
        }
        diagnosis = _Formatter().format(rule.diagnosis, **evidence)
        changes = tuple(
            _change(s, context, labels) for s in rule.suggestions if _offered(s, context, labels)
        )
        return Finding(rule, labels, since, evidence, diagnosis, changes)


def _promoted(
    due: list[tuple[Rule, Labels, float]], pending: list[Pending], now: float
) -> tuple[list[tuple[Rule, Labels, float]], list[Pending]]:
    """A fallback that fired (Q0, "no limiter identified") gives way to a specific rule it
    defers to (`unless_found`) whose condition holds but not yet for its `for:`: the limiter
    the evidence shows outranks "none identified", so whether the answer is right never turns
    on a hold ending a second inside or outside the window. Likewise a finding that fired joins
    the cause that explains it (`explains`) when the cause's condition holds: the storm is the
    primary, the KV limit its symptom. The pending rule becomes a finding, dated from when its
    condition began to hold."""
    promoted: dict[tuple[str, Labels], Pending] = {}
    kept: list[tuple[Rule, Labels, float]] = []
    fired = {rule.id for rule, _, _ in due}
    for rule, labels, since in due:
        waiting_on = [p for p in pending if p.rule.id in rule.unless_found]
        if waiting_on and not fired.intersection(rule.unless_found):
            promoted.update({(p.rule.id, p.labels): p for p in waiting_on})
            continue
        kept.append((rule, labels, since))
        # a cause whose condition holds outranks its symptom that fired first (M1 over Q1)
        causes = [p for p in pending if rule.id in p.rule.explains and p.rule.severity != "info"]
        promoted.update({(p.rule.id, p.labels): p for p in causes})
    if not promoted:
        return due, pending
    kept += [(p.rule, p.labels, now - p.held_s) for p in promoted.values()]
    rest = [p for p in pending if (p.rule.id, p.labels) not in promoted]
    return kept, rest


def _offered(suggestion: Suggestion, context: Context, labels: Labels) -> bool:
    """Whether a suggestion's `when` holds; one that cannot be evaluated is not offered."""
    if suggestion.when is None:
        return True
    try:
        value = evaluate(suggestion.when, context)
    except EvaluationError:
        return False
    if isinstance(value, dict):
        return labels in value or (len(value) == 1 and () in value)
    return bool(value) and not math.isnan(value)


def _safe_value(expr: Expr, context: Context, labels: Labels) -> float | None:
    """An evidence value, None when it cannot be known."""
    try:
        return reduce_value(evaluate(expr, context), labels)
    except EvaluationError:
        return None


def _missing_names(
    expr: Expr | None, context: Context, labels: Labels
) -> tuple[float | None, tuple[str, ...]]:
    """Evaluate an optional expression, reporting the unknown config values it needed."""
    if expr is None:
        return None, ()
    try:
        return reduce_value(evaluate(expr, context), labels), ()
    except UnknownValueError as missing:
        return None, (missing.name,)
    except EvaluationError:
        return None, ()


def _change(suggestion: Suggestion, context: Context, labels: Labels) -> ProposedChange:
    """A suggestion with current and proposed values computed."""
    current, missing_current = _missing_names(suggestion.current, context, labels)
    proposed: float | str | None = suggestion.literal
    missing: tuple[str, ...] = ()
    if suggestion.proposed is not None:
        proposed, missing = _missing_names(suggestion.proposed, context, labels)
        if isinstance(proposed, float) and not math.isfinite(proposed):
            proposed = None
    return ProposedChange(
        suggestion.flag,
        current,
        proposed,
        suggestion.why,
        suggestion.effect,
        missing + missing_current,
    )


def _how_to_know(name: str) -> str:
    """Which option would make a `vtop:` value known."""
    setting = name.removeprefix("vtop:")
    if setting.startswith("gpu_peak"):
        return (
            f"{name} is unknown: NVML gives the GPU model on the GPU host (vtop/core/gpu_peaks.py)"
        )
    flag = FLAG_NAMES.get(setting, setting)
    return f"{name} ({flag}) is unknown: {HOW_TO_KNOW}"


def _rank(finding: Finding) -> tuple[int, int, str]:
    """Triage order: phase (queue, memory, compute, ...), then severity, then id."""
    return (
        PHASE_ORDER[finding.rule.phase],
        Status(finding.rule.severity).rank,
        finding.rule.id,
    )


def triage(findings: list[Finding]) -> list[Finding]:
    """Attach symptoms to the findings that explain them; order causes queue -> compute."""
    by_id: dict[str, list[Finding]] = {}
    for finding in findings:
        by_id.setdefault(finding.rule.id, []).append(finding)
    explained: set[str] = set()
    for finding in findings:
        if finding.rule.severity != "info":
            explained.update(other for other in finding.rule.explains if other in by_id)
    causes = [f for f in findings if f.rule.id not in explained]
    attached = [
        Finding(
            c.rule,
            c.labels,
            c.since,
            c.evidence,
            c.diagnosis,
            c.changes,
            tuple(
                s for other in c.rule.explains for s in by_id.get(other, []) if other in explained
            ),
        )
        for c in causes
    ]
    actionable = sorted((f for f in attached if f.rule.severity != "info"), key=_rank)
    notes = sorted((f for f in attached if f.rule.severity == "info"), key=_rank)
    return actionable + notes
