"""Load the rules of directories: user rules over the shipped ones, records expanded, checks
across files; every error names its file and line."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from vtop.core.rules.promql.ast import Expr, selectors, shared
from vtop.core.rules.records import RECORD_NAME, Record, RecordUseError, closure, expand
from vtop.core.rules.rule import Rule, RuleError, RuleFileError, Suggestion
from vtop.core.rules.rule_file import load_file, rule_files


def _packaged_rules_dir() -> Path:
    """The shipped rules: the top-level rules/ of a checkout, or vtop/rules in an install."""
    checkout = Path(__file__).resolve().parents[3] / "rules"
    if (checkout / "queue.yaml").is_file():
        return checkout
    return Path(__file__).resolve().parents[2] / "rules"


PACKAGED = _packaged_rules_dir()


def load_rules(directories: Iterable[Path] = (PACKAGED,)) -> list[Rule]:
    """Rules from directories in order, records expanded; a rule or record in a later
    directory with the same id or name overrides an earlier one (user rules over the shipped
    ones); the same id twice in one directory is an error naming both places."""
    by_id: dict[str, Rule] = {}
    records: dict[str, Record] = {}
    errors: list[RuleError] = []
    for directory in directories:
        here: dict[str, Rule] = {}
        for path in rule_files(directory):
            try:
                rules, file_records = load_file(path)
            except RuleFileError as problem:
                errors.extend(problem.errors)
                continue
            for rule in rules:
                if rule.id in here:
                    first = here[rule.id]
                    message = f"duplicate rule id {rule.id!r} (also at {first.path}:{first.line})"
                    errors.append(RuleError(rule.path, rule.line, message))
                here[rule.id] = by_id[rule.id] = rule
            errors += _add_records(file_records, records)
    expanded = [_with_records(rule, records, errors) for rule in by_id.values()]
    errors.extend(_cross_check(expanded))
    if errors:
        raise RuleFileError(errors)
    nodes: dict[Expr, Expr] = {}
    return [_sharing(rule, nodes) for rule in expanded]


def _sharing(rule: Rule, nodes: dict[Expr, Expr]) -> Rule:
    """The rule with its subexpressions taken from `nodes` (see `ast.shared`)."""

    def one(expr: Expr | None) -> Expr | None:
        return None if expr is None else shared(expr, nodes)

    suggestions = tuple(
        dataclasses.replace(s, current=one(s.current), proposed=one(s.proposed), when=one(s.when))
        for s in rule.suggestions
    )
    evidence = {name: shared(expr, nodes) for name, expr in rule.evidence.items()}
    return dataclasses.replace(
        rule, expr=shared(rule.expr, nodes), evidence=evidence, suggestions=suggestions
    )


def _add_records(new: list[Record], records: dict[str, Record]) -> list[RuleError]:
    """Expand each record with those defined before it and add it; errors for the rest."""
    errors = []
    for record in new:
        try:
            expanded = expand(record.expr, records)
        except RecordUseError as problem:
            errors.append(RuleError(record.path, record.line, f"record {record.name}: {problem}"))
            continue
        unknown = [s.name for s in selectors(expanded) if RECORD_NAME.match(s.name)]
        if unknown:
            message = f"record {record.name} uses {unknown[0]}, which is not defined before it"
            errors.append(RuleError(record.path, record.line, message))
            continue
        records[record.name] = dataclasses.replace(record, expanded=expanded)
    return errors


def _with_records(rule: Rule, records: dict[str, Record], errors: list[RuleError]) -> Rule:
    """The rule with the records it names expanded (an error for an unknown or misused one)."""
    exprs = [rule.expr, *rule.evidence.values()]
    for suggestion in rule.suggestions:
        exprs += [e for e in (suggestion.current, suggestion.proposed, suggestion.when) if e]
    named = [s.name for e in exprs for s in selectors(e) if RECORD_NAME.match(s.name)]
    unknown = sorted(set(named) - set(records))
    if unknown:
        errors.append(
            RuleError(rule.path, rule.line, f"rule {rule.id} uses unknown record {unknown[0]}")
        )
        return rule
    if not named:
        return rule
    try:
        return dataclasses.replace(
            rule,
            expr=expand(rule.expr, records),
            written_expr=rule.expr,
            records=_used(rule.expr, records),
            evidence={k: expand(e, records) for k, e in rule.evidence.items()},
            suggestions=tuple(_expanded_suggestion(s, records) for s in rule.suggestions),
        )
    except RecordUseError as problem:
        errors.append(RuleError(rule.path, rule.line, f"rule {rule.id}: {problem}"))
        return rule


def _expanded_suggestion(suggestion: Suggestion, records: dict[str, Record]) -> Suggestion:
    """A suggestion with its expressions' records expanded."""

    def expanded(expr: Expr | None) -> Expr | None:
        return None if expr is None else expand(expr, records)

    return dataclasses.replace(
        suggestion,
        current=expanded(suggestion.current),
        proposed=expanded(suggestion.proposed),
        when=expanded(suggestion.when),
    )


def _used(expr: Expr, records: dict[str, Record]) -> tuple[Record, ...]:
    """The records an expression reads, directly or through others, in definition order."""
    found = closure(expr, {name: record.expr for name, record in records.items()})
    return tuple(record for name, record in records.items() if name in found)


def _cross_check(rules: list[Rule]) -> list[RuleError]:
    """Checks across files: `explains` and `unless_found` must name known rules."""
    known = {rule.id for rule in rules}
    return [
        RuleError(rule.path, rule.line, f"rule {rule.id} {key} unknown rule {other!r}")
        for rule in rules
        for key, others in (("explains", rule.explains), ("unless_found", rule.unless_found))
        for other in others
        if other not in known
    ]
