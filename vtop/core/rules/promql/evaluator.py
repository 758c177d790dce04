"""Evaluate the PromQL subset over the series store for one target (or the fleet) at a time,
with Prometheus 3's semantics: vectors carry the metric name where Prometheus keeps it,
selectors see samples as `samples` describes, functions compute as `functions` does, and
binary operators match as `binary` does. `evaluate` gives the labels without the name, as
findings use them; `evaluate_named` keeps it (the conformance tests compare it with Prometheus)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from vtop.core.frame import Labels, Series
from vtop.core.histogram import optional_float
from vtop.core.rules.promql import functions
from vtop.core.rules.promql.ast import (
    Aggregate,
    Binary,
    Call,
    Expr,
    Matcher,
    Negate,
    Number,
    Selector,
)
from vtop.core.rules.promql.binary import (
    NAME,
    SET_OPERATIONS,
    SIGNATURES_KEPT,
    EvaluationError,
    Value,
    Vector,
    drop_name,
    scalar_pair,
    set_operation,
    unique,
    vector_pair,
    vector_scalar,
)
from vtop.core.rules.promql.parser import re2_regex
from vtop.core.rules.promql.samples import edge, instant, range_samples, range_start
from vtop.core.store.gpu_series import GPU_TARGET
from vtop.core.store.probe_series import PROBE_TARGET
from vtop.core.store.store import INSTANCE, Store

CONFIG_PREFIX = "vtop:"
HOST_LEVEL_PREFIX = ("nvml:", "probe:")
"""Series of the host vtop runs on (its GPUs, its canaries through the front door): read for
every target, not filtered by its instance, unless the target has its own (`_local`)."""
HOST_TARGETS = frozenset({GPU_TARGET, PROBE_TARGET})
"""Where the host's own series are stored: a server without its own reads these, never
another server's (a replica's GPUs are its own)."""
FLEET = "*fleet*"
"""The target of fleet-scope rules: selectors see every instance and keep its label."""
RATES = {"rate": (True, True), "increase": (True, False), "delta": (False, False)}
"""(counter, per second) of each extrapolated function."""

__all__ = [
    "FLEET",
    "Context",
    "EvaluationError",
    "Picks",
    "UnknownValueError",
    "Value",
    "evaluate",
]


class UnknownValueError(EvaluationError):
    """A `vtop:` configuration value the rule needs is unknown for this server."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is unknown")
        self.name = name


Picked = list[tuple[Series, Labels, Labels]]
"""The series a selector picked, each with its result labels (`_key`) and those labels without
the name (what a range function gives: made once per pick, not once a tick)."""
Picks = dict[tuple[str, str, tuple[Matcher, ...]], tuple[int, Picked]]
"""(target, name, matchers) -> (the store's series generation, the series picked)."""


@dataclass
class Context:
    """Where and when to evaluate: the store, the target, `now`, and the server's config values."""

    store: Store
    target: str
    now: float
    config: Mapping[str, float | None] = field(default_factory=dict)
    from_first_sample: bool = True
    """A range reaching back before the first sample vtop took starts there (vtop has no
    history from before it started watching, and Prometheus's extrapolation would read a
    series start); False evaluates exactly as Prometheus (the export's tests)."""
    memo: dict[int, tuple[Expr, Value]] = field(default_factory=dict)
    """Every subexpression's result in this evaluation, by the node's identity (the loader makes
    the rules' equal subexpressions one node, `ast.shared`; an identity lookup costs no hash of
    the tree). The node is kept beside its value, so an id is never reused while it is looked
    up. Values are never mutated after they are made, so sharing them is safe."""
    lazy: bool = False
    """Leave the right side of an operator unevaluated when its left side is an empty vector
    (every operator but `or` then gives an empty vector). The value is Prometheus's; what is
    lost is only an error the right side alone would raise (a many-to-many match, duplicate
    label sets), which Prometheus reports for the whole expression. The rule engine evaluates
    lazily (shipped rules are tested for such errors); the conformance tests do not."""
    picks: Picks = field(default_factory=dict)
    """The series each selector's name and matchers picked for a target, with the store's
    series count when picked: per evaluation, or kept across ticks by whoever evaluates the same
    store repeatedly (the rule engine)."""


