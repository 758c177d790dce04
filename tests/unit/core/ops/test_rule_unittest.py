"""Rule unit tests (`vtop rules test`): the packaged ones pass, cover every rule; notation."""

from __future__ import annotations

import math
from pathlib import Path

from vtop.core.ops.rule_unittest import expand, run_rule_tests
from vtop.core.rules.loader import PACKAGED


def test_packaged_rule_tests_pass_and_cover_every_rule() -> None:
    problems, outcomes = run_rule_tests(PACKAGED)
    assert problems == []
    with_rules = [p for p in PACKAGED.glob("*.yaml") if "\nrules:" in "\n" + p.read_text()]
    assert len(outcomes) == len(with_rules) == len(list(PACKAGED.glob("*.yaml"))) - 1


def test_a_rule_file_without_test_fails(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "extra.yaml").write_text(
        "rules:\n  - id: X1\n    title: t\n    phase: queue\n    severity: info\n"
        "    expr: vllm:num_requests_waiting > 100\n    diagnosis: d\n"
    )
    problems, _ = run_rule_tests(tmp_path)
    assert any("extra.yaml: rule file has no test" in p for p in problems)
    assert any("rule X1 never fires" in p for p in problems)


def test_series_notation() -> None:
    assert expand("1 2 _ 3+2x3 0x2") == [1, 2, None, 3, 5, 7, 9, 0, 0, 0]
    assert expand("_x2 5-1x2") == [None, None, 5, 4, 3]  # _xN is N gaps, as in promtool
    points = expand("1 stale 2 Inf -Inf NaN")
    assert points[:5] == [1, "stale", 2, math.inf, -math.inf]
    assert isinstance(points[5], float) and math.isnan(points[5])
