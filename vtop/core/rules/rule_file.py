"""Read and validate one rule file (YAML): every error names its file and line."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, cast

import yaml

from vtop.core.rules.promql.ast import Expr
from vtop.core.rules.promql.parser import PromQLError, parse, parse_duration
from vtop.core.rules.records import RECORD_KEYS, RECORD_NAME, Record
from vtop.core.rules.rule import (
    PHASES,
    SCOPES,
    SEVERITIES,
    Phase,
    Rule,
    RuleError,
    RuleFileError,
    Scope,
    Severity,
    Suggestion,
)

NODE_LOADER: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader
)
"""libyaml's composer where PyYAML was built with it: the shipped rules compose in 4 ms instead
of 68 (every command loads them), with the same nodes and line marks."""

RULE_KEYS = {
    "id",
    "title",
    "phase",
    "severity",
    "expr",
    "for",
    "scope",
    "evidence",
    "diagnosis",
    "suggest",
    "explains",
    "unless_found",
    "collect",
    "source",
}
COLLECTABLE = ("stacks",)
"""Evidence vtop gathers from the server's own processes when a rule fires (`collect:`)."""
T = TypeVar("T")
SUGGESTION_KEYS = {"flag", "when", "current", "proposed", "set", "why", "effect"}


class _Located:
    """Helpers bound to one file: errors carry its path and a node's line."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self.errors: list[RuleError] = []

    def error(self, node: yaml.Node, message: str) -> None:
        self.errors.append(RuleError(self.path, node.start_mark.line + 1, message))

    def expr(self, node: yaml.Node, label: str) -> Expr | None:
        """Parse a PromQL node; on error record it at the node's line."""
        if not isinstance(node, yaml.ScalarNode):
            self.error(node, f"{label} must be a PromQL string")
            return None
        try:
            return parse(str(node.value))
        except PromQLError as problem:
            self.error(node, f"{label}: {problem}")
            return None


def _mapping(node: yaml.Node) -> dict[str, yaml.Node]:
    """A mapping node's items by key."""
    assert isinstance(node, yaml.MappingNode)
    return {str(key.value): value for key, value in node.value}


def _text(node: yaml.Node | None) -> str:
    return "" if node is None or not isinstance(node, yaml.ScalarNode) else str(node.value)


def load_rule_file(path: Path, text: str | None = None) -> list[Rule]:
    """Parse and validate one rule file (records not expanded); raise RuleFileError listing
    every problem."""
    return load_file(path, text)[0]


