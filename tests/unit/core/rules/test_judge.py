"""The rules judged in Prometheus: the queries written for a group's settings, and the holds
tracked across evaluations as the engine tracks them."""

from __future__ import annotations

import pytest

from vtop.core.rules.export import ExportOptions
from vtop.core.rules.judge import RULE_LABEL, FleetJudge, Held, folded, judged_condition
from vtop.core.rules.loader import load_rules
from vtop.core.rules.promql.ast import Binary
from vtop.core.rules.promql.parser import parse
from vtop.core.rules.promql.printer import to_text
from vtop.core.rules.rule import Rule

SETTINGS = {
    "block_size": 16.0,
    "kv_capacity_tokens": 100_000.0,
    "num_engines": 1.0,
    "num_gpu_blocks_override": 0.0,
    "kv_cache_memory_bytes": 0.0,
    "max_num_seqs": 256.0,
    "max_num_batched_tokens": 8192.0,
    "prefix_caching": 1.0,
}


@pytest.fixture(scope="module")
def rules() -> dict[str, Rule]:
    return {rule.id: rule for rule in load_rules()}


def test_a_comparison_of_settings_is_decided_here() -> None:
    assert folded(parse("1 == 1 and rate(x[1m]) > 0")) == parse("rate(x[1m]) > 0")
    assert folded(parse("1 == 2 and rate(x[1m]) > 0")) is False
    assert folded(parse("y > 0 or 2 * 1 >= 3")) == parse("y > 0")
    assert folded(parse("y > 0 unless 1 > 2")) == parse("y > 0")
    assert folded(parse("(1 == 1) + y")) is None  # a constant PromQL could not take: not judged


def test_a_rule_needing_an_unknown_setting_is_not_judged_there(rules: dict[str, Rule]) -> None:
    unknown = judged_condition(rules["K1"], ExportOptions(settings={}), per_server=True)
    assert unknown is None
    on = judged_condition(rules["K1"], ExportOptions(settings=SETTINGS), per_server=True)
    assert isinstance(on, Binary) and "vtop:" not in to_text(on)
    off = {**SETTINGS, "prefix_caching": 0.0}
    assert judged_condition(rules["K1"], ExportOptions(settings=off), per_server=True) is False


def test_the_query_tags_each_judged_rule_and_reads_no_vtop_series(rules: dict[str, Rule]) -> None:
    judge = FleetJudge(list(rules.values()), 15.0)
    query = judge.target_query(SETTINGS)
    assert query is not None
    judged = judge.judged_ids(SETTINGS)
    assert {"M1", "S1", "Q1", "K1"} <= judged
    assert not {"G1", "F1", "B1"} & judged  # GPU (NVML) and canary series, a fleet rule
    options = ExportOptions(15.0, 15.0, SETTINGS)
    for rule_id in judged:  # in the query, or ruled out by a comparison of the settings
        ruled_out = judged_condition(rules[rule_id], options, per_server=True) is False
        assert (f'"{RULE_LABEL}", "{rule_id}"' in query) != ruled_out, rule_id
    assert not any(prefix in query for prefix in ("vtop:", "nvml:", "probe:", "lora:"))
    assert len(judge.judged_ids({})) < len(judged)  # fewer without the settings


def test_a_finding_needs_its_for_and_is_dated_from_its_start(rules: dict[str, Rule]) -> None:
    judge = FleetJudge(list(rules.values()))
    storm = [Held("a:1", "M1", (("engine", "0"),))]  # M1 holds for 5 s
    assert judge.fired(100.0, storm) == []
    assert judge.fired(103.0, storm) == []
    [fired] = judge.fired(106.0, storm)
    assert (fired.instance, fired.rule.id, fired.since) == ("a:1", "M1", 100.0)
    assert judge.fired(107.0, []) == []
    assert judge.fired(108.0, storm) == []  # held anew: its for: again


def test_findings_give_way_as_in_the_engine(rules: dict[str, Rule]) -> None:
    judge = FleetJudge(list(rules.values()))
    fallback = Held("a:1", "Q0", ())
    judge.fired(0.0, [fallback])
    specific = Held("a:1", "Q1", ())
    # Q0 (no limiter identified) fired; Q1 now holds but not for its for: Q1 is the finding
    assert [f.rule.id for f in judge.fired(11.0, [fallback, specific])] == ["Q1"]
    # Q1 fired while M1, its cause, holds but not yet for its for: M1 joins it
    judge = FleetJudge(list(rules.values()))
    judge.fired(0.0, [specific])
    cause = Held("a:1", "M1", ())
    assert sorted(f.rule.id for f in judge.fired(6.0, [specific, cause])) == ["M1", "Q1"]
    # a server's holds are its own
    other = Held("b:2", "Q0", ())
    judge.fired(20.0, [other])
    assert [f.instance for f in judge.fired(31.0, [other])] == ["b:2"]


def test_the_alerts_are_those_prometheus_writes(rules: dict[str, Rule]) -> None:
    judge = FleetJudge(list(rules.values()))
    answer = {
        "__name__": "vllm:num_preemptions_total",
        "instance": "a:1",
        "job": "vllm",
        "engine": "0",
        RULE_LABEL: "M1",
    }
    judge.alerts(10.0, [answer])
    [(labels, since)] = judge.alerts(20.0, [answer])
    assert since == 10.0
    assert labels["alertname"] == "VllmPreemptionStorm" and labels["alertstate"] == "firing"
    assert (labels["instance"], labels["job"], labels["engine"]) == ("a:1", "vllm", "0")
    assert labels["rule_id"] == "M1" and "__name__" not in labels and RULE_LABEL not in labels
