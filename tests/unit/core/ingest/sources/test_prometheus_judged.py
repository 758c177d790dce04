"""The judged read of Prometheus: settings from each server's cache_config_info, servers
grouped by them, one query per group (each answered for its own servers when several)."""

from __future__ import annotations

import pytest

from vtop.cli.judging import JUDGED_INTERVAL_S, resolved
from vtop.core.config.settings import (
    JUDGE_IN_PROMETHEUS_FROM,
    SettingsError,
    judged_in_prometheus,
    load_settings,
)
from vtop.core.ingest.sources.prometheus import Point
from vtop.core.ingest.sources.prometheus_judged import (
    MOST_GROUPS,
    alert_points,
    judged_queries,
    restricted,
    server_settings,
    settings_groups,
)
from vtop.core.rules.judge import FleetJudge
from vtop.core.rules.loader import load_rules
from vtop.core.rules.promql.ast import selectors
from vtop.core.rules.promql.parser import parse


def info(instance: str, tokens: str) -> Point:
    labels = {
        "__name__": "vllm:cache_config_info",
        "instance": instance,
        "job": "vllm",
        "engine": "0",
        "block_size": "16",
        "num_gpu_blocks": str(int(tokens) // 16),
        "kv_cache_size_tokens": tokens,
        "enable_prefix_caching": "True",
        "gpu_memory_utilization": "0.9",
    }
    return Point(labels, 0.0, 1.0)


def test_servers_are_grouped_by_the_settings_they_report() -> None:
    base = [info("a:1", "16000"), info("b:1", "16000"), info("c:1", "64000")]
    settings = server_settings(base)
    assert settings["a:1"]["block_size"] == 16 and settings["c:1"]["kv_capacity_tokens"] == 64000
    groups = settings_groups(["a:1", "b:1", "c:1", "d:1"], settings)
    assert sorted(groups.values()) == [["a:1", "b:1"], ["c:1"], ["d:1"]]  # d:1 reports none


def test_one_query_per_group_each_for_its_servers_and_one_for_the_fleet() -> None:
    judge = FleetJudge(load_rules())
    alone = judged_queries(judge, ["a:1", "b:1"], [info("a:1", "16000"), info("b:1", "16000")])
    assert len(alone) == 2 and "and on (instance) up{" not in alone[0]  # one group: no filter
    split = judged_queries(judge, ["a:1", "c:1"], [info("a:1", "16000"), info("c:1", "64000")])
    assert len(split) == 3
    assert sum('up{instance=~"a:1"}' in q for q in split) == 1
    assert sum('up{instance=~"c:1"}' in q for q in split) == 1


def test_a_group_of_several_is_answered_for_its_own_servers() -> None:
    judge = FleetJudge(load_rules())
    query = judge.target_query({"block_size": 16.0, "kv_capacity_tokens": 100_000.0})
    assert query is not None
    query = restricted(query, ["10.0.0.1:8000", "pod.ns.svc:8000"])
    [up] = selectors(parse(query.rsplit("and on (instance) ", 1)[1]))
    assert up.name == "up" and up.matchers[0].value == r"10\.0\.0\.1:8000|pod\.ns\.svc:8000"


def test_alerts_come_with_their_for_state() -> None:
    labels = {"instance": "a:1", "alertstate": "firing", "alertname": "VllmX", "rule_id": "X"}
    alert, state = alert_points([(labels, 90.0)], 100.0)
    assert alert.labels["__name__"] == "ALERTS" and alert.value == 1.0
    assert state.labels["__name__"] == "ALERTS_FOR_STATE" and state.value == 90.0
    assert "alertstate" not in state.labels


def test_who_judges_a_fleet() -> None:
    url = {"prometheus": "http://prometheus:9090"}
    auto = load_settings(url, env={})
    assert not judged_in_prometheus(auto, JUDGE_IN_PROMETHEUS_FROM - 1)
    assert judged_in_prometheus(auto, JUDGE_IN_PROMETHEUS_FROM)
    assert judged_in_prometheus(load_settings({**url, "prometheus_judge": "prometheus"}, {}), 1)
    assert not judged_in_prometheus(load_settings({**url, "prometheus_judge": "vtop"}, {}), 999)
    alerts = load_settings({**url, "prometheus_alerts": True}, env={})
    assert not judged_in_prometheus(alerts, 999)  # the alerts it fires are read instead
    with pytest.raises(SettingsError, match="prometheus_judge = 'maybe'"):
        load_settings({**url, "prometheus_judge": "maybe"}, env={})


def test_judged_in_prometheus_a_tick_is_at_least_five_seconds() -> None:
    url = {"prometheus": "http://prometheus:9090"}
    judged = resolved(load_settings({**url, "prometheus_judge": "prometheus"}, env={}))
    assert judged.findings_from_prometheus and judged.interval_s == JUDGED_INTERVAL_S
    raw = resolved(load_settings({**url, "prometheus_judge": "vtop"}, env={}))
    assert not raw.findings_from_prometheus and raw.interval_s == 1.0
    unreachable = {"prometheus": "http://127.0.0.1:9", "timeout_s": 1.0}
    assert resolved(load_settings(unreachable, env={})).prometheus_judge == "vtop"  # auto


def test_servers_of_many_settings_cost_a_bounded_number_of_queries() -> None:
    tokens = [str(16_000 + 16 * i) for i in range(3 * MOST_GROUPS)]  # a pool per GPU's memory
    base = [info(f"s{i}:1", t) for i, t in enumerate(tokens)]
    groups = settings_groups([f"s{i}:1" for i in range(len(tokens))], server_settings(base))
    assert len(groups) == MOST_GROUPS
    assert sum(len(members) for members in groups.values()) == len(tokens)
    shared = dict(max(groups.items(), key=lambda group: len(group[1]))[0])
    assert "kv_capacity_tokens" not in shared and shared["block_size"] == 16  # what they share
