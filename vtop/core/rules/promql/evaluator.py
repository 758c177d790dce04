"""Evaluate the PromQL subset over the series store for one target at a given time."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from vtop.core.frame import Labels, Series
from vtop.core.histogram import optional_float, quantile
from vtop.core.rules.promql.ast import Aggregate, Binary, Call, Expr, Negate, Number, Selector
from vtop.core.store.store import INSTANCE, Store

Vector = dict[Labels, float]
Value = float | Vector
CONFIG_PREFIX = "vtop:"
HOST_LEVEL_PREFIX = "nvml:"
FLEET = "*fleet*"
"""The target of fleet-scope rules: selectors see every instance and keep its label."""


def _divide(a: float, b: float) -> float:
    """Division as Prometheus does it: x/0 is +-Inf, 0/0 is NaN."""
    if b:
        return a / b
    return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a)


ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": lambda a, b: _divide(a, b),
    "%": lambda a, b: math.fmod(a, b) if b else math.nan,
    "^": lambda a, b: a**b,
}
COMPARISON: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
    ">=": operator.ge,
    "<=": operator.le,
}
ELEMENTWISE: dict[str, Callable[[float], float]] = {
    "abs": abs,
    "floor": lambda v: float(math.floor(v)) if math.isfinite(v) else v,
    "ceil": lambda v: float(math.ceil(v)) if math.isfinite(v) else v,
    "round": lambda v: float(round(v)) if math.isfinite(v) else v,
    "sqrt": lambda v: math.sqrt(v) if v >= 0 else math.nan,
}


class EvaluationError(ValueError):
    """An expression that cannot be evaluated (wrong types, many-to-many matching)."""


class UnknownValueError(EvaluationError):
    """A `vtop:` configuration value the rule needs is unknown for this server."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is unknown")
        self.name = name


@dataclass
class Context:
    """Where and when to evaluate: the store, the target, `now`, and the server's config values."""

    store: Store
    target: str
    now: float
    config: Mapping[str, float | None] = field(default_factory=dict)
    memo: dict[Expr, Value] = field(default_factory=dict)
    """Function and aggregation results of this evaluation (rules share many subexpressions).
    Values are never mutated after they are made, so sharing them is safe."""


def evaluate(expr: Expr, context: Context) -> Value:
    """The value of an expression: a float (scalar) or a vector keyed by label sets."""
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, Negate):
        return _map(evaluate(expr.expr, context), operator.neg)
    if isinstance(expr, Selector):
        return _instant(expr, context)
    if isinstance(expr, Call | Aggregate):
        if expr not in context.memo:
            call = _call if isinstance(expr, Call) else _aggregate
            context.memo[expr] = call(expr, context)  # type: ignore[arg-type]
        return context.memo[expr]
    return _binary(expr, context)


def _map(value: Value, function: Callable[[float], float]) -> Value:
    """Apply a function to a scalar or to every element of a vector."""
    if isinstance(value, float):
        return function(value)
    return {labels: function(v) for labels, v in value.items()}


def _matches(series: Series, selector: Selector, target: str) -> bool:
    """True when a stored series belongs to the target and satisfies every matcher."""
    local = target != FLEET and not selector.name.startswith(HOST_LEVEL_PREFIX)
    if local and series.label(INSTANCE) != target:
        return False
    for matcher in selector.matchers:
        actual = series.label(matcher.label) or ""
        if matcher.op == "=" and actual != matcher.value:
            return False
        if matcher.op == "!=" and actual == matcher.value:
            return False
        if matcher.op == "=~" and not re.fullmatch(matcher.value, actual):
            return False
        if matcher.op == "!~" and re.fullmatch(matcher.value, actual):
            return False
    return True


def _is_config(name: str) -> bool:
    """`vtop:` names are configuration scalars."""
    return name.startswith(CONFIG_PREFIX)


def _series(selector: Selector, context: Context) -> list[Series]:
    """Stored series a selector picks."""
    local = context.target != FLEET and not selector.name.startswith(HOST_LEVEL_PREFIX)
    found = context.store.select(selector.name, {INSTANCE: context.target} if local else None)
    return [s for s in found if _matches(s, selector, context.target)]


def _key(series: Series, target: str) -> Labels:
    """Result labels: without the instance when evaluating for one target, all for the fleet."""
    if target == FLEET:
        return series.labels
    return tuple(pair for pair in series.labels if pair[0] != INSTANCE)


def _instant(selector: Selector, context: Context) -> Value:
    """An instant selector, or a configuration scalar for `vtop:` names."""
    if selector.range_s is not None:
        raise EvaluationError(f"range selector {selector.name}[...] needs a function like rate()")
    if _is_config(selector.name):
        value = context.config.get(selector.name)
        if value is None:
            raise UnknownValueError(selector.name)
        return float(value)
    when = context.now - selector.offset_s
    vector: Vector = {}
    for series in _series(selector, context):
        value = context.store.latest(series, when)
        if value is not None:
            vector[_key(series, context.target)] = value
    return vector


