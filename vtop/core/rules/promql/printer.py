"""PromQL text from a syntax tree, and the part of a rule condition a Prometheus server can run."""

from __future__ import annotations

import dataclasses
import json
import math

from vtop.core.rules.promql.ast import (
    Aggregate,
    Binary,
    Call,
    Expr,
    Negate,
    Number,
    Selector,
    selectors,
)

VTOP_MADE_PREFIXES = ("nvml:", "probe:", "lora:")
"""Series vtop makes itself, which no Prometheus can scrape: NVML readings, the front door's
canaries, the LoRA demand counted from an info metric's labels."""
LOCAL_PREFIXES = ("vtop:", *VTOP_MADE_PREFIXES)
"""Series only vtop has: server configuration (which the export can be given as numbers) and
the series vtop makes."""


def to_text(expr: Expr) -> str:
    """The expression as PromQL (nested operations parenthesised, so precedence never matters)."""
    if isinstance(expr, Number):
        return _number(expr.value)
    if isinstance(expr, Selector):
        return _selector(expr)
    if isinstance(expr, Call):
        return f"{expr.function}({', '.join(to_text(arg) for arg in expr.args)})"
    if isinstance(expr, Aggregate):
        grouping = f" {'without' if expr.without else 'by'} ({', '.join(expr.labels)})"
        keep = expr.labels or expr.without
        return f"{expr.op}{grouping if keep else ''} ({to_text(expr.expr)})"
    if isinstance(expr, Negate):
        return f"-{_operand(expr.expr)}"
    return _binary(expr)


def _number(value: float) -> str:
    """A literal without a needless fraction (1, 0.9, 1073741824)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _duration(seconds: float) -> str:
    """5m, 30s, 1h, 250ms."""
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds * 1000)}ms"


def _quoted(value: str) -> str:
    """A PromQL string literal (Go's escapes; json's \\uXXXX is not PromQL for non-ASCII)."""
    return json.dumps(value, ensure_ascii=False)


def _selector(selector: Selector) -> str:
    """name{matchers}[range] offset d."""
    matchers = ",".join(f"{m.label}{m.op}{_quoted(m.value)}" for m in selector.matchers)
    text = selector.name + (f"{{{matchers}}}" if matchers else "")
    if selector.range_s is not None:
        text += f"[{_duration(selector.range_s)}]"
    if selector.offset_s:
        text += f" offset {_duration(selector.offset_s)}"
    return text


def _operand(expr: Expr) -> str:
    """An operand, parenthesised when it is itself an operation."""
    text = to_text(expr)
    return f"({text})" if isinstance(expr, Binary | Negate) else text


def _binary(binary: Binary) -> str:
    """left op [bool] [on/ignoring (labels)] right."""
    modifiers = " bool" if binary.return_bool else ""
    if binary.on is not None:
        modifiers += f" on ({', '.join(binary.on)})"
    elif binary.ignoring or binary.group is not None:
        modifiers += f" ignoring ({', '.join(binary.ignoring)})"
    right = _operand(binary.right)
    if binary.group is not None:
        listed = binary.include or right.startswith("(")
        modifiers += f" group_{binary.group}" + (f"({', '.join(binary.include)})" if listed else "")
    return f"{_operand(binary.left)} {binary.op}{modifiers} {right}"


def is_local(
    expr: Expr, local: frozenset[str] = frozenset(), prefixes: tuple[str, ...] = LOCAL_PREFIXES
) -> bool:
    """True when the expression reads a series only vtop has (or a name listed in `local`)."""
    return any(s.name.startswith(prefixes) or s.name in local for s in selectors(expr))


def for_prometheus(
    expr: Expr, local: frozenset[str] = frozenset(), prefixes: tuple[str, ...] = LOCAL_PREFIXES
) -> Expr | None:
    """The condition without `or` branches only vtop can evaluate (names with `prefixes`, or
    in `local`); None when none is left.

    Dropping a branch of an `or` makes a condition stricter, so this is done only where the
    condition holds positively (not under `unless`); it may alert less often, never more.
    """
    if not is_local(expr, local, prefixes):
        return expr
    if not isinstance(expr, Binary) or expr.op not in ("and", "or"):
        return None
    left = for_prometheus(expr.left, local, prefixes)
    right = for_prometheus(expr.right, local, prefixes)
    if expr.op == "or" and (left is None or right is None):
        return left or right
    if left is None or right is None:
        return None
    return dataclasses.replace(expr, left=left, right=right)
