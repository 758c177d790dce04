"""vtop's PromQL against the real Prometheus: hypothesis generates series and expressions inside
the documented subset, vtop evaluates them, and `promtool test rules` (Debian package prometheus)
checks vtop's answers as expectations. Every disagreement fails with the expression and both
answers."""

from __future__ import annotations

import shutil
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


def generated(count: int) -> list[Case]:
    """`count` cases, the same on every run (derandomized, no example database)."""
    found: list[Case] = []

    @settings(
        max_examples=count,
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
    return list(dict.fromkeys(found))


def test_vtop_evaluates_like_prometheus(tmp_path: Path, slow: bool) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool missing: apt-get install prometheus (scripts/test does)")
    examples = generated(SLOW_EXAMPLES if slow else EXAMPLES)
    assert len(examples) >= (SLOW_EXAMPLES if slow else EXAMPLES) * 0.8
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
