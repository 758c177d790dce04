"""A thousand replicas judged inside Prometheus (`--judge prometheus`), against a real
Prometheus scraping them: the findings per replica are the ones vtop's own triage of a direct
scrape gives, the router and the GPU exporter are no servers, the GPU rule judges the pod whose
GPU throttles, and the dashboard's feed shows the findings on its first tick."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.widgets import DataTable

from tests.e2e.test_prometheus_router import metrics_handler
from tests.support.app import header, screen_text, wait_for
from tests.support.dcgm_exporter import HW_SLOWDOWN, Gpu, dcgm_exposition
from tests.support.http_server import Canned, serving, serving_handler
from tests.support.payloads import fixture
from tests.support.prometheus_harness import prometheus_process, wait_for_samples
from tests.support.router import RouterMetrics
from tests.support.storm_server import storm_handler
from vtop.cli import main
from vtop.cli.judging import prometheus_reader, resolved
from vtop.core.config.settings import Settings, load_settings
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
from vtop.ui.actions import DashboardActions, Ui
from vtop.ui.app import VtopApp
from vtop.ui.screens.text_screen import TextScreen

REPLICAS = 1000
"""Healthy replicas in the farm (half in another settings group); two more are incidents."""
SCRAPE_S = 2
WINDOW_S = 40.0
"""G1 (the GPU's clocks held back) holds for 30 s before it is judged."""
DIRECT = 12
"""Farm replicas scraped directly too, beside the incidents (both settings groups)."""
HOT, COOL = 7, 8
"""The farm replicas whose pods hold the throttling GPU and a calm one."""
EXPORTER_POD = {"namespace": "gpu-operator", "pod": "dcgm-exporter-x7k2p"}


def name(url: str) -> str:
    return url.removeprefix("http://")


@contextmanager
def farm(count: int, workdir: Path, started: float) -> Iterator[list[str]]:
    """`count` healthy replicas served by one process of their own; their URLs."""
    ports = workdir / "ports"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fleet_farm", str(count), str(ports), str(started)],
        start_new_session=True,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not ports.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the farm did not start: {process.stderr and process.stderr.read()!r}")
            time.sleep(0.1)
        yield [f"http://127.0.0.1:{port}" for port in ports.read_text().split()]
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


def scrape_config(pods: dict[str, str], router: str, exporter: str) -> str:
    """Each replica with its pod's labels (as Kubernetes discovery gives them), the router,
    the GPU exporter with its own pod (its GPUs' pods kept as exported_pod)."""
    entries = "".join(
        f"      - targets: ['{target}']\n        labels: {{namespace: llm, pod: {pod}}}\n"
        for target, pod in pods.items()
    )
    return (
        f"global:\n  scrape_interval: {SCRAPE_S}s\n"
        "scrape_configs:\n"
        f"  - job_name: vllm\n    static_configs:\n{entries}"
        f"  - job_name: router\n    static_configs:\n      - targets: ['{router}']\n"
        "  - job_name: dcgm\n    static_configs:\n"
        f"      - targets: ['{exporter}']\n"
        f"        labels: {{namespace: {EXPORTER_POD['namespace']}, pod: {EXPORTER_POD['pod']}}}\n"
    )


def counters(url: str) -> dict[str, float]:
    """A server's samples now, by series name (engine labels summed)."""
    text = httpx.get(url + "/metrics", timeout=5).text
    found: dict[str, float] = {}
    for sample in ExpositionParser().parse(text).samples:
        found[sample.series.name] = found.get(sample.series.name, 0.0) + sample.value
    return found


def assert_incidents_hold(storm: str, frozen: str, healthy: str) -> None:
    """The precondition, measured: the storm preempts while its queue waits, the frozen server
    runs requests without a token, a healthy one makes tokens with nothing waiting."""
    before = {url: counters(url) for url in (storm, frozen, healthy)}
    time.sleep(2)
    after = {url: counters(url) for url in (storm, frozen, healthy)}

    def grew(url: str, series: str) -> float:
        return after[url][series] - before[url][series]

    assert grew(storm, "vllm:num_preemptions_total") > 0, (before[storm], after[storm])
    assert after[storm]["vllm:num_requests_waiting"] > 0, after[storm]
    assert grew(frozen, "vllm:generation_tokens_total") == 0, (before[frozen], after[frozen])
    assert after[frozen]["vllm:num_requests_running"] > 0, after[frozen]
    assert grew(healthy, "vllm:generation_tokens_total") > 0, (before[healthy], after[healthy])
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


async def first_ticks(url: str, on_screen: str) -> tuple[Session, dict[str, set[str]]]:
    """The dashboard's feed judged in Prometheus: its session after the first tick, and the
    series names of each server in the second, with `on_screen` on screen."""
    rules = load_rules()
    reader = judged_reader(FleetJudge(rules, SCRAPE_S), SCRAPE_S)
    client = PrometheusClient(url, ScrapeOptions(timeout_s=60))
    feed = PrometheusFeed(client, SCRAPE_S, reader=reader)
    session = Session(rules, DiagnoseOptions(), alerts=True)
    try:
        for frame in await feed.frames(time.time()):
            session.ingest(frame)
        feed.focus(on_screen)
        [second] = await feed.frames(time.time())
    finally:
        await feed.close()
    names = {s.target: {sample.series.name for sample in s.samples} for s in second.scrapes}
    return session, names


def findings_of(session: Session) -> dict[str, list[str]]:
    """The findings (rule ids, sorted) of each server that has some."""
    return {
        target: sorted(f.rule.id for f in view.triage.findings)
        for target, view in session.targets.items()
        if view.triage is not None and view.triage.findings
    }


def report_on_d(url: str, session: Session, target: str) -> str:
    """What the dashboard's `d` shows for a server judged in Prometheus (the app's means of
    showing text stood in for: its worker run at once)."""
    shown: list[str] = []

    async def never(title: str, body: str) -> bool:
        return False

    ui = Ui(never, lambda _, body: shown.append(body), lambda _: None, lambda work, _: work())
    settings = load_settings({"prometheus": url, "prometheus_judge": "prometheus"}, env={})
    actions = DashboardActions(settings, open_feed(settings), None, True, ui)
    actions.diagnosis(session, session.target(target))
    return "\n".join(shown)


def judged_dashboard(url: str, storm: str) -> tuple[str, list[str], str, str]:
    """The dashboard as `vtop --prometheus URL` starts it at 80x24 (`--judge auto`: a thousand
    servers are judged in Prometheus): its screen and first rows once the storm heads the
    table, then Enter on it and `d`: the server's header and the report shown."""
    settings = resolved(load_settings({"prometheus": url, "timeout_s": 60.0}, env={}))
    assert settings.prometheus_judge == "prometheus", settings
    return asyncio.run(_dashboard(settings, storm))


async def _dashboard(settings: Settings, storm: str) -> tuple[str, list[str], str, str]:
    """The dashboard's run under its Pilot (see judged_dashboard)."""
    rules = load_rules()
    feed = open_feed(settings, gpus=False, reader=prometheus_reader(settings, rules))
    app = VtopApp(settings, feed, rules, DiagnoseOptions())

    def first_rows() -> list[str]:
        table: DataTable[object] = app.screen.query_one(DataTable)
        rows = [table.get_row_at(i) for i in range(min(table.row_count, 3))]
        return [" | ".join(str(cell) for cell in row) for row in rows]

    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(
            pilot,
            lambda: first_rows()[:1] != [] and first_rows()[0].startswith(storm),
            60,
            first_rows,
        )
        shows_row = lambda: any(  # noqa: E731
            line.lstrip().startswith(storm) for line in screen_text(app).splitlines()
        )
        await wait_for(pilot, shows_row, 15, lambda: screen_text(app))
        await wait_for(
            pilot, lambda: "JUDGED IN PROM" in screen_text(app), 15, lambda: screen_text(app)
        )
        top, on_top = screen_text(app), first_rows()
        await pilot.press("enter")
        await wait_for(pilot, lambda: storm in header(app), 30, lambda: header(app))
        server = header(app)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, TextScreen), 60)
        assert isinstance(app.screen, TextScreen)
        return top, on_top, server, str(app.screen.body)


