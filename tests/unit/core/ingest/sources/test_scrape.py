"""The HTTP source against a real local HTTP server: every outcome is typed, nothing raises."""

from __future__ import annotations

import socket

import pytest

from tests.support.http_server import Canned, serving
from tests.support.payloads import fixture
from vtop.core.config.effective_config import DiagnoseOptions, server_config
from vtop.core.config.server_config import Setting
from vtop.core.frame import ScrapeStatus, TargetScrape
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource, metrics_url


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def scrape_once(url: str, options: ScrapeOptions | None = None) -> TargetScrape:
    source = VllmHttpSource(url, options or ScrapeOptions(timeout_s=2.0))
    try:
        return await source.scrape()
    finally:
        await source.close()


def test_metrics_url_forms() -> None:
    assert metrics_url("127.0.0.1:8000") == "http://127.0.0.1:8000/metrics"
    assert metrics_url("https://h/metrics/") == "https://h/metrics"
    assert metrics_url("http://h:1/") == "http://h:1/metrics"


async def test_ok_scrape_keeps_raw_text_and_samples() -> None:
    canned = Canned(body=fixture("underload"))
    with serving(canned) as url:
        result = await scrape_once(url)
    assert result.status is ScrapeStatus.OK
    assert result.raw_text == canned.body
    assert len(result.samples) == 420
    assert result.target == url


async def test_bearer_token_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "sekrit")
    canned = Canned(body=fixture("idle"))
    with serving(canned) as url:
        await scrape_once(url, ScrapeOptions.from_env(timeout_s=2.0))
    assert canned.seen_headers[0]["Authorization"] == "Bearer sekrit"


async def test_server_version_is_asked_once_per_process_start() -> None:
    canned = Canned(body=fixture("idle"), others={"/version": '{"version": "0.32.0"}'})
    with serving(canned) as url:
        source = VllmHttpSource(url, ScrapeOptions(timeout_s=2.0))
        try:
            first, second = await source.scrape(), await source.scrape()
            canned.body = fixture("idle").replace(
                "process_start_time_seconds 1", "process_start_time_seconds 2"
            )
            canned.others["/version"] = '{"version": "0.33.0"}'
            restarted = await source.scrape()
        finally:
            await source.close()
    assert (first.server_version, second.server_version) == ("0.32.0", "0.32.0")
    assert restarted.server_version == "0.33.0"
    assert canned.seen_paths.count("/version") == 2
    assert all(h.get("Accept") for h in canned.seen_headers)


async def test_a_server_without_a_version_route_still_scrapes() -> None:
    canned = Canned(body=fixture("idle"))  # /version answers with the metrics text: not JSON
    with serving(canned) as url:
        result = await scrape_once(url)
    assert result.ok and result.server_version is None


MODELS = (
    '{"object": "list", "data": [{"id": "tiny", "object": "model", "root": "/models/tiny",'
    ' "parent": null, "max_model_len": 512}]}'
)
SERVER_INFO = (
    '{"vllm_config": {"scheduler_config": {"max_num_seqs": 4, "max_num_batched_tokens": 64},'
    ' "model_config": {"max_model_len": 512, "enforce_eager": false},'
    ' "cache_config": {"block_size": 128, "enable_prefix_caching": true}}}'
)


async def test_what_the_server_tells_over_http_becomes_its_settings() -> None:
    others = {"/version": '{"version": "0.32.0"}', "/v1/models": MODELS}
    others["/server_info?config_format=json"] = SERVER_INFO
    canned = Canned(body=fixture("idle"), others=others)
    with serving(canned) as url:
        result = await scrape_once(url)
    assert ("max_model_len", 512, "/v1/models") in result.server_settings
    settings = {name: (value, source) for name, value, source in result.server_settings}
    assert settings["model"] == ("/models/tiny", "/v1/models")
    assert settings["max_num_seqs"] == (4, "/server_info")
    assert settings["max_num_batched_tokens"] == (64, "/server_info")
    assert settings["prefix_caching"] == (True, "/server_info")
    config = server_config(result, None, DiagnoseOptions())
    assert config.settings["max_num_seqs"] == Setting(4, "/server_info")
    # the server's own metric beats its HTTP answer where both say something
    assert config.settings["block_size"].source == "cache_config_info"


async def test_a_server_without_dev_mode_tells_only_models() -> None:
    canned = Canned(body=fixture("idle"), others={"/v1/models": MODELS})
    canned.others["/server_info?config_format=json"] = "Not Found"
    with serving(canned) as url:
        result = await scrape_once(url)
    assert {name for name, _, _ in result.server_settings} == {"max_model_len", "model"}


async def test_unreachable_endpoint() -> None:
    result = await scrape_once(f"http://127.0.0.1:{free_port()}")
    assert result.status is ScrapeStatus.UNREACHABLE
    assert "connection" in result.error


