"""Prometheus's semantics where vtop once differed (the conformance test against the real
Prometheus covers the subset at large; these name each case)."""

from __future__ import annotations

import math

import pytest

from tests.support.frames import TARGET, frame_from_text
from vtop.core.ops.rule_unittest import expand
from vtop.core.rules.engine import Engine
from vtop.core.rules.loader import load_rules
from vtop.core.rules.promql.evaluator import Context, EvaluationError, evaluate, evaluate_named
from vtop.core.rules.promql.functions import bucket_quantile, extrapolated_rate
from vtop.core.rules.promql.parser import PromQLError, parse
from vtop.core.store.store import Store

WAITING = """# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} {w}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} 4
vllm:num_requests_running{{engine="1",model_name="m"}} 2
# TYPE m_a gauge
m_a{{k="1",j="x"}} 1
m_a{{k="1",j="y"}} 2
m_b{{k="1"}} 10
m_c{{k="1",j="x"}} 3
m_w{{k="1"}} {w}
m_w{{k="2"}} 1
"""


def store_with(waiting: str, ticks: int = 3) -> Store:
    store = Store()
    for tick in range(ticks):
        store.ingest(frame_from_text(float(tick), WAITING.format(w=waiting)))
    return store


def value(expr: str, store: Store | None = None) -> object:
    return evaluate(parse(expr), Context(store or store_with("1"), TARGET, 2.0))


@pytest.mark.parametrize("waiting", ["+Inf", "-Inf", "NaN"])
def test_the_engine_survives_infinite_and_nan_gauges(waiting: str) -> None:
    store = store_with(waiting, ticks=40)
    triage = Engine(load_rules()).evaluate(store, TARGET, 39.0, {})
    assert not [e for e in triage.errors if "Overflow" in e or "math" in e]


def test_sums_and_means_of_infinities_follow_ieee() -> None:
    store = store_with("+Inf")
    assert value("sum(m_w)", store) == {(): math.inf}
    assert value("avg(m_w)", store) == {(): math.inf}
    both = value("sum(m_w) + sum(-m_w)", store)
    assert isinstance(both, dict) and math.isnan(both[()])


def test_nan_is_a_value_not_an_absence() -> None:
    store = store_with("NaN")
    total = value("sum(m_w)", store)
    assert isinstance(total, dict) and math.isnan(total[()])
    assert value("count(m_w)", store) == {(): 2.0}
    assert value("min(m_w)", store) == {(): 1.0}


def test_round_is_half_up_and_takes_to_nearest() -> None:
    assert value("round(vector(2.5))") == {(): 3.0}
    assert value("round(vector(-2.5))") == {(): -2.0}
    assert value("round(vector(7), 5)") == {(): 5.0}
    assert value("round(vector(7.5), 5)") == {(): 10.0}


def test_keywords_are_case_insensitive() -> None:
    assert value("SUM BY (engine) (vllm:num_requests_running) AND on (engine) vector(1)") == {}
    assert value("Sum(vllm:num_requests_running)") == {(): 6.0}


def test_a_sign_binds_less_tightly_than_a_power() -> None:
    assert value("-2 ^ 2") == -4.0
    assert value("2 ^ -1") == 0.5


def test_absent_keeps_the_equality_matchers_labels() -> None:
    assert value('absent(nope{k="1", j=~"x", m=""})') == {(("k", "1"),): 1.0}


def test_name_selectors_and_result_labels_after_matching() -> None:
    named = evaluate_named(
        parse('{__name__=~"m_[ab]", j="x"}'), Context(store_with("1"), TARGET, 2.0)
    )
    assert named == {(("__name__", "m_a"), ("j", "x"), ("k", "1")): 1.0}
    assert value("m_a / on (k) group_left m_b") == {
        (("j", "x"), ("k", "1")): 0.1,
        (("j", "y"), ("k", "1")): 0.2,
    }
    assert value("m_b - on (k) group_right m_a") == {
        (("j", "x"), ("k", "1")): 9.0,
        (("j", "y"), ("k", "1")): 8.0,
    }


