"""Rule files: data tests pass, every file and rule is tested, and errors carry file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from vtop.core.rules.loader import PACKAGED, load_rules
from vtop.core.rules.rule import RuleFileError
from vtop.core.rules.rule_file import load_rule_file


def test_required_triage_rules_exist() -> None:
    ids = {rule.id for rule in load_rules()}
    required = {
        "Q1",
        "Q2",
        "Q3",
        "Q4",
        "Q5",
        "M1",
        "M3",
        "M7",
        "K1",
        "K1-block",
        "K1-off",
        "P1",
        "P2",
        "L1",
        "L2",
        "L3",
        "L4",
        "ST2",
        "ST3",
        "SD1",
        "G1",
        "G2",
        "G3",
        "C1",
    }
    assert required <= ids


BROKEN = """rules:
  - id: B1
    title: broken
    phase: queueing
    severity: warning
    expr: rate(vllm:num_preemptions_total) > 0
    diagnosis: "{nothing} here"
    colour: red
  - id: B2
    title: missing fields
"""


def test_invalid_rule_file_reports_every_error_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    with pytest.raises(RuleFileError) as raised:
        load_rule_file(path)
    messages = [str(e) for e in raised.value.errors]
    assert any(m.startswith(f"{path}:4: phase must be one of") for m in messages)
    assert any(m.startswith(f"{path}:6:") and "range selector" in m for m in messages)
    assert any(m.startswith(f"{path}:7:") and "{nothing}" in m for m in messages)
    assert any(m.startswith(f"{path}:8:") and "unknown key 'colour'" in m for m in messages)
    assert any(m.startswith(f"{path}:9:") and "missing 'phase'" in m for m in messages)


def test_yaml_syntax_error_has_a_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("rules:\n  - id: [unclosed\n")
    with pytest.raises(RuleFileError, match=r"bad.yaml:\d+: invalid YAML"):
        load_rule_file(path)


def test_user_rules_override_packaged_rules_by_id(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(
        "rules:\n  - id: Q1\n    title: my Q1\n    phase: queue\n    severity: critical\n"
        "    expr: vllm:num_requests_waiting > 1000\n    diagnosis: mine\n"
    )
    rules = {rule.id: rule for rule in load_rules([PACKAGED, tmp_path])}
    assert rules["Q1"].title == "my Q1" and rules["Q1"].severity == "critical"
    assert "M1" in rules


def test_explains_must_name_known_rules(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(
        "rules:\n  - id: X\n    title: t\n    phase: queue\n    severity: info\n"
        "    expr: up > 0\n    diagnosis: d\n    explains: [NOPE]\n"
    )
    with pytest.raises(RuleFileError, match=r"x\.yaml:2: rule X explains unknown rule 'NOPE'"):
        load_rules([tmp_path])
