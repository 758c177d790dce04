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
    ambiguous_in_prometheus_3,
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
the counts); ranges are also evaluated at 61 s, before the series have a whole range."""
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
    agrees_with_prometheus(promtool, examples, tmp_path)


def agrees_with_prometheus(promtool: str, examples: list[Case], scratch: Path) -> None:
    """vtop's answer to every case at every time checked by promtool; every disagreement fails
    with the expression and both answers."""
    answers: dict[tuple[int, int], Answer] = {
        (index, time_s): vtop_answer(case, time_s)
        for index, case in enumerate(examples)
        for time_s in EVAL_TIMES_S
    }
    output = run_promtool(promtool, promtool_file(examples, answers), scratch)
    found = disagreements(examples, answers, output)
    stricter = ambiguous_in_prometheus_3(found, promtool, scratch)
    print(f"{len(stricter)} evaluations ambiguous in Prometheus 3, filtered in 2.42")
    found = [d for d in found if d not in stricter]
    assert not found, (
        f"{len(found)} of {len(answers)} evaluations differ from Prometheus:\n"
        + "\n".join(str(d) for d in found[:25])
    )


COUNTER_NAMES = re.compile(r"\bm_([ab])\b")


def as_counters(case: Case) -> Case:
    """The case with its series named as counters (`m_a_total`), which the store then keeps as
    cumulative: it records their resets, and range functions trust that record (`grows`)."""
    series = tuple((COUNTER_NAMES.sub(r"m_\1_total", head), values) for head, values in case.series)
    return Case(series, COUNTER_NAMES.sub(r"m_\1_total", case.expr))


def test_range_functions_over_counters_the_store_keeps_evaluate_like_prometheus(
    tmp_path: Path,
) -> None:
    """rate/increase over series the store keeps as counters (with resets, gaps, NaN and +-Inf
    among the values): where the store recorded no reset in a range the reset scan is skipped,
    so the answers must still be Prometheus's."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool missing: apt-get install prometheus (scripts/test does)")
    examples = [as_counters(c) for c in generated(2 * EXAMPLES) if CLASSES["ranges"](c.expr)]
    rates = sum(bool(re.search(r"\b(rate|increase)\(", c.expr)) for c in examples)
    assert rates >= MIN_PER_CLASS, f"{rates} cases of rate or increase"
    agrees_with_prometheus(promtool, examples, tmp_path)
