"""Binary operators between vectors and scalars, with Prometheus's matching: signatures on
`on(...)` / `ignoring(...)`, one-to-one unless `group_left` / `group_right` says otherwise (and
Prometheus's error when a side is not unique), result labels as Prometheus builds them."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterable

from vtop.core.frame import Labels
from vtop.core.rules.promql.ast import Binary

Vector = dict[Labels, float]
Value = float | Vector
NAME = "__name__"
SIGNATURES_KEPT = 4096
"""Label sets whose matching signature is remembered (a fleet of 100 servers matches a few
thousand)."""


class EvaluationError(ValueError):
    """An expression that cannot be evaluated (wrong types, many-to-many matching)."""


class MatchingError(EvaluationError):
    """Results Prometheus refuses: many-to-many or implicit many-to-one matching, or two
    elements with the same labels once the name is dropped."""


def _divide(a: float, b: float) -> float:
    """Division as Go does it: x/0 is +-Inf, 0/0 is NaN."""
    if b:
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _power(a: float, b: float) -> float:
    """Go's math.Pow: NaN for a negative base and a fractional exponent, +-Inf on overflow
    and for a zero base with a negative exponent (-Inf for -0 and an odd one)."""
    try:
        return math.pow(a, b)
    except ValueError:
        if a == 0:
            odd = b.is_integer() and b % 2 == 1
            return math.copysign(math.inf, a) if odd else math.inf
        return math.nan
    except OverflowError:
        return math.inf if a > 0 or (float(b).is_integer() and b % 2 == 0) else -math.inf


def _modulo(a: float, b: float) -> float:
    """Go's math.Mod: the sign of the dividend, NaN for a zero divisor or an infinite dividend."""
    if b == 0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
        return math.nan
    return math.fmod(a, b)


ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _divide,
    "%": _modulo,
    "^": _power,
}
COMPARISON: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
    ">=": operator.ge,
    "<=": operator.le,
}
SET_OPERATIONS = frozenset({"and", "or", "unless"})


@functools.lru_cache(maxsize=SIGNATURES_KEPT)
def drop_name(labels: Labels) -> Labels:
    """The labels without the metric name (remembered, as `signature`)."""
    return tuple(pair for pair in labels if pair[0] != NAME)


def unique(elements: Iterable[tuple[Labels, float]]) -> Vector:
    """A vector from elements whose labels must differ (after a name was dropped, two series
    of different names can collide: Prometheus refuses that result)."""
    vector: Vector = {}
    for labels, value in elements:
        if labels in vector:
            raise MatchingError("vector cannot contain metrics with the same labelset")
        vector[labels] = value
    return vector


def signature(labels: Labels, binary: Binary) -> Labels:
    """The labels two elements are matched on (the name never, unless `on` lists it)."""
    return _signature(labels, binary.on, binary.ignoring)


@functools.lru_cache(maxsize=SIGNATURES_KEPT)
def _signature(labels: Labels, on: tuple[str, ...] | None, ignoring: tuple[str, ...]) -> Labels:
    """`signature`, remembered: every tick matches the same few label sets again."""
    if on is not None:
        return tuple(pair for pair in labels if pair[0] in on)
    return tuple(pair for pair in labels if pair[0] not in ignoring and pair[0] != NAME)


def _element(op: str, left: float, right: float) -> tuple[float, bool]:
    """One result and whether it is kept (a comparison keeps the left value when true)."""
    if op in ARITHMETIC:
        return ARITHMETIC[op](left, right), True
    return left, COMPARISON[op](left, right)


def scalar_pair(binary: Binary, left: float, right: float) -> float:
    """scalar op scalar; a comparison gives 1 or 0 (Prometheus requires `bool` there)."""
    if binary.op in COMPARISON:
        return 1.0 if COMPARISON[binary.op](left, right) else 0.0
    return ARITHMETIC[binary.op](left, right)


def vector_scalar(binary: Binary, vector: Vector, scalar: float, scalar_left: bool) -> Vector:
    """Every element against the scalar; a comparison filters and keeps the element's value."""
    drop = binary.op in ARITHMETIC or binary.return_bool
    result: list[tuple[Labels, float]] = []
    for labels, element in vector.items():
        left, right = (scalar, element) if scalar_left else (element, scalar)
        value, keep = _element(binary.op, left, right)
        if binary.op in COMPARISON and scalar_left:
            value = right
        if binary.return_bool:
            value, keep = (1.0 if keep else 0.0), True
        if keep:
            result.append((drop_name(labels) if drop else labels, value))
    return unique(result)