def _range_call(call: Call, context: Context) -> Vector:
    """rate/increase/*_over_time over one range selector."""
    selector = call.args[0]
    assert isinstance(selector, Selector) and selector.range_s is not None
    if _is_config(selector.name):
        raise EvaluationError(f"{selector.name} is a configuration value, not a series")
    store, when, window = context.store, context.now - selector.offset_s, selector.range_s
    measure = _RANGE_MEASURES[call.function]
    vector: Vector = {}
    for series in _series(selector, context):
        value = measure(store, series, when, window)
        if value is not None:
            vector[_key(series, context.target)] = value
    return vector


def _over_time(
    reduce: Callable[[list[float]], float],
) -> Callable[[Store, Series, float, float], float | None]:
    def measure(store: Store, series: Series, now: float, window: float) -> float | None:
        return store.over_time(series, now, window, reduce)

    return measure


_RANGE_MEASURES: dict[str, Callable[[Store, Series, float, float], float | None]] = {
    "rate": lambda store, s, now, w: store.rate(s, now, w),
    "increase": lambda store, s, now, w: store.increase(s, now, w),
    "delta": lambda store, s, now, w: store.increase(s, now, w),
    "avg_over_time": lambda store, s, now, w: store.avg_over_time(s, now, w),
    "min_over_time": lambda store, s, now, w: store.min_over_time(s, now, w),
    "max_over_time": lambda store, s, now, w: store.max_over_time(s, now, w),
    "sum_over_time": _over_time(math.fsum),
    "count_over_time": _over_time(lambda values: float(len(values))),
    "last_over_time": _over_time(lambda values: values[-1]),
}


def _call(call: Call, context: Context) -> Value:
    """Function calls."""
    name = call.function
    if name in _RANGE_MEASURES:
        return _range_call(call, context)
    args = [evaluate(arg, context) for arg in call.args]
    if name in ELEMENTWISE and len(args) == 1:
        return _map(args[0], ELEMENTWISE[name])
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
        return {} if _vector_arg(args[0], name) else {(): 1.0}
    raise EvaluationError(f"wrong arguments for {name}()")


def _scalar_arg(value: Value, function: str) -> float:
    if not isinstance(value, float):
        raise EvaluationError(f"{function}() expects a scalar here")
    return value


def _vector_arg(value: Value, function: str) -> Vector:
    if isinstance(value, float):
        raise EvaluationError(f"{function}() expects a vector here")
    return value


def _clamp(name: str, args: list[Value]) -> Value:
    """clamp_min(v, lo), clamp_max(v, hi), clamp(v, lo, hi)."""
    bounds = [_scalar_arg(a, name) for a in args[1:]]
    low = bounds[0] if name in ("clamp_min", "clamp") else -math.inf
    high = bounds[-1] if name in ("clamp_max", "clamp") else math.inf
    if len(bounds) != (2 if name == "clamp" else 1):
        raise EvaluationError(f"wrong arguments for {name}()")
    return _map(args[0], lambda v: min(max(v, low), high))


def _histogram_quantile(q: float, vector: Vector) -> Vector:
    """Group bucket values by labels without `le` and interpolate the quantile."""
    groups: dict[Labels, list[tuple[float, float]]] = {}
    for labels, value in vector.items():
        upper = optional_float(dict(labels).get("le"))
        if upper is None:
            continue
        group = tuple(pair for pair in labels if pair[0] != "le")
        groups.setdefault(group, []).append((upper, value))
    result: Vector = {}
    for group, buckets in groups.items():
        estimate = quantile(q, buckets)
        if estimate is not None:
            result[group] = estimate
    return result


def _group_key(labels: Labels, names: tuple[str, ...], without: bool) -> Labels:
    """Labels kept by `by (names)` or `without (names)`."""
    if without:
        return tuple(pair for pair in labels if pair[0] not in names)
    return tuple(pair for pair in labels if pair[0] in names)


AGGREGATORS: dict[str, Callable[[list[float]], float]] = {
    "sum": math.fsum,
    "min": min,
    "max": max,
    "avg": lambda values: math.fsum(values) / len(values),
    "count": lambda values: float(len(values)),
}


def _aggregate(aggregate: Aggregate, context: Context) -> Vector:
    """sum/min/max/avg/count by or without labels."""
    value = evaluate(aggregate.expr, context)
    vector = {(): value} if isinstance(value, float) else value
    groups: dict[Labels, list[float]] = {}
    for labels, element in vector.items():
        groups.setdefault(_group_key(labels, aggregate.labels, aggregate.without), []).append(
            element
        )
    reduce = AGGREGATORS[aggregate.op]
    return {group: reduce(values) for group, values in groups.items()}


