"""vtop's PromQL against the real Prometheus: hypothesis generates series and expressions inside
the documented subset, vtop evaluates them, and `promtool test rules` (Debian package prometheus)
checks vtop's answers as expectations. Every disagreement fails with the expression and both
answers."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.support.promql_oracle import (
    Answer,
    disagreements,
    promtool_file,
    run_promtool,
    vtop_answer,
)
from tests.support.promql_strategies import EVAL_TIMES_S, Case, cases

EXAMPLES = 300
SLOW_EXAMPLES = 3000
CLASSES: dict[str, Callable[[str], bool]] = {
    "names by regex": lambda expr: '{__name__=~"' in expr,
    "no metric name": lambda expr: re.search(r"(?<![\w:])\{(?!__name__)", expr) is not None,
    "inline regex flags": lambda expr: "(?i)" in expr,
    "grouped or matched on __name__": lambda expr: "(__name__" in expr or ", __name__)" in expr,
    "set operations": lambda expr: any(f" {op} " in expr.lower() for op in ("and", "or", "unless")),
    "ranges": lambda expr: "[" in expr,
}
"""Kinds of case the generator must reach, each at least MIN_PER_CLASS times (the test prints
the counts); ranges are also evaluated at 60 s, before the series have a whole range."""
MIN_PER_CLASS = 5


def generated(count: int) -> list[Case]:
    """`count` distinct cases (or as many as twice the draws give), the same on every run
    (derandomized, no example database)."""
    found: list[Case] = []

    @settings(
        max_examples=2 * count,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(cases())
    def collect(case: Case) -> None:
        found.append(case)

    collect()
    return list(dict.fromkeys(found))[:count]


def test_vtop_evaluates_like_prometheus(tmp_path: Path, slow: bool) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool missing: apt-get install prometheus (scripts/test does)")
    examples = generated(SLOW_EXAMPLES if slow else EXAMPLES)
    assert len(examples) >= (SLOW_EXAMPLES if slow else EXAMPLES) * 0.8
    counts = {name: sum(map(test, (c.expr for c in examples))) for name, test in CLASSES.items()}
    print(f"cases per class ({len(examples)} cases, {len(EVAL_TIMES_S)} times each): {counts}")
    assert min(counts.values()) >= MIN_PER_CLASS, counts
    answers: dict[tuple[int, int], Answer] = {
        (index, time_s): vtop_answer(case, time_s)
        for index, case in enumerate(examples)
        for time_s in EVAL_TIMES_S
    }
    output = run_promtool(promtool, promtool_file(examples, answers), tmp_path)
    found = disagreements(examples, answers, output)
    checked = len(answers)
    assert not found, (
        f"{len(found)} of {checked} evaluations differ from Prometheus:\n"
        + "\n".join(str(d) for d in found[:25])
    )