def load_file(path: Path, text: str | None = None) -> tuple[list[Rule], list[Record]]:
    """The rules and records of one file; RuleFileError listing every problem."""
    located = _Located(path)
    try:
        root = yaml.compose(read_text_file(path) if text is None else text, Loader=NODE_LOADER)
    except yaml.YAMLError as problem:
        mark = getattr(problem, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise RuleFileError([RuleError(path, line, f"invalid YAML: {problem}")]) from None
    if not isinstance(root, yaml.MappingNode) or not {"rules", "records"} & set(_mapping(root)):
        message = "expected a mapping with a 'rules' or 'records' list"
        raise RuleFileError([RuleError(path, 1, message)])
    fields = _mapping(root)
    rules = _items(fields.get("rules"), "rules", located, _rule)
    records = _items(fields.get("records"), "records", located, _record)
    if located.errors:
        raise RuleFileError(located.errors)
    return rules, records


def _items(
    node: yaml.Node | None,
    key: str,
    located: _Located,
    read: Callable[[yaml.Node, _Located], T | None],
) -> list[T]:
    """The valid items of a `rules:` or `records:` list."""
    if node is None:
        return []
    if not isinstance(node, yaml.SequenceNode):
        located.error(node, f"'{key}' must be a list")
        return []
    return [item for child in node.value if (item := read(child, located)) is not None]


def _record(node: yaml.Node, located: _Located) -> Record | None:
    """One `record:` entry, or None after recording its errors."""
    if not isinstance(node, yaml.MappingNode):
        located.error(node, "a record must be a mapping")
        return None
    fields = _mapping(node)
    unknown = sorted(set(fields) - RECORD_KEYS)
    missing = sorted(RECORD_KEYS - set(fields))
    if unknown or missing:
        problems = [f"unknown key(s) {', '.join(unknown)}"] * bool(unknown)
        problems += [f"missing {', '.join(missing)}"] * bool(missing)
        located.error(node, f"record: {'; '.join(problems)}")
        return None
    name = _text(fields["record"])
    if not RECORD_NAME.match(name):
        located.error(fields["record"], f"record name {name!r} is not level:metric:operations")
        return None
    expr = located.expr(fields["expr"], f"record {name} expr")
    if expr is None:
        return None
    text = _text(fields["expr"]).strip()
    return Record(name, expr, text, expr, str(located.path), node.start_mark.line + 1)


def _rule(node: yaml.Node, located: _Located) -> Rule | None:
    """One rule, or None after recording its errors."""
    if not isinstance(node, yaml.MappingNode):
        located.error(node, "a rule must be a mapping")
        return None
    fields = _mapping(node)
    before = len(located.errors)
    if not _has_required_keys(node, fields, located):
        return None
    rule_id = _text(fields["id"])
    _check_choice(fields["phase"], PHASES, "phase", located)
    _check_choice(fields["severity"], SEVERITIES, "severity", located)
    if "scope" in fields:
        _check_choice(fields["scope"], SCOPES, "scope", located)
    expr = located.expr(fields["expr"], f"rule {rule_id} expr")
    for_s = _duration(fields.get("for"), located)
    evidence = _evidence(fields.get("evidence"), located, rule_id)
    suggestions = _suggestions(fields.get("suggest"), located, rule_id)
    _check_placeholders(fields["diagnosis"], evidence, located)
    if expr is None or len(located.errors) > before:
        return None
    return Rule(
        id=rule_id,
        title=_text(fields["title"]),
        phase=cast(Phase, _text(fields["phase"])),
        severity=cast(Severity, _text(fields["severity"])),
        expr=expr,
        expr_text=_text(fields["expr"]).strip(),
        for_s=for_s,
        diagnosis=" ".join(_text(fields["diagnosis"]).split()),
        evidence=evidence,
        suggestions=suggestions,
        explains=tuple(_strings(fields.get("explains"), located, "explains")),
        source=_text(fields.get("source")),
        path=str(located.path),
        line=node.start_mark.line + 1,
        scope=cast(Scope, _text(fields.get("scope")) or "target"),
        unless_found=tuple(_strings(fields.get("unless_found"), located, "unless_found")),
        collect=_collect(fields.get("collect"), located),
    )


def _collect(node: yaml.Node | None, located: _Located) -> tuple[str, ...]:
    """The `collect:` list: each one of COLLECTABLE."""
    named = tuple(_strings(node, located, "collect", "evidence names"))
    for name in named:
        if name not in COLLECTABLE:
            assert node is not None
            located.error(node, f"collect: {name!r} is not one of {', '.join(COLLECTABLE)}")
    return named


def _has_required_keys(node: yaml.Node, fields: dict[str, yaml.Node], located: _Located) -> bool:
    """Report unknown and missing keys; False when a required one is missing."""
    for key in sorted(fields.keys() - RULE_KEYS):
        located.error(fields[key], f"unknown key {key!r}")
    missing = [
        k for k in ("id", "title", "phase", "severity", "expr", "diagnosis") if k not in fields
    ]
    for key in missing:
        located.error(node, f"rule is missing {key!r}")
    return not missing


def _check_choice(node: yaml.Node, choices: tuple[str, ...], label: str, located: _Located) -> None:
    if _text(node) not in choices:
        located.error(node, f"{label} must be one of {', '.join(choices)}")


def _duration(node: yaml.Node | None, located: _Located) -> float:
    """The `for` duration in seconds (0 when absent)."""
    if node is None:
        return 0.0
    try:
        return parse_duration(_text(node))
    except PromQLError:
        located.error(node, f"bad duration {_text(node)!r} (use e.g. 30s, 2m)")
        return 0.0


def _evidence(node: yaml.Node | None, located: _Located, rule_id: str) -> dict[str, Expr]:
    """Named evidence expressions."""
    if node is None:
        return {}
    if not isinstance(node, yaml.MappingNode):
        located.error(node, "evidence must be a mapping of name: expression")
        return {}
    found: dict[str, Expr] = {}
    for name, value in _mapping(node).items():
        expr = located.expr(value, f"rule {rule_id} evidence {name!r}")
        if expr is not None:
            found[name] = expr
    return found


def _suggestions(node: yaml.Node | None, located: _Located, rule_id: str) -> tuple[Suggestion, ...]:
    """The `suggest:` list."""
    if node is None:
        return ()
    if not isinstance(node, yaml.SequenceNode):
        located.error(node, "suggest must be a list")
        return ()
    found = []
    for item in node.value:
        suggestion = _suggestion(item, located, rule_id)
        if suggestion is not None:
            found.append(suggestion)
    return tuple(found)


def _suggestion(node: yaml.Node, located: _Located, rule_id: str) -> Suggestion | None:
    """One suggestion: flag + proposed expression, or a literal `set`."""
    if not isinstance(node, yaml.MappingNode):
        located.error(node, "a suggestion must be a mapping")
        return None
    fields = _mapping(node)
    for key in sorted(fields.keys() - SUGGESTION_KEYS):
        located.error(fields[key], f"unknown suggestion key {key!r}")
    if "flag" not in fields or "why" not in fields:
        located.error(node, "a suggestion needs 'flag' and 'why'")
        return None
    if ("proposed" in fields) == ("set" in fields):
        located.error(node, "a suggestion needs exactly one of 'proposed' (expression) or 'set'")
        return None
    label = f"rule {rule_id} suggestion {_text(fields['flag'])}"
    return Suggestion(
        flag=_text(fields["flag"]),
        why=" ".join(_text(fields["why"]).split()),
        effect=" ".join(_text(fields.get("effect")).split()),
        current=located.expr(fields["current"], label + " current")
        if "current" in fields
        else None,
        proposed=located.expr(fields["proposed"], label + " proposed")
        if "proposed" in fields
        else None,
        literal=_text(fields["set"]) if "set" in fields else None,
        when=located.expr(fields["when"], label + " when") if "when" in fields else None,
    )


PLACEHOLDER = re.compile(r"\{(\w+)(?::[^}]*)?\}")


def _check_placeholders(node: yaml.Node, evidence: dict[str, Expr], located: _Located) -> None:
    """Every {name} in the diagnosis must be an evidence name."""
    for name in PLACEHOLDER.findall(_text(node)):
        if name not in evidence:
            located.error(node, f"diagnosis uses {{{name}}} but evidence has no {name!r}")


def _strings(
    node: yaml.Node | None, located: _Located, key: str, what: str = "rule ids"
) -> list[str]:
    if node is None:
        return []
    if not isinstance(node, yaml.SequenceNode):
        located.error(node, f"{key} must be a list of {what}")
        return []
    return [_text(item) for item in node.value]


def rule_files(directory: Path) -> list[Path]:
    """Rule files in a directory (not its tests/)."""
    return sorted(p for p in directory.glob("*.yaml") if p.is_file())


def read_text_file(path: Path) -> str:
    """A rule or test file's text; RuleFileError (naming the file) when it cannot be read."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise RuleFileError([RuleError(path, line, f"not UTF-8 text ({error.reason})")]) from None
    except OSError as error:
        raise RuleFileError(
            [RuleError(path, 1, f"cannot read: {error.strerror or error}")]
        ) from None
