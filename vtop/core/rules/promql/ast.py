"""Syntax tree of the PromQL subset vtop rules are written in."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cached_property


class _HashedOnce:
    """Hashes a frozen node once: the evaluator's memo looks nodes up many times per rule.

    (A frozen dataclass hashes all its fields, recursively, on every lookup.)
    """

    @cached_property
    def hash_once(self) -> int:
        """The hash of the node's type and fields."""
        values = (getattr(self, f.name) for f in fields(self))  # type: ignore[arg-type]
        return hash((type(self).__name__, *values))


@dataclass(frozen=True)
class Matcher:
    """A label matcher: =, !=, =~ or !~."""

    label: str
    op: str
    value: str


@dataclass(frozen=True)
class Selector(_HashedOnce):
    """`name{matchers}`, optionally a range `[window]` and an `offset`; the name is empty when
    a `__name__` matcher other than `=` picks the names."""

    name: str
    matchers: tuple[Matcher, ...] = ()
    range_s: float | None = None
    offset_s: float = 0.0


@dataclass(frozen=True)
class Number:
    """A numeric literal."""

    value: float


@dataclass(frozen=True)
class Call(_HashedOnce):
    """A function call such as rate(x[5m]) or histogram_quantile(0.99, ...)."""

    function: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Aggregate(_HashedOnce):
    """sum/min/max/avg/count, optionally `by (...)` or `without (...)`."""

    op: str
    expr: Expr
    labels: tuple[str, ...] = ()
    without: bool = False


@dataclass(frozen=True)
class Binary(_HashedOnce):
    """Arithmetic, comparison (`bool` optional) or set operation with optional on/ignoring."""

    op: str
    left: Expr
    right: Expr
    return_bool: bool = False
    on: tuple[str, ...] | None = None
    ignoring: tuple[str, ...] = ()
    group: str | None = None
    """"left": many left elements may match one right element (they keep their own labels);
    "right": the other way round; None: one-to-one."""
    include: tuple[str, ...] = ()
    """Labels `group_left(...)` / `group_right(...)` copy from the "one" side."""


@dataclass(frozen=True)
class Negate(_HashedOnce):
    """Unary minus."""

    expr: Expr


Expr = Selector | Number | Call | Aggregate | Binary | Negate

for _node in (Selector, Call, Aggregate, Binary, Negate):
    _node.__hash__ = lambda self: self.hash_once  # type: ignore[method-assign, attr-defined]


def selectors(expr: Expr) -> list[Selector]:
    """Every selector in an expression, depth first."""
    if isinstance(expr, Selector):
        return [expr]
    if isinstance(expr, Call):
        return [s for arg in expr.args for s in selectors(arg)]
    if isinstance(expr, Aggregate | Negate):
        return selectors(expr.expr)
    if isinstance(expr, Binary):
        return selectors(expr.left) + selectors(expr.right)
    return []


def map_selectors(expr: Expr, replace: Callable[[Selector], Expr]) -> Expr:
    """The expression with every selector replaced by `replace(selector)`."""
    if isinstance(expr, Selector):
        return replace(expr)
    if isinstance(expr, Call):
        return dataclasses.replace(expr, args=tuple(map_selectors(a, replace) for a in expr.args))
    if isinstance(expr, Aggregate | Negate):
        return dataclasses.replace(expr, expr=map_selectors(expr.expr, replace))
    if isinstance(expr, Binary):
        return dataclasses.replace(
            expr, left=map_selectors(expr.left, replace), right=map_selectors(expr.right, replace)
        )
    return expr


def shared(expr: Expr, nodes: dict[Expr, Expr]) -> Expr:
    """The expression rebuilt from `nodes`' copy of every subexpression equal to one already
    seen (adding its own): equal subexpressions of many rules become one object, which the
    evaluator's memo, keyed by identity, evaluates once per tick."""
    if isinstance(expr, Call):
        expr = dataclasses.replace(expr, args=tuple(shared(arg, nodes) for arg in expr.args))
    elif isinstance(expr, Aggregate | Negate):
        expr = dataclasses.replace(expr, expr=shared(expr.expr, nodes))
    elif isinstance(expr, Binary):
        expr = dataclasses.replace(
            expr, left=shared(expr.left, nodes), right=shared(expr.right, nodes)
        )
    return nodes.setdefault(expr, expr)