def evaluate(expr: Expr, context: Context) -> Value:
    """The value of an expression: a float (scalar) or a vector keyed by label sets (without
    the metric name; the first of two elements that differ only by name is kept)."""
    value = evaluate_named(expr, context)
    if isinstance(value, float):
        return value
    unnamed: Vector = {}
    for labels, element in value.items():
        unnamed.setdefault(drop_name(labels), element)
    return unnamed


def evaluate_named(expr: Expr, context: Context) -> Value:
    """The value of an expression with the metric name kept where Prometheus keeps it."""
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, Negate):
        value = evaluate_named(expr.expr, context)
        if isinstance(value, float):
            return -value
        return unique((drop_name(labels), -element) for labels, element in value.items())
    found = context.memo.get(id(expr))
    if found is not None and found[0] is expr:
        return found[1]
    if isinstance(expr, Selector):
        value = _instant(expr, context)
    elif isinstance(expr, Call):
        value = _call(expr, context)
    elif isinstance(expr, Aggregate):
        value = _aggregate(expr, context)
    else:
        value = _binary(expr, context)
    context.memo[id(expr)] = (expr, value)
    return value


def _matches(value: str, matcher: Matcher) -> bool:
    """One matcher against a label value ("" for a missing label); regexes fully anchored."""
    if matcher.op == "=":
        return value == matcher.value
    if matcher.op == "!=":
        return value != matcher.value
    found = re2_regex(matcher.value).fullmatch(value) is not None
    return found if matcher.op == "=~" else not found


def _local(selector: Selector, context: Context) -> bool:
    """Whether the selector reads only the context's own server: every series but the
    host-level ones, and those too where the server has its own (the GPUs of a remote replica,
    joined to it from dcgm-exporter, rather than those of the host vtop runs on)."""
    if context.target == FLEET:
        return False
    if not selector.name.startswith(HOST_LEVEL_PREFIX):
        return True
    return bool(context.store.select(selector.name, {INSTANCE: context.target}))


def _series(selector: Selector, context: Context) -> Picked:
    """Stored series a selector picks, with their result labels (once per evaluation for its
    name and matchers, or for as long as the store's series stay the same: the functions and
    ranges over one series share the pick)."""
    pick = (context.target, selector.name, selector.matchers)
    generation = context.store.series_generation
    kept = context.picks.get(pick)
    if kept is not None and kept[0] == generation:
        return kept[1]
    found = []
    for series in _picked(selector, context):
        key = _key(series, context.target)
        found.append((series, key, drop_name(key)))
    context.picks[pick] = (generation, found)
    return found


def _picked(selector: Selector, context: Context) -> list[Series]:
    """Stored series a selector's name and matchers pick for the context's target."""
    local = _local(selector, context)
    scope = {INSTANCE: context.target} if local else None
    if selector.name:
        found = context.store.select(selector.name, scope)
    else:
        wanted = [m for m in selector.matchers if m.label == NAME]
        names = [n for n in context.store.names() if all(_matches(n, m) for m in wanted)]
        found = [s for name in names for s in context.store.select(name, scope)]
    host_only = not local and context.target != FLEET
    return [
        series
        for series in found
        if (not local or series.label(INSTANCE) == context.target)
        and (not host_only or series.label(INSTANCE) in HOST_TARGETS)
        and all(
            _matches(series.name if m.label == NAME else series.label(m.label) or "", m)
            for m in selector.matchers
        )
    ]


def _key(series: Series, target: str) -> Labels:
    """Result labels with the name: without the instance for one target, all for the fleet."""
    labels = series.labels if target == FLEET else series.without(frozenset({INSTANCE}))
    return tuple(sorted(((NAME, series.name), *labels)))


def _config(name: str, context: Context) -> float:
    """A `vtop:` configuration scalar."""
    value = context.config.get(name)
    if value is None:
        raise UnknownValueError(name)
    return float(value)


def _instant(selector: Selector, context: Context) -> Value:
    """An instant selector, or a configuration scalar for `vtop:` names."""
    if selector.range_s is not None:
        raise EvaluationError(f"range selector {selector.name}[...] needs a function like rate()")
    if selector.name.startswith(CONFIG_PREFIX):
        return _config(selector.name, context)
    when = context.now - selector.offset_s
    vector: Vector = {}
    for series, key, _ in _series(selector, context):
        value = instant(context.store, series, when)
        if value is not None:
            vector[key] = value
    return vector


