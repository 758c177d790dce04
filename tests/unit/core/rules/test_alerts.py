"""Findings from Prometheus's ALERTS (`vtop --prometheus URL --alerts`), no server needed."""

from __future__ import annotations

import dataclasses
import re

import pytest

from vtop.cli import main
from vtop.core.frame import Frame
from vtop.core.ingest.feed_status import Mode
from vtop.core.ingest.sources.prometheus import (
    HEADLINE_SELECTOR,
    Point,
    PrometheusClient,
    PrometheusFeed,
    names_of,
    scrapes_from,
)
from vtop.core.ingest.sources.vllm_http import ScrapeOptions
from vtop.core.rules.alerts import JUDGED_LABEL, merged, vtop_made_rules
from vtop.core.rules.engine import Finding, Triage
from vtop.core.rules.judge import FleetJudge
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions
from vtop.core.session.session import Session
from vtop.ui.shown import mode_words

STORMY, QUIET = "10.0.0.1:8000", "10.0.0.2:8000"


def points(at: float, firing: dict[str, list[tuple[str, str]]]) -> list[Point]:
    """Headline gauges of two servers and the alerts firing on each (name, rule id); alerts
    carry no `job` (an exported rule keeps only the labels it aggregates by)."""
    found = []
    for instance in (STORMY, QUIET):
        base = {"job": "vllm", "instance": instance}
        found.append(Point({"__name__": "vllm:num_requests_running", **base}, at, 4.0))
        found.append(Point({"__name__": "up", **base}, at, 1.0))
        for alertname, rule_id in firing.get(instance, []):
            labels = {"alertname": alertname, "alertstate": "firing", "rule_id": rule_id}
            found.append(Point({"__name__": "ALERTS", "instance": instance, **labels}, at, 1.0))
    return found


def alerts_session(
    ticks: list[dict[str, list[tuple[str, str]]]], rule_budget: int | None = None
) -> Session:
    """A session in alerts mode fed one frame per tick."""
    session = Session(load_rules(), DiagnoseOptions(), rule_budget=rule_budget, alerts=True)
    names = names_of({("vllm", STORMY), ("vllm", QUIET)})
    for at, firing in enumerate(ticks):
        session.ingest(Frame(float(at), scrapes_from(points(at, firing), names, {})))
    return session


def test_firing_alerts_are_the_findings_triaged_queue_first() -> None:
    firing = {STORMY: [("VllmPreemptionStorm", "M1"), ("VllmQueueAtSequenceCap", "Q2")]}
    session = alerts_session([firing, firing])
    triage = session.target(STORMY).triage
    assert triage is not None and [f.rule.id for f in triage.findings] == ["Q2", "M1"]
    assert "Prometheus fires VllmQueueAtSequenceCap" in triage.findings[0].diagnosis
    quiet = session.target(QUIET).triage
    assert quiet is not None and quiet.findings == () and quiet.unchecked == ()


def test_an_alert_that_stops_firing_clears_and_unknown_rules_are_ignored() -> None:
    firing = {STORMY: [("VllmPreemptionStorm", "M1"), ("SomeoneElsesAlert", "X9")]}
    session = alerts_session([firing, {}])
    triage = session.target(STORMY).triage
    assert triage is not None and triage.findings == ()
    assert any("M1 cleared" in mark.text for mark in session.marks)


def test_a_fleet_rule_alert_is_a_fleet_finding_about_its_instance() -> None:
    firing = {STORMY: [("VllmUnevenLoadAcrossReplicas", "B1"), ("VllmPreemptionStorm", "M1")]}
    session = alerts_session([firing])
    triage = session.target(STORMY).triage
    assert triage is not None and [f.rule.id for f in triage.findings] == ["M1"]
    assert session.fleet.triage is not None
    [imbalance] = session.fleet.triage.findings
    assert imbalance.rule.id == "B1" and dict(imbalance.labels)["instance"] == STORMY


