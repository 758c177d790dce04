"""The fleet judged inside Prometheus (`--judge prometheus`) against a real Prometheus: the
findings per replica are the ones vtop's own triage of a direct scrape gives, the router is no
server, the dashboard's feed shows them on its first tick."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_prometheus_router import metrics_handler
from tests.support.http_server import Canned, serving, serving_handler
from tests.support.payloads import fixture
from tests.support.prometheus_harness import prometheus, wait_for_samples
from tests.support.router import RouterMetrics
from tests.support.storm import CACHE_LABELS
from tests.support.storm_server import healthy_handler, storm_handler
from vtop.cli import main
from vtop.core.config.settings import load_settings
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.ingest.open_feed import open_feed
from vtop.core.ingest.sources.prometheus import PrometheusClient, PrometheusFeed
from vtop.core.ingest.sources.prometheus_judged import judged_reader
from vtop.core.ingest.sources.vllm_http import ScrapeOptions
from vtop.core.ingest.window import window_frames
from vtop.core.rules.judge import FleetJudge
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions, diagnose_fleet
from vtop.core.session.session import Session
from vtop.text.report import fleet_json_report

HEALTHY = 40
OTHER_SETTINGS = CACHE_LABELS.replace('kv_cache_size_tokens="1024"', 'kv_cache_size_tokens="4096"')
"""Half the healthy replicas report another KV capacity: two settings groups, two queries."""


def name(url: str) -> str:
    return url.removeprefix("http://")


def counters(url: str) -> dict[str, float]:
    """A server's samples now, by series name (engine labels summed)."""
    text = httpx.get(url + "/metrics", timeout=5).text
    found: dict[str, float] = {}
    for sample in ExpositionParser().parse(text).samples:
        found[sample.series.name] = found.get(sample.series.name, 0.0) + sample.value
    return found


def assert_incidents_hold(storm: str, frozen: str, healthy: str) -> None:
    """The precondition, measured: the storm preempts while its queue waits, the frozen server
    runs requests without a token, the healthy one makes tokens with nothing waiting."""
    before = {url: counters(url) for url in (storm, frozen, healthy)}
    time.sleep(2)
    after = {url: counters(url) for url in (storm, frozen, healthy)}

    def grew(url: str, series: str) -> float:
        return after[url][series] - before[url][series]

    preempted, waiting = grew(storm, "vllm:num_preemptions_total"), after[storm]
    assert preempted > 0 and waiting["vllm:num_requests_waiting"] > 0, (before, after)
    assert grew(frozen, "vllm:generation_tokens_total") == 0, (before[frozen], after[frozen])
    assert after[frozen]["vllm:num_requests_running"] > 0, after[frozen]
    assert grew(healthy, "vllm:generation_tokens_total") > 0, (before, after)
    assert after[healthy]["vllm:num_requests_waiting"] == 0, after[healthy]


def findings_by_server(report: dict[str, Any]) -> dict[str, list[str]]:
    """Each server's findings (rule ids, sorted), by host:port."""
    return {
        name(server["target"]): sorted(f["id"] for f in server["findings"])
        for server in report["servers"]
    }


def fleet_findings(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The fleet findings as (rule id, the instance they name)."""
    found = report["fleet"]["findings"]
    return sorted((f["id"], name(f["labels"]["instance"])) for f in found)


def direct_report(urls: list[str], window_s: float) -> dict[str, Any]:
    """vtop's own triage of the servers scraped directly for the window (the fleet report)."""
    settings = load_settings({"urls": tuple(urls), "interval_s": 1.0}, env={})
    frames = asyncio.run(window_frames(open_feed(settings, gpus=False), window_s))
    return fleet_json_report(diagnose_fleet(frames, load_rules(), DiagnoseOptions()))


def cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


async def first_tick(url: str) -> dict[str, list[str]]:
    """The dashboard's feed judged in Prometheus: the findings of its first tick."""
    rules = load_rules()
    reader = judged_reader(FleetJudge(rules, 1.0), 1.0)
    feed = PrometheusFeed(PrometheusClient(url, ScrapeOptions()), 1.0, reader=reader)
    session = Session(rules, DiagnoseOptions(), alerts=True)
    try:
        for frame in await feed.frames(time.time()):
            session.ingest(frame)
    finally:
        await feed.close()
    return {
        target: sorted(f.rule.id for f in view.triage.findings)
        for target, view in session.targets.items()
        if view.triage is not None
    }


def test_judged_in_prometheus_finds_what_a_direct_scrape_finds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.time()
    router = RouterMetrics()
    with ExitStack() as stack:
        storm = stack.enter_context(serving_handler(storm_handler(started)))
        frozen = stack.enter_context(serving(Canned(fixture("underload"))))
        healthy = [
            stack.enter_context(
                serving_handler(healthy_handler(started, OTHER_SETTINGS if i % 2 else CACHE_LABELS))
            )
            for i in range(HEALTHY)
        ]

        def router_text() -> str:
            router.served(storm, 2, 1.0, running=4)
            router.served(healthy[0], 2, 0.5, running=2)
            return router.text()

        front = stack.enter_context(serving_handler(metrics_handler(router_text)))
        servers = [storm, frozen, *healthy]
        targets = [name(url) for url in (*servers, front)]
        url = stack.enter_context(prometheus(targets, tmp_path / "prometheus"))
        wait_for_samples(url, "up == 1", len(targets))
        assert_incidents_hold(storm, frozen, healthy[0])

        direct = direct_report(servers, 30.0)
        argv = ["diagnose", "--prometheus", url, "--since", "30s", "--step", "1s"]
        judged_code, judged = cli_json([*argv, "--judge", "prometheus"], capsys)
        ticked = asyncio.run(first_tick(url))

    direct_found = findings_by_server(direct)
    assert direct_found[name(storm)] == ["M1"] and direct_found[name(frozen)] == ["S1"], direct
    assert judged["judged_in"] == "prometheus"
    assert findings_by_server(judged) == direct_found  # the router is not among the servers
    assert [r["target"] for r in judged["routers"]] == [name(front)]
    assert (
        fleet_findings(judged)
        == fleet_findings(direct)
        == [("B1", name(storm)), ("B4", name(storm))]
    )
    assert judged_code == direct["exit_code"] == 2
    assert sorted(judged["evidence_of"]) == sorted([name(storm), name(frozen)])
    storm_report = next(s for s in judged["servers"] if s["target"] == name(storm))
    assert storm_report["primary"]["evidence"]["preemptions_per_s"] > 0  # the drill-down's
    assert {k: v for k, v in ticked.items() if k != name(front)} == direct_found