def _range_call(call: Call, context: Context) -> Vector:
    """rate/increase/delta and the *_over_time functions over one range selector."""
    selector = call.args[0]
    assert isinstance(selector, Selector) and selector.range_s is not None
    if selector.name.startswith(CONFIG_PREFIX):
        raise EvaluationError(f"{selector.name} is a configuration value, not a series")
    picked = _series(selector, context)
    if not picked:
        return {}
    end = context.now - selector.offset_s
    start, from_start = edge(end - selector.range_s), False
    if context.from_first_sample:
        start, from_start = range_start(context.store, start)
    keeps_name = call.function == "last_over_time"
    vector: list[tuple[Labels, float]] = []
    for series, key, unnamed in picked:
        first_time, last_time, values, grows = range_samples(
            context.store, series, start, end, from_start=from_start
        )
        if call.function in RATES:
            counter, per_second = RATES[call.function]
            value = functions.extrapolated_rate(
                first_time, last_time, values, start, end, counter, per_second, grows=grows
            )
        else:
            value = functions.OVER_TIME[call.function](values) if values else None
        if value is not None:
            vector.append((key if keeps_name else unnamed, value))
    return unique(vector)


def _call(call: Call, context: Context) -> Value:
    """Function calls."""
    name = call.function
    if name in RATES or name in functions.OVER_TIME:
        return _range_call(call, context)
    args = [evaluate_named(arg, context) for arg in call.args]
    if name in functions.ELEMENTWISE and len(args) == 1:
        return _map(args[0], functions.ELEMENTWISE[name])
    if name == "round" and len(args) in (1, 2):
        to_nearest = _scalar_arg(args[1], name) if len(args) == 2 else 1.0
        return _map(args[0], lambda v: functions.rounded(v, to_nearest))
    if name == "histogram_quantile" and len(args) == 2:
        return _histogram_quantile(_scalar_arg(args[0], name), _vector_arg(args[1], name))
    if name in ("clamp_min", "clamp_max", "clamp"):
        return _clamp(name, args)
    if name == "scalar" and len(args) == 1:
        vector = _vector_arg(args[0], name)
        return next(iter(vector.values())) if len(vector) == 1 else math.nan
    if name == "vector" and len(args) == 1:
        return {(): _scalar_arg(args[0], name)}
    if name == "absent" and len(args) == 1:
        return {} if _vector_arg(args[0], name) else {_absent_labels(call.args[0]): 1.0}
    raise EvaluationError(f"wrong arguments for {name}()")


def _map(value: Value, function: Callable[[float], float]) -> Value:
    """A function of every element (the name dropped), or of a scalar."""
    if isinstance(value, float):
        return function(value)
    return unique((drop_name(labels), function(v)) for labels, v in value.items())


def _absent_labels(expr: Expr) -> Labels:
    """absent()'s labels: the selector's `=` matchers with a value, on labels named once."""
    if not isinstance(expr, Selector):
        return ()
    kept: dict[str, str] = {}
    seen: set[str] = set()
    for matcher in expr.matchers:
        if matcher.label == NAME:
            continue
        if matcher.op == "=" and matcher.value and matcher.label not in seen:
            kept[matcher.label] = matcher.value
        else:
            kept.pop(matcher.label, None)
        seen.add(matcher.label)
    return tuple(sorted(kept.items()))


def _scalar_arg(value: Value, function: str) -> float:
    if not isinstance(value, float):
        raise EvaluationError(f"{function}() expects a scalar here")
    return value


def _vector_arg(value: Value, function: str) -> Vector:
    if isinstance(value, float):
        raise EvaluationError(f"{function}() expects a vector here")
    return value


def _clamp(name: str, args: list[Value]) -> Value:
    """clamp_min(v, lo), clamp_max(v, hi), clamp(v, lo, hi) (empty when lo > hi)."""
    bounds = [_scalar_arg(a, name) for a in args[1:]]
    if len(bounds) != (2 if name == "clamp" else 1):
        raise EvaluationError(f"wrong arguments for {name}()")
    if name == "clamp_min":
        return _map(args[0], lambda v: functions.go_max(bounds[0], v))
    if name == "clamp_max":
        return _map(args[0], lambda v: functions.go_min(bounds[0], v))
    low, high = bounds
    if high < low:
        return {}
    return _map(args[0], lambda v: functions.go_max(low, functions.go_min(high, v)))