def _signature(labels: Labels, binary: Binary) -> Labels:
    """The labels two vector elements are matched on."""
    if binary.on is not None:
        return tuple(pair for pair in labels if pair[0] in binary.on)
    return tuple(pair for pair in labels if pair[0] not in binary.ignoring)


def _binary(binary: Binary, context: Context) -> Value:
    """Arithmetic, comparisons and set operations."""
    left = evaluate(binary.left, context)
    if isinstance(left, dict) and not left and binary.op != "or":
        return {}  # an empty vector stays empty whatever the right side (nor is it evaluated)
    right = _or_operand(binary, left, context) if binary.op in ("or", "unless") else None
    if right is None:
        right = evaluate(binary.right, context)
    if binary.op in ("and", "or", "unless"):
        return _set_operation(binary, left, right)
    if isinstance(left, float) and isinstance(right, float):
        return _scalar_pair(binary, left, right)
    if isinstance(left, float) or isinstance(right, float):
        return _vector_scalar(binary, left, right)
    return _vector_pair(binary, left, right)


def _or_operand(binary: Binary, left: Value, context: Context) -> Value | None:
    """The right side of `or` / `unless`; empty when it needs an unknown setting but the left
    side holds.

    `a or b` with `a` true is true whatever `b` is, so an unknown `vtop:` value in `b` must not
    make the whole rule unchecked. `a unless b` reads "a, except where b is known to hold": with
    `b` unknown, nothing is known to be excepted (rules use it for exclusions that need a
    setting, e.g. Q3 unless running is known to sit at max-num-seqs).
    """
    try:
        return evaluate(binary.right, context)
    except UnknownValueError:
        if _as_vector(left):
            return {}
        raise


def _gate(op: str, left: Value, right: Value) -> Vector:
    """A set operation between a scalar condition and a vector."""
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


def _apply(binary: Binary, a: float, b: float) -> float | None:
    """One element's result; None drops it (a false comparison without `bool`)."""
    if binary.op in ARITHMETIC:
        return ARITHMETIC[binary.op](a, b)
    holds = COMPARISON[binary.op](a, b)
    if binary.return_bool:
        return 1.0 if holds else 0.0
    return a if holds else None


def _scalar_pair(binary: Binary, left: float, right: float) -> Value:
    """scalar op scalar; comparisons give 1/0."""
    if binary.op in COMPARISON:
        return 1.0 if COMPARISON[binary.op](left, right) else 0.0
    return ARITHMETIC[binary.op](left, right)


def _vector_scalar(binary: Binary, left: Value, right: Value) -> Vector:
    """Vector op scalar (either side), element by element; comparisons filter."""
    scalar_left = isinstance(left, float)
    vector = right if scalar_left else left
    scalar = left if scalar_left else right
    assert isinstance(vector, dict) and isinstance(scalar, float)
    result: Vector = {}
    for labels, element in vector.items():
        a, b = (scalar, element) if scalar_left else (element, scalar)
        value = _apply(binary, a, b)
        if value is not None:
            result[labels] = (
                element if binary.op in COMPARISON and not binary.return_bool else value
            )
    return result


def _vector_pair(binary: Binary, left: Vector, right: Vector) -> Vector:
    """One-to-one matching on the label signature."""
    by_signature: dict[Labels, float] = {}
    for labels, value in right.items():
        signature = _signature(labels, binary)
        if signature in by_signature:
            raise EvaluationError(f"many-to-many matching for {binary.op}: add on(...) or sum by")
        by_signature[signature] = value
    result: Vector = {}
    for labels, value in left.items():
        other = by_signature.get(_signature(labels, binary))
        if other is not None:
            combined = _apply(binary, value, other)
            if combined is not None:
                result[labels] = combined
    return result


def _set_operation(binary: Binary, left_value: Value, right_value: Value) -> Vector:
    """and / or / unless by label signature; a scalar operand (a condition on configuration)
    gates the other side as a whole."""
    if isinstance(left_value, float) != isinstance(right_value, float):
        return _gate(binary.op, left_value, right_value)
    left, right = _as_vector(left_value), _as_vector(right_value)
    right_signatures = {_signature(labels, binary) for labels in right}
    if binary.op == "and":
        return {k: v for k, v in left.items() if _signature(k, binary) in right_signatures}
    if binary.op == "unless":
        return {k: v for k, v in left.items() if _signature(k, binary) not in right_signatures}
    left_signatures = {_signature(labels, binary) for labels in left}
    extra = {k: v for k, v in right.items() if _signature(k, binary) not in left_signatures}
    return {**left, **extra}
