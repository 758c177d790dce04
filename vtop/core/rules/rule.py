"""A triage rule as data: its condition, evidence, diagnosis and suggested flag changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal, get_args

from vtop.core.rules.promql.ast import Expr, Selector, selectors
from vtop.core.rules.promql.printer import for_prometheus, to_text
from vtop.core.rules.promql.samples import LOOKBACK_S
from vtop.core.rules.records import Record

Phase = Literal["path", "queue", "memory", "compute", "latency", "config", "gpu", "streaming"]
Severity = Literal["info", "warning", "critical"]
Scope = Literal["target", "fleet"]
"""Where a rule is judged: on each server, or across the fleet."""
PHASES: tuple[Phase, ...] = get_args(Phase)
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
SCOPES: tuple[Scope, ...] = get_args(Scope)


def reach_s(selector: Selector) -> float:
    """How far before the evaluation time a selector reads samples: its range's width or the
    lookback, plus its offset."""
    return (LOOKBACK_S if selector.range_s is None else selector.range_s) + selector.offset_s


class RuleError(ValueError):
    """A problem in a rule file, located by file and line."""

    def __init__(self, path: Path | str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = str(path), line, message


class RuleFileError(ValueError):
    """One or more problems in rule files."""

    def __init__(self, errors: list[RuleError]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = errors


@dataclass(frozen=True)
class Suggestion:
    """A proposed `vllm serve` change: a flag with a computed value, or a literal flag to set."""

    flag: str
    why: str
    effect: str = ""
    current: Expr | None = None
    proposed: Expr | None = None
    literal: str | None = None
    when: Expr | None = None
    """Offered only where this holds (e.g. which setting sizes the KV pool on this server)."""


@dataclass(frozen=True)
class Rule:
    """One triage rule."""

    id: str
    title: str
    phase: Phase
    severity: Severity
    expr: Expr
    expr_text: str
    for_s: float
    diagnosis: str
    evidence: dict[str, Expr] = field(default_factory=dict)
    suggestions: tuple[Suggestion, ...] = ()
    explains: tuple[str, ...] = ()
    source: str = ""
    path: str = ""
    line: int = 0
    scope: Scope = "target"
    """`target`: evaluated per server; `fleet`: once over all servers, by `instance`."""
    unless_found: tuple[str, ...] = ()
    """Dropped when any of these rules holds: a finding for what the others leave unexplained."""
    written_expr: Expr | None = None
    """The condition as written, naming records (None when it names none: `expr` is it)."""
    records: tuple[Record, ...] = ()
    """The records the condition uses, directly or through others, in definition order."""
    collect: tuple[str, ...] = ()
    """Evidence to gather from the server's own processes when the rule fires (`stacks`)."""

    @cached_property
    def selectors_read(self) -> tuple[Selector, ...]:
        """Every selector of the rule's condition, evidence and fixes."""
        exprs = [self.expr, *self.evidence.values()]
        for suggestion in self.suggestions:
            exprs += [e for e in (suggestion.current, suggestion.proposed, suggestion.when) if e]
        return tuple(selector for expr in exprs for selector in selectors(expr))

    @cached_property
    def names_read(self) -> frozenset[str]:
        """Every series name the rule's condition, evidence and fixes read (`vtop:` settings
        and `nvml:` GPU series included)."""
        return frozenset(selector.name for selector in self.selectors_read)

    @cached_property
    def reach_s(self) -> float:
        """How far before the evaluation time the rule reads samples: a range's width or an
        instant selector's lookback, plus its offset (the history a store must keep)."""
        return max(map(reach_s, self.selectors_read), default=0.0)

    @cached_property
    def settings(self) -> frozenset[str]:
        """The `vtop:` settings (without the prefix) the rule's expressions read."""
        return frozenset(
            name.removeprefix("vtop:") for name in self.names_read if name.startswith("vtop:")
        )

    def prometheus_expr(self, local: frozenset[str] = frozenset()) -> str | None:
        """The condition as a Prometheus server can evaluate it (naming the records; those in
        `local` need vtop's data); None when it needs vtop's data."""
        written = self.written_expr or self.expr
        exportable = for_prometheus(written, local)
        if exportable is None:
            return None
        return " ".join(self.expr_text.split()) if exportable == written else to_text(exportable)