def test_implicit_many_to_one_is_prometheus_s_error() -> None:
    with pytest.raises(EvaluationError, match="many-to-one matching must be explicit"):
        value("m_a / on (k) m_b")
    with pytest.raises(EvaluationError, match="same labelset"):
        value('-{__name__=~"m_a|m_c", j="x"}')


@pytest.mark.parametrize("pattern", ["(?=x)", "(a)\\\\1", "a++", "(?<name>a)", "x\\\\Z"])
def test_regexes_are_re2_and_python_only_syntax_is_refused(pattern: str) -> None:
    with pytest.raises(PromQLError, match="RE2"):
        parse(f'm_a{{j=~"{pattern}"}}')


@pytest.mark.parametrize(
    ("pattern", "matched", "unmatched"),
    [
        ("((?i)X)", "x", "y"),  # flags set inside a group hold to its end
        ("y|(?i)X", "x", "Y"),  # ... past a |, on the branches after them only
        ("m(a(?i)B|c)", "mC", "Mc"),
        ("(?i)x(?-i)Y", "XY", "Xy"),  # at the start: the whole pattern, unless unset
        ("[(?i)]", "?", "I"),  # in a class: characters
    ],
)
def test_regex_flags_inside_a_pattern_hold_as_in_re2(
    pattern: str, matched: str, unmatched: str
) -> None:
    store = Store()
    store.ingest(frame_from_text(0.0, f'm_a{{j="{matched}"}} 1\nm_a{{j="{unmatched}"}} 2\n'))
    found = evaluate(parse(f'm_a{{j=~"{pattern}"}}'), Context(store, TARGET, 0.0))
    assert found == {(("j", matched),): 1.0}
    negated = evaluate(parse(f'm_a{{j!~"{pattern}"}}'), Context(store, TARGET, 0.0))
    assert negated == {(("j", unmatched),): 2.0}


def test_rule_test_notation_reads_gaps_and_staleness_as_promtool_does() -> None:
    assert expand("1 _x2 stale 3+1x2 Inf") == [1.0, None, None, "stale", 3.0, 4.0, 5.0, math.inf]


def test_histogram_quantile_without_observations_is_nan_and_q_outside_is_infinite() -> None:
    store = Store()
    for tick in range(3):
        store.ingest(
            frame_from_text(
                float(tick),
                '# TYPE h histogram\nh_bucket{le="1"} 0\nh_bucket{le="+Inf"} 0\nh_count 0\n',
            )
        )
    nan = value("histogram_quantile(0.5, rate(h_bucket[1m]))", store)
    assert isinstance(nan, dict) and math.isnan(nan[()])
    assert value("histogram_quantile(2, rate(h_bucket[1m]))", store) == {(): math.inf}


def test_histogram_quantile_zero_in_an_empty_first_bucket_is_nan_as_in_go() -> None:
    assert math.isnan(bucket_quantile(0.0, [(1.0, 0.0), (2.0, 3.0), (math.inf, 3.0)]))
    assert bucket_quantile(0.5, [(1.0, 0.0), (2.0, 3.0), (math.inf, 3.0)]) == 1.5


def test_rate_rounds_as_prometheus_does_one_factor_per_second_included() -> None:
    """Figures promtool 2.42 gives for `rate(m[5m])` over `0+1x60` and `0+4x60` (1 s apart) at
    45 s and 50 s: the result times one factor, not the increase divided by the range."""

    def rate(step: float, at: int) -> float | None:
        times = [float(t) for t in range(at + 1)]
        values = [step * t for t in times]
        return extrapolated_rate(times[0], times[-1], values, at - 300.0, at, True, True)

    assert rate(1.0, 45) == 0.15000000000000002
    assert rate(4.0, 45) == 0.6000000000000001
    assert rate(4.0, 50) == 0.6666666666666667