async def test_http_error_names_the_status() -> None:
    canned = Canned(body="forbidden", status=403)
    with serving(canned) as url:
        result = await scrape_once(url)
    assert result.status is ScrapeStatus.HTTP_ERROR
    assert result.http_status == 403
    assert "--api-key" in result.error


async def test_not_vllm_when_no_vllm_series() -> None:
    canned = Canned(body="# TYPE http_requests_total counter\nhttp_requests_total 3\n")
    with serving(canned) as url:
        result = await scrape_once(url)
    assert result.status is ScrapeStatus.NOT_VLLM
    assert "--disable-log-stats" in result.error


async def test_malformed_lines_do_not_lose_the_scrape() -> None:
    canned = Canned(body=fixture("underload") + "vllm:broken{ 1\n")
    with serving(canned) as url:
        result = await scrape_once(url)
    assert result.status is ScrapeStatus.OK
    assert len(result.samples) == 420
    assert "line" in str(result.parse_errors[0])


async def test_openmetrics_content_type_is_honoured() -> None:
    body = '# TYPE vllm:x counter\nvllm:x_total 1 # {t="a"} 1\n# EOF\n'
    canned = Canned(body=body, content_type="application/openmetrics-text; version=1.0.0")
    with serving(canned) as url:
        result = await scrape_once(url)
    assert result.status is ScrapeStatus.OK
    assert [s.value for s in result.samples] == [1.0]


async def test_oversized_body_is_refused() -> None:
    canned = Canned(body=fixture("idle"))
    with serving(canned) as url:
        result = await scrape_once(url, ScrapeOptions(timeout_s=2.0, max_body_bytes=1000))
    assert result.status is ScrapeStatus.HTTP_ERROR
    assert "exceeds" in result.error


IN_FLIGHT = (
    '{"schema": "vtop.inflight/1", "now": 1.0, "in_flight": 1, "requests": [{"request_id": '
    '"hog-1", "path": "/v1/completions", "age_s": 312.5, "stream": true, "max_tokens": 4096, '
    '"events": 2918, "body_bytes": 120}]}'
)


async def test_the_requests_in_flight_come_with_each_scrape() -> None:
    canned = Canned(body=fixture("idle"), others={"/vtop/inflight": IN_FLIGHT})
    with serving(canned) as url:
        source = VllmHttpSource(url, ScrapeOptions(timeout_s=2.0))
        try:
            first = await source.scrape()
            canned.others["/vtop/inflight"] = IN_FLIGHT.replace("312.5", "313.5")
            second = await source.scrape()
        finally:
            await source.close()
    assert first.in_flight is not None and second.in_flight is not None
    [hog] = first.in_flight
    assert (hog.request_id, hog.max_tokens, hog.events, hog.stream) == ("hog-1", 4096, 2918, True)
    assert second.in_flight[0].age_s == 313.5


async def test_a_server_that_lists_none_is_asked_again_only_after_a_restart() -> None:
    canned = Canned(body=fixture("idle"))  # /vtop/inflight answers with metrics text
    with serving(canned) as url:
        source = VllmHttpSource(url, ScrapeOptions(timeout_s=2.0))
        try:
            scrapes = [await source.scrape(), await source.scrape()]
            canned.body = fixture("idle").replace(
                "process_start_time_seconds 1", "process_start_time_seconds 2"
            )
            canned.others["/vtop/inflight"] = IN_FLIGHT
            scrapes.append(await source.scrape())
        finally:
            await source.close()
    assert [s.in_flight is None for s in scrapes] == [True, True, False]
    assert canned.seen_paths.count("/vtop/inflight") == 2


@pytest.mark.parametrize(
    "listing",
    [
        IN_FLIGHT.replace('"events": 2918', '"events": "many"'),
        IN_FLIGHT.replace("312.5", "-1"),
        IN_FLIGHT.replace("vtop.inflight/1", "other/1"),
        '{"schema": "vtop.inflight/1", "requests": {}}',
        "[1, 2",
    ],
)
async def test_a_damaged_list_is_no_list_and_the_scrape_stands(listing: str) -> None:
    canned = Canned(body=fixture("idle"), others={"/vtop/inflight": listing})
    with serving(canned) as url:
        result = await scrape_once(url)
    assert result.ok and result.in_flight is None


async def test_a_scrape_over_the_sample_limit_is_refused_and_said() -> None:
    exploded = "".join(f'vllm:x_total{{i="{i}"}} {i}\n' for i in range(1_500))
    with serving(Canned(body=exploded + fixture("idle"))) as url:
        refused = await scrape_once(url, ScrapeOptions(timeout_s=5.0, sample_limit=1_000))
        taken = await scrape_once(url, ScrapeOptions(timeout_s=5.0, sample_limit=5_000))
    assert refused.status is ScrapeStatus.HTTP_ERROR and not refused.samples
    assert "more than 1,000 samples" in refused.error and "sample_limit" in refused.error
    assert taken.ok and len(taken.samples) > 1_500