def _histogram_quantile(q: float, vector: Vector) -> Vector:
    """Group bucket values by labels without `le` and the name; a quantile for every group."""
    groups: dict[Labels, list[tuple[float, float]]] = {}
    for labels, value in vector.items():
        upper = optional_float(dict(labels).get("le"))
        if upper is None:
            continue
        group = tuple(pair for pair in labels if pair[0] not in ("le", NAME))
        groups.setdefault(group, []).append((upper, value))
    return {group: functions.bucket_quantile(q, buckets) for group, buckets in groups.items()}


@functools.lru_cache(maxsize=SIGNATURES_KEPT)
def _group_key(labels: Labels, names: tuple[str, ...], without: bool) -> Labels:
    """Labels kept by `by (names)` or `without (names)` (which also drops the name);
    remembered, as the matching signatures are."""
    if without:
        return tuple(pair for pair in labels if pair[0] not in names and pair[0] != NAME)
    return tuple(pair for pair in labels if pair[0] in names)


def _aggregate(aggregate: Aggregate, context: Context) -> Vector:
    """sum/min/max/avg/count by or without labels."""
    value = evaluate_named(aggregate.expr, context)
    vector = {(): value} if isinstance(value, float) else value
    groups: dict[Labels, list[float]] = {}
    for labels, element in vector.items():
        key = _group_key(labels, aggregate.labels, aggregate.without)
        groups.setdefault(key, []).append(element)
    reduce = functions.AGGREGATORS[aggregate.op]
    return {group: reduce(values) for group, values in groups.items()}


def _binary(binary: Binary, context: Context) -> Value:
    """Arithmetic, comparisons and set operations."""
    left = evaluate_named(binary.left, context)
    if context.lazy and binary.op != "or" and isinstance(left, dict) and not left:
        return {}  # nothing on the left to match, compare or keep: the right is not read
    right = _or_operand(binary, left, context) if binary.op in ("or", "unless") else None
    if right is None:
        try:
            right = evaluate_named(binary.right, context)
        except UnknownValueError:
            if isinstance(left, dict) and not left:
                return {}  # empty whatever the setting: the rule is checked, and quiet
            raise
    if binary.op in SET_OPERATIONS:
        if isinstance(left, float) != isinstance(right, float):
            return _gate(binary.op, left, right)
        return set_operation(binary, _as_vector(left), _as_vector(right))
    if isinstance(left, float) and isinstance(right, float):
        return scalar_pair(binary, left, right)
    if isinstance(left, float):
        assert isinstance(right, dict)
        return vector_scalar(binary, right, left, scalar_left=True)
    if isinstance(right, float):
        return vector_scalar(binary, left, right, scalar_left=False)
    return vector_pair(binary, left, right)


def _or_operand(binary: Binary, left: Value, context: Context) -> Value | None:
    """The right side of `or` / `unless`; empty when it needs an unknown setting but the left
    side holds.

    `a or b` with `a` true is true whatever `b` is, so an unknown `vtop:` value in `b` must not
    make the whole rule unchecked. `a unless b` reads "a, except where b is known to hold": with
    `b` unknown, nothing is known to be excepted (rules use it for exclusions that need a
    setting, e.g. Q3 unless running is known to sit at max-num-seqs).
    """
    try:
        return evaluate_named(binary.right, context)
    except UnknownValueError:
        if _as_vector(left):
            return {}
        raise


def _gate(op: str, left: Value, right: Value) -> Vector:
    """A set operation with a scalar operand (a condition on configuration, which Prometheus
    has no scalars for): the scalar gates the vector as a whole."""
    scalar = left if isinstance(left, float) else right
    vector = right if isinstance(left, float) else left
    assert isinstance(scalar, float) and isinstance(vector, dict)
    holds = bool(scalar) and not math.isnan(scalar)
    if op == "and":
        return vector if holds else {}
    if op == "unless":
        return vector if not holds or not isinstance(left, dict) else {}
    return vector if vector or not holds else {(): scalar}


def _as_vector(value: Value) -> Vector:
    """A set-operation operand: a scalar is one element when non-zero, else empty."""
    if isinstance(value, float):
        return {(): value} if value and not math.isnan(value) else {}
    return value
