"""The Prometheus source against a real Prometheus server scraping local /metrics servers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.http_server import Canned, serving, serving_handler
from tests.payloads import fixture
from tests.prometheus_harness import prometheus, wait_for_samples
from tests.test_diagnose import CACHE_LABELS, STORM_TICK
from vtop.cli import main
from vtop.core.diagnose import DiagnoseOptions, diagnose_prometheus
from vtop.core.exposition import ExpositionParser
from vtop.core.frame import ScrapeStatus, TargetScrape
from vtop.core.rules import load_rules
from vtop.core.sources.prometheus import PrometheusClient, PrometheusError, PrometheusFeed
from vtop.core.sources.vllm_http import ScrapeOptions

QUEUE_LINES = """# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{{engine="0",model_name="m"}} {q}
vllm:request_queue_time_seconds_count{{engine="0",model_name="m"}} {n}
"""
IDLE = """# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 500
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} 0
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} 5
"""


def storm_handler(started: float) -> type[BaseHTTPRequestHandler]:
    """/metrics of a server in a preemption storm, counters growing with time."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            t = time.time() - started + 1
            values = {"p": 3 * t, "g": 300 * t, "n": t, "ps": 96 * t, "gs": 300 * t, "q": 8 * t}
            body = STORM_TICK.format(cache_labels=CACHE_LABELS, **values)
            payload = (body + QUEUE_LINES.format(**values)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


def host_port(url: str) -> str:
    """http://127.0.0.1:8000 -> 127.0.0.1:8000 (Prometheus' instance label)."""
    return url.removeprefix("http://")


def own_samples(scrape: TargetScrape) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A scrape's samples as {(name, labels): value}."""
    return {(s.series.name, s.series.labels): s.value for s in scrape.samples}


async def live_frame(url: str) -> dict[str, TargetScrape]:
    """One live frame from Prometheus, scrapes by target."""
    feed = PrometheusFeed(PrometheusClient(url, ScrapeOptions()), 1.0)
    try:
        return await next_scrapes(feed)
    finally:
        await feed.close()


async def next_scrapes(feed: PrometheusFeed) -> dict[str, TargetScrape]:
    """The feed's next frame, scrapes by target."""
    [frame] = await feed.frames(time.time())
    return {scrape.target: scrape for scrape in frame.scrapes}


async def until_down(
    url: str, target: str, stop: Callable[[], object], timeout_s: float
) -> TargetScrape:
    """See `target` up, `stop` it, then poll the same feed until Prometheus has it down."""
    feed = PrometheusFeed(PrometheusClient(url, ScrapeOptions()), 1.0)
    try:
        assert (await next_scrapes(feed))[target].ok
        stop()
        deadline = time.time() + timeout_s
        while (state := (await next_scrapes(feed))[target]).ok and time.time() < deadline:
            await asyncio.sleep(0.5)
        return state
    finally:
        await feed.close()


def test_prometheus_gives_the_fleet_what_direct_scrapes_give(tmp_path: Path) -> None:
    with ExitStack() as stack:
        storm = stack.enter_context(serving_handler(storm_handler(time.time())))
        idle_stack = stack.enter_context(ExitStack())
        idle = idle_stack.enter_context(serving(Canned(IDLE)))
        real = stack.enter_context(serving(Canned(fixture("underload"))))
        names = [host_port(url) for url in (storm, idle, real)]
        url = stack.enter_context(prometheus(names, tmp_path / "prometheus"))
        wait_for_samples(url, "vllm:num_requests_running", 3)

        scrapes = asyncio.run(live_frame(url))
        assert sorted(scrapes) == sorted(names)
        assert all(scrape.ok for scrape in scrapes.values())
        direct = ExpositionParser().parse(fixture("underload"))
        expected = {
            (s.series.name, s.series.labels): s.value
            for s in direct.samples
            if s.series.name.startswith("vllm:") or s.series.name == "process_start_time_seconds"
        }
        assert own_samples(scrapes[names[2]]) == expected
        assert scrapes[names[2]].metric_types["vllm:num_preemptions_total"] == "counter"

        time.sleep(14)  # B1 must hold 10 s
        fleet = asyncio.run(
            diagnose_prometheus(
                url, 60, 1, load_rules(), DiagnoseOptions(), ScrapeOptions(), time.time()
            )
        )
        by_target = {d.target: d for d in fleet.servers}
        stormy = by_target[names[0]].triage
        assert stormy is not None and stormy.primary is not None
        assert stormy.primary.rule.id == "M1"
        assert by_target[names[1]].triage is None  # idle: no traffic, nothing to diagnose
        assert fleet.fleet is not None
        imbalance = [f for f in fleet.fleet.findings if f.rule.id == "B1"]
        assert [dict(f.labels)["instance"] for f in imbalance] == [names[0]]
        assert fleet.exit_code == 2

        state = asyncio.run(until_down(url, names[1], idle_stack.close, 15))
        assert state.status is ScrapeStatus.UNREACHABLE and "up == 0" in state.error


def test_not_prometheus_and_unreachable_are_clear_errors() -> None:
    async def ask(url: str) -> None:
        client = PrometheusClient(url, ScrapeOptions(timeout_s=2))
        try:
            await client.query("up", time.time())
        finally:
            await client.close()

    not_prometheus = Canned("<html>nope</html>", status=404, content_type="text/html")
    with (
        serving(not_prometheus) as url,
        pytest.raises(PrometheusError, match="not a Prometheus API answer"),
    ):
        asyncio.run(ask(url))
    with pytest.raises(PrometheusError, match=r"127\.0\.0\.1:9"):
        asyncio.run(ask("http://127.0.0.1:9"))


def test_diagnose_cli_without_prometheus_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["diagnose", "--prometheus", "http://127.0.0.1:9", "--since", "5m"])
    assert code == 3
    assert "vtop diagnose: http://127.0.0.1:9" in capsys.readouterr().err
