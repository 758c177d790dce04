"""The fleet's diagnosis by namespace and by model: replicas by verdict, their requests added
up, the worst replica first and what it has; in the fleet report's text and JSON."""

from __future__ import annotations

import dataclasses

from tests.support.frames import frame_from_texts
from tests.support.payloads import fixture
from tests.support.storm import CACHE_LABELS, STORM_TICK
from tests.support.storm_server import healthy_body
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.frame import Frame, ScrapeStatus, TargetScrape
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import diagnose_fleet
from vtop.text.report import fleet_json_report, fleet_text_report

STORMY, CALM, DOWN = "http://10.3.0.1:8000", "http://10.3.0.2:8000", "http://10.3.0.3:8000"


def in_namespace(text: str, namespace: str) -> str:
    """The exposition with the namespace Kubernetes discovery adds to every vLLM series."""
    return "\n".join(
        line.replace("{", f'{{namespace="{namespace}",', 1)
        if line.startswith("vllm:") and "{" in line
        else line
        for line in text.splitlines()
    )


def fleet(seconds: int = 20) -> list[Frame]:
    frames = []
    for t in range(seconds):
        stormy = STORM_TICK.format(
            p=3 * t, g=300 * t, n=t, ps=96 * t, gs=300 * t, cache_labels=CACHE_LABELS
        )
        texts = {
            STORMY: in_namespace(stormy, "batch"),
            CALM: in_namespace(fixture("idle"), "chat"),
        }
        scrapes = frame_from_texts(float(t), texts).scrapes
        down = TargetScrape(DOWN, ScrapeStatus.UNREACHABLE, error="connection refused")
        frames.append(Frame(float(t), (*scrapes, down)))
    return frames


def test_each_namespace_counts_its_verdicts_and_names_its_worst_replica() -> None:
    judged = diagnose_fleet(fleet(), load_rules(), DiagnoseOptions(15.0, read_gpus=False))
    by_namespace = {g.value: g for g in judged.groups if g.key == "namespace"}
    assert set(by_namespace) == {"batch", "chat", "(none)"}, by_namespace
    batch = by_namespace["batch"]
    assert batch.replicas == 1 and batch.verdicts == (("critical", 1),), batch
    assert batch.worst == STORMY and batch.worst_says.startswith("M1 "), batch
    assert by_namespace["(none)"].verdicts == (("unknown", 1),)
    namespaces = [g.value for g in judged.groups if g.key == "namespace"]
    assert namespaces[0] == "batch", namespaces  # the group with the worst replica first
    text = fleet_text_report(judged)
    assert "BY NAMESPACE" in text and "  batch (1 replica): 1 critical;" in text, text
    assert f"    worst {STORMY}: M1 " in text, text
    groups = fleet_json_report(judged)["groups"]
    first = groups[0]
    assert first["key"] == "namespace" and first["verdicts"] == {"critical": 1}, first
    assert first["waiting"] is not None and first["waiting"] > 0, first


def test_a_fleet_without_namespaces_is_grouped_by_model_only() -> None:
    frames = [
        frame_from_texts(float(t), {CALM: fixture("idle"), STORMY: fixture("idle")})
        for t in range(5)
    ]
    judged = diagnose_fleet(frames, load_rules(), DiagnoseOptions(4.0, read_gpus=False))
    assert {g.key for g in judged.groups} == {"model"}, judged.groups
    [model] = judged.groups
    assert model.replicas == 2 and model.value != "(none)", model


def test_a_fleet_judged_in_prometheus_says_so_and_lists_the_healthy_on_one_line() -> None:
    frames = []
    for t in range(20):
        stormy = STORM_TICK.format(
            p=3 * t, g=300 * t, n=t, ps=96 * t, gs=300 * t, cache_labels=CACHE_LABELS
        )
        texts = {STORMY: stormy, CALM: healthy_body(t + 1.0).decode()}
        frames.append(frame_from_texts(float(t), texts))
    found = diagnose_fleet(frames, load_rules(), DiagnoseOptions(15.0, read_gpus=False))
    assert [d.verdict for d in found.servers if d.target == CALM] == ["ok"], found.servers
    judged = dataclasses.replace(found, judged_in_prometheus=True, evidence_of=(STORMY,))
    text = fleet_text_report(judged)
    assert text.splitlines()[1].startswith("judged in Prometheus:"), text
    assert f"(raw series judged here): {STORMY}" in text, text
    assert f"vtop diagnose {STORMY}" in text and f"vtop diagnose {CALM}" not in text, text
    assert f"OK (1 servers, no finding): {CALM}" in text, text
    report = fleet_json_report(judged)
    assert report["judged_in"] == "prometheus" and report["evidence_of"] == [STORMY]
    assert {s["target"] for s in report["servers"]} == {STORMY, CALM}  # JSON lists every one
    assert fleet_json_report(found)["judged_in"] == "vtop"