def test_a_thousand_replicas_judged_in_prometheus_as_a_direct_scrape_judges_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.time()
    router = RouterMetrics()
    with ExitStack() as stack:
        replicas = stack.enter_context(farm(REPLICAS, tmp_path, started))
        storm = stack.enter_context(serving_handler(storm_handler(started)))
        frozen = stack.enter_context(serving(Canned(fixture("underload"))))
        gpus = [
            Gpu(0, "llm", f"vllm-{HOT}", 97.0, throttle_reasons=HW_SLOWDOWN),
            Gpu(1, "llm", f"vllm-{COOL}", 96.0),
        ]
        exporter = stack.enter_context(
            serving_handler(metrics_handler(lambda: dcgm_exposition(gpus)))
        )

        def router_text() -> str:
            router.served(storm, 2, 1.0, running=4)
            router.served(replicas[0], 2, 0.5, running=2)
            return router.text()

        front = stack.enter_context(serving_handler(metrics_handler(router_text)))
        pods = {name(storm): "vllm-storm", name(frozen): "vllm-frozen"}
        pods |= {name(url): f"vllm-{i}" for i, url in enumerate(replicas)}
        config = scrape_config(pods, name(front), name(exporter))
        workdir = tmp_path / "prometheus"
        url, _ = stack.enter_context(prometheus_process([], workdir, None, config))
        wait_for_samples(url, "up == 1", REPLICAS + 4, timeout_s=60)
        assert_incidents_hold(storm, frozen, replicas[0])

        scraped = [storm, frozen, *replicas[:DIRECT]]
        direct = direct_report(scraped, WINDOW_S)
        since = f"{WINDOW_S:.0f}s"
        argv = ["diagnose", "--prometheus", url, "--since", since, "--step", f"{SCRAPE_S}s"]
        judged_code = main([*argv, "--judge", "prometheus", "--timeout", "60", "--json"])
        judged = json.loads(capsys.readouterr().out)
        session, second = asyncio.run(first_ticks(url, name(storm)))
        on_d = report_on_d(url, session, name(storm))
        top, on_top, server, shown_d = judged_dashboard(url, name(storm))

    judged_found = findings_by_server(judged)
    assert judged["judged_in"] == "prometheus"
    assert len(judged_found) == REPLICAS + 2  # the router and the GPU exporter are no servers
    assert [r["target"] for r in judged["routers"]] == [name(front)]
    direct_found = findings_by_server(direct)
    assert direct_found[name(storm)] == ["M1"] and direct_found[name(frozen)] == ["S1"], direct
    hot, cool = name(replicas[HOT]), name(replicas[COOL])
    gpu_pods = (hot, cool)  # their GPUs come from DCGM: a direct scrape has none to judge
    assert {t: judged_found[t] for t in direct_found if t not in gpu_pods} == {
        t: found for t, found in direct_found.items() if t not in gpu_pods
    }
    assert "G1" in judged_found[hot] and "G1" not in judged_found[cool], (judged_found[hot], cool)
    troubled = {t for t, found in judged_found.items() if found}
    assert troubled - {cool} == {name(storm), name(frozen), hot}, sorted(troubled)[:20]
    assert (
        fleet_findings(judged)
        == fleet_findings(direct)
        == [
            ("B1", name(storm)),
            ("B4", name(storm)),
        ]
    )
    assert judged_code == 2 and direct["exit_code"] == 2
    assert set(judged["evidence_of"]) >= {name(storm), name(frozen)}
    storm_report = next(s for s in judged["servers"] if s["target"] == name(storm))
    assert storm_report["primary"]["evidence"]["preemptions_per_s"] > 0  # the drill-down's
    # the feed's first tick: what Prometheus judged, held over the minute it read (the GPU
    # rules are vtop's own, on what the feed has seen: one tick)
    ticked = findings_of(session)
    assert {t: found for t, found in ticked.items() if t not in gpu_pods} == {
        t: found for t, found in judged_found.items() if found and t not in gpu_pods
    }
    # `d` on the storm: its raw series pulled from Prometheus, judged here, with the evidence
    assert "preemptions/s with the KV cache" in on_d and "--max-num-seqs" in on_d, on_d
    # the server on screen is read whole, the others by their headline series
    whole = "vllm:request_prompt_tokens_sum"
    assert whole in second[name(storm)] and whole not in second[name(frozen)], second[name(storm)]
    # the dashboard a user starts: judged in Prometheus (auto, a thousand servers), the storm
    # heads the table at 80x24, Enter opens it, `d` shows its evidence
    assert "JUDGED IN PROM" in top and " 1002 servers, 1002 live " in top, top
    assert " 1 router; across servers: B1@" in top, top
    assert "CRIT M1" in on_top[0], on_top
    assert name(storm) in server and "JUDGED IN PROM" in server, server
    assert "--max-num-seqs" in shown_d, shown_d
