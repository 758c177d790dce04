"""Recording rules: named expressions (Prometheus `record:` rules) that rules use by name.

vtop evaluates a rule with each record's expression in place of its name, which gives what
Prometheus gives when the records are evaluated before the alerts in the same group (the
export puts them there); equal sub-expressions are then computed once per evaluation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from vtop.core.rules.promql.ast import Expr, Selector, map_selectors, selectors

RECORD_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*(:[a-zA-Z0-9_]+){2,}\Z")
"""Prometheus's level:metric:operations convention; two colons never collide with a vLLM
metric (vllm:name) or a vtop setting."""
RECORD_KEYS = {"record", "expr"}


@dataclass(frozen=True)
class Record:
    """One named expression, as written and with the records it uses expanded."""

    name: str
    expr: Expr
    expr_text: str
    expanded: Expr
    path: str = ""
    line: int = 0


class RecordUseError(ValueError):
    """A record used in a way a name cannot stand for (with matchers, a range or an offset)."""


def uses(expr: Expr, names: Mapping[str, object]) -> list[str]:
    """The record names an expression reads, in order of first use."""
    return list(dict.fromkeys(s.name for s in selectors(expr) if s.name in names))


def expand(expr: Expr, records: Mapping[str, Record]) -> Expr:
    """The expression with every record name replaced by the record's expanded expression."""

    def replace(selector: Selector) -> Expr:
        record = records.get(selector.name)
        if record is None:
            return selector
        if selector.matchers or selector.range_s is not None or selector.offset_s:
            raise RecordUseError(
                f"record {selector.name} can only be used by its bare name "
                "(no matchers, range or offset)"
            )
        return record.expanded

    return map_selectors(expr, replace)


def closure(expr: Expr, records: Mapping[str, Expr]) -> set[str]:
    """The records an expression reads, directly or through others (`records`: name ->
    its expression as written)."""
    found: set[str] = set()
    pending = uses(expr, records)
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending += uses(records[name], records)
    return found
