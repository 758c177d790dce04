"""Prometheus's own test format as a second oracle: vtop's cases of where Prometheus 3 differs
from 2.42 (tests/data/promqltest), run as Prometheus runs its promqltest files, and the runner
itself shown to catch a wrong answer and to keep what it cannot judge apart."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

from tests.support.promqltest import judge, read_cases, run
from vtop.core.rules.promql.functions import mean, total

CASES = Path(__file__).parents[4] / "data" / "promqltest"
MIN_CASES = 20
"""The data file's cases (a file cut short would pass with fewer)."""


def test_vtop_answers_as_prometheus_3() -> None:
    tally = run(sorted(CASES.glob("*.test")))
    assert tally.counts["agree"] >= MIN_CASES, tally.counts
    assert set(tally.counts) == {"agree"}, "\n".join(tally.differences)


def test_the_runner_catches_a_wrong_answer(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.test"
    wrong.write_text(
        "load 1m\n  g 1 2 3\n\n"
        "eval instant at 2m sum_over_time(g[2m])\n  {} 6\n\n"
        "eval instant at 2m g > 5\n  g 3\n\n"
        "eval instant at 2m g\n  expect fail\n\n"
        "eval range from 0 to 2m step 1m g\n  g 1 2 3\n"
    )
    tally = run([wrong])
    assert tally.counts == {"differ": 3, "agree": 1}, tally.differences
    assert "vtop {} 5.0; Prometheus {} 6.0" in tally.differences[0]


def test_what_vtop_cannot_judge_is_counted_apart(tmp_path: Path) -> None:
    path = tmp_path / "outside.test"
    path.write_text(
        "load 1m\n  h {{schema:0 count:1 sum:1 buckets:[1]}}\n  c_total 0+1x5\n\n"
        "eval instant at 1m h\n  {} {{schema:0 count:1 sum:1 buckets:[1]}}\n\n"
        "eval instant at 1m topk(1, c_total)\n  c_total 1\n\n"
        "eval instant at 1m c_total @ 0\n  c_total 0\n\n"
        "eval instant at 1m c_total\n  expect warn\n  c_total 1\n\n"
        'eval instant at 1m c_total\n  expect string "x"\n\n'
        "eval instant at 1m c_total\n  c_total 1\n"
    )
    outcomes = [judge(scope, case)[0] for scope, case in read_cases(path)]
    assert outcomes == [
        "outside (native histogram)",
        "outside (beyond the subset)",
        "outside (beyond the subset)",
        "agree",
        "outside (string)",
        "agree",
    ]


def test_compensated_sums_keep_what_cancels_in_any_order() -> None:
    for order in itertools.permutations([1e100, 1.0, -1e100, 1.0]):
        assert (total(order), mean(order)) == (2.0, 0.5), order
    assert mean([1e308, 1e308, 1e308]) == 1e308  # the sum would overflow: a running mean
    assert math.isnan(total([math.inf, 1.0, -math.inf]))
    assert total([0.1] * 10) == 1.0  # the plain sum is 0.9999999999999999
