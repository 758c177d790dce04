"""Recording rules: named expressions rules use by name, expanded at load, errors with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from vtop.core.rules.loader import load_rules
from vtop.core.rules.promql.parser import parse
from vtop.core.rules.rule import RuleFileError

RULE = """rules:
  - id: R1
    title: queue
    phase: queue
    severity: warning
    expr: {expr}
    diagnosis: waiting
"""


def rules_in(tmp_path: Path, records: str, expr: str) -> Path:
    (tmp_path / "records.yaml").write_text("records:\n" + records)
    (tmp_path / "queue.yaml").write_text(RULE.format(expr=expr))
    return tmp_path


def test_a_rule_naming_a_record_is_evaluated_as_the_expression_it_stands_for(
    tmp_path: Path,
) -> None:
    records = (
        "  - record: engine:waiting:avg1m\n    expr: avg_over_time(w[1m])\n"
        "  - record: engine:waiting:double\n    expr: engine:waiting:avg1m * 2\n"
    )
    (rule,) = load_rules([rules_in(tmp_path, records, "engine:waiting:double > 1")])
    assert rule.expr == parse("avg_over_time(w[1m]) * 2 > 1")
    assert rule.written_expr == parse("engine:waiting:double > 1")
    assert [r.name for r in rule.records] == ["engine:waiting:avg1m", "engine:waiting:double"]


@pytest.mark.parametrize(
    ("records", "expr", "message"),
    [
        (
            "  - record: engine:a:b\n    expr: x\n",
            "engine:c:d > 1",
            "queue.yaml:2: rule R1 uses unknown record engine:c:d",
        ),
        (
            "  - record: engine:a:b\n    expr: x\n",
            'engine:a:b{k="1"} > 1',
            "can only be used by its bare name",
        ),
        ("  - record: plain\n    expr: x\n", "x > 1", "records.yaml:2: record name 'plain'"),
        (
            "  - record: engine:a:b\n    expr: engine:c:d\n  - record: engine:c:d\n    expr: x\n",
            "x > 1",
            "record engine:a:b uses engine:c:d, which is not defined before it",
        ),
        ("  - record: engine:a:b\n", "x > 1", "records.yaml:2: record: missing expr"),
    ],
)
def test_record_mistakes_name_the_file_and_line(
    tmp_path: Path, records: str, expr: str, message: str
) -> None:
    with pytest.raises(RuleFileError) as raised:
        load_rules([rules_in(tmp_path, records, expr)])
    assert message in str(raised.value)


def test_the_shipped_rules_share_their_subexpressions_through_records() -> None:
    rules = load_rules()
    named = [rule for rule in rules if rule.records]
    assert len(named) >= 10
    assert max(len(rule.expr_text) for rule in rules) < 800