def vector_pair(binary: Binary, left: Vector, right: Vector) -> Vector:
    """Vector op vector: one-to-one, or many-to-one with group_left / group_right (nothing,
    and no matching error, when either side is empty). As in Prometheus 3, a match is an error
    before a comparison filters it: two left elements matching one right element are
    ambiguous even where the comparison would drop one of them."""
    if not left or not right:
        return {}
    many, one = (right, left) if binary.group == "right" else (left, right)
    ones: dict[Labels, tuple[Labels, float]] = {}
    for labels, value in one.items():
        key = signature(labels, binary)
        if key in ones:
            side = "left" if binary.group == "right" else "right"
            raise MatchingError(
                f"found duplicate series for the match group {_text(key)} on the {side} "
                "hand-side of the operation; many-to-many matching not allowed: matching "
                "labels must be unique on one side"
            )
        ones[key] = (labels, value)
    result: Vector = {}
    matched: set[Labels] = set()
    grouped: set[Labels] = set()
    for labels, value in many.items():
        key = signature(labels, binary)
        partner = ones.get(key)
        if partner is None:
            continue
        operands = (partner[1], value) if binary.group == "right" else (value, partner[1])
        combined, keep = _element(binary.op, *operands)
        if binary.return_bool:
            combined, keep = (1.0 if keep else 0.0), True
        metric = _result_labels(labels, partner[0], binary)
        if binary.group is None:
            if key in matched:
                raise MatchingError(
                    "multiple matches for labels: many-to-one matching must be explicit "
                    "(group_left/group_right)"
                )
            matched.add(key)
        else:
            if metric in grouped:
                raise MatchingError(
                    "multiple matches for labels: grouping labels must ensure unique matches"
                )
            grouped.add(metric)
        if not keep:
            continue
        if metric in result:
            raise MatchingError(
                "multiple matches for labels: grouping labels must ensure unique matches"
            )
        result[metric] = combined
    return result


def _result_labels(labels: Labels, other: Labels, binary: Binary) -> Labels:
    """Prometheus's resultMetric: no name after arithmetic or `bool`; one-to-one keeps only the
    `on` labels or drops the `ignoring` ones; grouping copies the listed labels across."""
    named = binary.op not in ARITHMETIC and not binary.return_bool
    matching = (binary.on, binary.ignoring) if binary.group is None else None
    return _result_metric(labels, other, named, matching, binary.include)


@functools.lru_cache(maxsize=SIGNATURES_KEPT)
def _result_metric(
    labels: Labels,
    other: Labels,
    named: bool,
    matching: tuple[tuple[str, ...] | None, tuple[str, ...]] | None,
    include: tuple[str, ...],
) -> Labels:
    """`_result_labels`, remembered: `matching` is one-to-one's (on, ignoring), None when
    grouped."""
    kept = dict(labels)
    if not named:
        kept.pop(NAME, None)
    if matching is not None:
        on, ignoring = matching
        if on is not None:
            kept = {k: v for k, v in kept.items() if k in on}
        else:
            kept = {k: v for k, v in kept.items() if k not in ignoring}
    others = dict(other)
    for name in include:
        if others.get(name):
            kept[name] = others[name]
        else:
            kept.pop(name, None)
    return tuple(sorted(kept.items()))


def set_operation(binary: Binary, left: Vector, right: Vector) -> Vector:
    """and / or / unless by signature; the left side's elements keep their labels."""
    right_keys = {signature(labels, binary) for labels in right}
    if binary.op == "and":
        return {k: v for k, v in left.items() if signature(k, binary) in right_keys}
    if binary.op == "unless":
        return {k: v for k, v in left.items() if signature(k, binary) not in right_keys}
    left_keys = {signature(labels, binary) for labels in left}
    extra = {k: v for k, v in right.items() if signature(k, binary) not in left_keys}
    return {**left, **extra}


def _text(labels: Labels) -> str:
    """{a="1", b="2"}."""
    return "{" + ", ".join(f'{k}="{v}"' for k, v in labels) + "}"
