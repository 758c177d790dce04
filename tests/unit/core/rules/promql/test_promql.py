"""The PromQL subset: parsing errors with positions, and evaluation semantics over the store."""

from __future__ import annotations

import math

import pytest

from tests.support.frames import TARGET, frame_from_text
from vtop.core.rules.loader import load_rules
from vtop.core.rules.promql.ast import Expr
from vtop.core.rules.promql.evaluator import Context, EvaluationError, UnknownValueError, evaluate
from vtop.core.rules.promql.parser import PromQLError, parse
from vtop.core.rules.promql.printer import for_prometheus, to_text
from vtop.core.store.store import Store

TEXT = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} {r0}
vllm:num_requests_running{{engine="1",model_name="m"}} {r1}
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{engine="0",model_name="m"}} {p0}
vllm:num_preemptions_total{{engine="1",model_name="m"}} 0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",model_name="m",le="0.5"}} {b}
vllm:time_to_first_token_seconds_bucket{{engine="0",model_name="m",le="1.0"}} {c}
vllm:time_to_first_token_seconds_bucket{{engine="0",model_name="m",le="+Inf"}} {c}
"""


@pytest.fixture
def store() -> Store:
    store = Store()
    store.ingest(frame_from_text(0.0, TEXT.format(r0=2, r1=6, p0=0, b=0, c=0)))
    store.ingest(frame_from_text(10.0, TEXT.format(r0=4, r1=8, p0=20, b=10, c=20)))
    return store


def run(store: Store, expr: str, **config: float | None) -> object:
    return evaluate(
        parse(expr), Context(store, TARGET, 10.0, {f"vtop:{k}": v for k, v in config.items()})
    )


def test_selectors_and_aggregation(store: Store) -> None:
    assert run(store, "vllm:num_requests_running") == {
        (("engine", "0"), ("model_name", "m")): 4.0,
        (("engine", "1"), ("model_name", "m")): 8.0,
    }
    assert run(store, "sum(vllm:num_requests_running)") == {(): 12.0}
    assert run(store, 'max by (model_name) (vllm:num_requests_running{engine!="1"})') == {
        (("model_name", "m"),): 4.0
    }
    assert run(store, 'count(vllm:num_requests_running{engine=~"0|1"})') == {(): 2.0}


def test_range_functions(store: Store) -> None:
    assert run(store, "sum(rate(vllm:num_preemptions_total[1m]))") == {(): 2.0}
    assert run(store, "sum(increase(vllm:num_preemptions_total[1m]))") == {(): 20.0}
    assert run(store, 'avg_over_time(vllm:num_requests_running{engine="0"}[1m])') == {
        (("engine", "0"), ("model_name", "m")): 3.0
    }


def test_histogram_quantile_over_rates(store: Store) -> None:
    result = run(
        store,
        "histogram_quantile(0.75, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[1m])))",
    )
    assert result == {(): pytest.approx(0.75)}


def test_comparisons_filter_and_bool(store: Store) -> None:
    assert run(store, "vllm:num_requests_running > 5") == {
        (("engine", "1"), ("model_name", "m")): 8.0
    }
    assert run(store, "sum(vllm:num_requests_running > bool 5)") == {(): 1.0}


def test_vector_matching_and_set_operations(store: Store) -> None:
    ratio = run(store, "rate(vllm:num_preemptions_total[1m]) / vllm:num_requests_running")
    assert ratio == {
        (("engine", "0"), ("model_name", "m")): 0.5,
        (("engine", "1"), ("model_name", "m")): 0.0,
    }
    both = run(store, "vllm:num_requests_running > 3 and rate(vllm:num_preemptions_total[1m]) > 0")
    assert both == {(("engine", "0"), ("model_name", "m")): 4.0}
    rest = run(store, "vllm:num_requests_running unless rate(vllm:num_preemptions_total[1m]) > 0")
    assert isinstance(rest, dict) and list(rest) == [(("engine", "1"), ("model_name", "m"))]
    assert run(store, "sum(vllm:num_requests_running) and on () vllm:num_requests_running > 7") == {
        (): 12.0
    }


def test_config_values_are_scalars_and_unknown_ones_raise(store: Store) -> None:
    assert run(store, "vllm:num_requests_running >= vtop:max_num_seqs", max_num_seqs=8) == {
        (("engine", "1"), ("model_name", "m")): 8.0
    }
    assert run(store, "floor(0.9 * vtop:kv_capacity_tokens / 396)", kv_capacity_tokens=1024) == 2.0
    with pytest.raises(UnknownValueError, match="vtop:max_num_seqs"):
        run(store, "vllm:num_requests_running >= vtop:max_num_seqs", max_num_seqs=None)
    assert (
        run(store, "vtop:prefix_caching == 0 and vllm:num_requests_running", prefix_caching=1) == {}
    )


def test_or_holds_when_its_left_side_does_whatever_an_unknown_right_side_needs(
    store: Store,
) -> None:
    held = run(store, "vllm:num_requests_running > 7 or vtop:max_num_seqs > 1", max_num_seqs=None)
    assert held == {(("engine", "1"), ("model_name", "m")): 8.0}
    with pytest.raises(UnknownValueError, match="vtop:max_num_seqs"):
        run(store, "vllm:num_requests_running > 70 or vtop:max_num_seqs > 1", max_num_seqs=None)


def test_division_by_zero_follows_prometheus(store: Store) -> None:
    assert run(store, "1 / 0") == math.inf
    assert math.isnan(float(run(store, "0 / 0")))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("rate(x)", "range selector"),
        ("sum(x", "expected '\\)'"),
        ("x{a=1}", "expected 'string'"),
        ('x{a=~"("}', "bad regex"),
        ("frobnicate(x)", "unsupported function"),
        ("x @ 5", "unexpected character"),
    ],
)
def test_parse_errors_name_the_problem(source: str, message: str) -> None:
    with pytest.raises(PromQLError, match=message):
        parse(source)


def test_many_to_many_matching_is_an_error(store: Store) -> None:
    with pytest.raises(EvaluationError, match="many-to-many"):
        run(store, "vllm:num_requests_running + ignoring (engine) vllm:num_requests_running")


def every_rule_expression() -> list[Expr]:
    """Conditions, evidence and suggestion values of every shipped rule."""
    found: list[Expr] = []
    for rule in load_rules():
        found += [rule.expr, *rule.evidence.values()]
        for suggestion in rule.suggestions:
            found += [e for e in (suggestion.current, suggestion.proposed, suggestion.when) if e]
    return found


def test_printed_expressions_parse_back_to_the_same_tree() -> None:
    for expr in every_rule_expression():
        assert parse(to_text(expr)) == expr, to_text(expr)
    odd = 'sum without (a) (rate(x{b!~"c.*"}[90s] offset 1h)) > bool on (d) -y ^ 2'
    assert parse(to_text(parse(odd))) == parse(odd)


def test_prometheus_gets_the_condition_without_branches_only_vtop_can_evaluate() -> None:
    stricter = for_prometheus(parse("a > 1 and (b > 0.9 or b >= 1 - vtop:x)"))
    assert stricter is not None and to_text(stricter) == "(a > 1) and (b > 0.9)"
    assert for_prometheus(parse("a unless (b or vtop:x > 1)")) is None  # would alert more
    assert for_prometheus(parse("a > vtop:max_num_seqs")) is None
    assert for_prometheus(parse("nvml:gpu_util < 0.5 or a")) == parse("a")