def test_every_server_is_judged_every_frame_whatever_the_rule_budget() -> None:
    firing = {server: [("VllmPreemptionStorm", "M1")] for server in (STORMY, QUIET)}
    session = alerts_session([firing], rule_budget=1)
    for server in (STORMY, QUIET):
        triage = session.target(server).triage
        assert triage is not None and triage.primary is not None, server


async def test_the_header_says_the_findings_are_the_alerts_prometheus_fires() -> None:
    feed = PrometheusFeed(PrometheusClient("http://127.0.0.1:9", ScrapeOptions()), 1.0, True)
    try:
        status = feed.status(0.0)
    finally:
        await feed.close()
    assert status.mode is Mode.PROMETHEUS_ALERTS
    assert "ALERTS" in mode_words(status, 0.0)
    assert "ALERTS" not in mode_words(dataclasses.replace(status, mode=Mode.PROMETHEUS), 0.0)
    judged = dataclasses.replace(status, mode=Mode.PROMETHEUS_JUDGED)
    assert "JUDGED IN PROM" in mode_words(judged, 0.0)


def test_alerts_without_prometheus_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--alerts", "--plain", "--once"]) == 64
    assert "--alerts reads a Prometheus server's alerts" in capsys.readouterr().err


def test_the_headline_selector_reads_vllm_and_ray_serve_names_and_nothing_more() -> None:
    names = re.search(r'__name__=~"([^"]+)"', HEADLINE_SELECTOR)
    assert names is not None
    wanted = ["vllm:num_requests_running", "ray_vllm:kv_cache_usage_perc", "up"]
    wanted += ["ray_vllm_generation_tokens_total", "process_start_time_seconds"]
    assert all(re.fullmatch(names.group(1), name) for name in wanted)
    unwanted = ["vllm:time_to_first_token_seconds_bucket", "node_cpu_seconds_total"]
    assert not any(re.fullmatch(names.group(1), name) for name in unwanted)


def test_the_gpu_rules_are_vtops_own_beside_the_alerts() -> None:
    rules = load_rules()
    made = {rule.id for rule in vtop_made_rules(rules)}
    assert {"G1", "G2", "M3"} <= made and not {"M1", "Q1", "B1"} & made
    settings = {"block_size": 16.0, "kv_capacity_tokens": 1e5, "num_engines": 1.0}
    assert not made & FleetJudge(rules).judged_ids(settings)  # never judged twice (F5)
    by_id = {rule.id: rule for rule in rules}

    def finding(rule_id: str, symptoms: tuple[Finding, ...] = ()) -> Finding:
        return Finding(by_id[rule_id], (), 0.0, {}, rule_id, (), symptoms)

    # Q1 came with M1 from Prometheus (its symptom); G1 was found here
    from_prometheus = Triage((finding("M1", (finding("Q1"),)),), ())
    here = Triage((finding("G1"),), ())
    together = merged(from_prometheus, here)
    assert sorted(f.rule.id for f in together.findings) == ["G1", "M1"]
    storm = next(f for f in together.findings if f.rule.id == "M1")
    assert [s.rule.id for s in storm.symptoms] == ["Q1"]


def test_a_finding_judged_in_prometheus_says_so_and_dates_from_its_start() -> None:
    names = names_of({("vllm", STORMY), ("vllm", QUIET)})
    session = Session(load_rules(), DiagnoseOptions(), alerts=True)
    for at in (10.0, 11.0):
        found = points(at, {})
        alert = {"instance": STORMY, "alertname": "VllmPreemptionStorm", "rule_id": "M1"}
        alert |= {JUDGED_LABEL: "1"}
        found.append(Point({"__name__": "ALERTS", "alertstate": "firing", **alert}, at, 1.0))
        found.append(Point({"__name__": "ALERTS_FOR_STATE", **alert}, at, 4.0))
        session.ingest(Frame(at, scrapes_from(found, names, {})))
    triage = session.target(STORMY).triage
    assert triage is not None and triage.primary is not None
    assert triage.primary.diagnosis.startswith("judged in Prometheus: preemption storm")
    assert triage.primary.since == 4.0  # its ALERTS_FOR_STATE, not when vtop first saw it
