"""The one assembler of feeds: settings (plus what a command adds: a managed server to follow,
a recording to write, no GPUs) -> the feed the command reads. Every command opens its feed
here, so the interval, the deadline, the API key and TLS are the settings' everywhere."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from vtop.core.config.otlp_address import parse_address
from vtop.core.config.settings import Settings
from vtop.core.ingest.canary_feed import CanaryFeed
from vtop.core.ingest.feeds import Canaries, Feed, LiveFeed, RecordingFeed
from vtop.core.ingest.recorder import RecordingWriter
from vtop.core.ingest.sources.nvml import NvmlSource
from vtop.core.ingest.sources.probe import ProbeOptions, ProbeSource
from vtop.core.ingest.sources.process_log import LogTail
from vtop.core.ingest.sources.prometheus import PrometheusClient, PrometheusFeed, Reader
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.managed_server import ManagedServer

if TYPE_CHECKING:
    from vtop.core.ingest.sources.otlp_receiver import SpanReceiver

PROBE_TIMEOUT_S = 75.0


def scrape_options(settings: Settings) -> ScrapeOptions:
    """How to reach the endpoints: the settings' deadline, key, TLS policy and sample limit."""
    return ScrapeOptions(
        settings.timeout_s,
        settings.api_key,
        settings.verify_tls,
        sample_limit=settings.sample_limit,
    )


def open_feed(
    settings: Settings,
    *,
    gpus: bool = True,
    server: ManagedServer | None = None,
    record: Path | None = None,
    spans: bool = False,
    reader: Reader | None = None,
) -> Feed:
    """The feed of the settings' endpoints (or of their Prometheus server); with `server`, the
    managed server's own URL and log; written to `record` as it is read when given; with
    `spans`, listening for vLLM's request spans on the settings' `otlp` addresses (the frames
    carry them; an OtlpAddressError when one cannot be bound); with `reader`, Prometheus is
    read that way each tick (the rules judged there)."""
    options = scrape_options(settings)
    feed: Feed
    if settings.prometheus and server is None:
        client = PrometheusClient(settings.prometheus, options)
        feed = PrometheusFeed(client, settings.interval_s, settings.prometheus_alerts, reader)
    else:
        urls = (server.url,) if server is not None else settings.urls
        sources = [VllmHttpSource(url, options) for url in urls]
        log = LogTail(server) if server is not None else None
        nvml = NvmlSource() if gpus else None
        receiver = span_receiver(settings) if spans else None
        feed = LiveFeed(
            sources, nvml, settings.interval_s, log, server, canaries(settings), receiver
        )
    return RecordingFeed(feed, RecordingWriter(record)) if record is not None else feed


def span_receiver(settings: Settings) -> SpanReceiver | None:
    """Receivers of vLLM's spans on the settings' `otlp` addresses, listening (None: none).
    Imported here: the receiver brings grpcio and protobuf (about 12 MiB of a dashboard's
    memory), which a dashboard not listening for spans never needs."""
    if not settings.otlp:
        return None
    from vtop.core.ingest.sources.otlp_receiver import SpanReceiver

    receiver = SpanReceiver([parse_address(a) for a in settings.otlp], settings.otlp_token)
    receiver.start()
    return receiver


def probe_options(settings: Settings) -> ProbeOptions:
    """How canaries reach the front door: the settings' key and TLS policy, a timeout longer
    than the common proxy read timeout (60 s), so the path's own answer is what is seen."""
    return ProbeOptions(
        timeout_s=PROBE_TIMEOUT_S, api_key=settings.api_key, verify_tls=settings.verify_tls
    )


def canaries(settings: Settings) -> Canaries | None:
    """Canaries through the settings' front door, every probe interval (None: not probed)."""
    if settings.probe_url is None:
        return None
    return Canaries(
        ProbeSource(settings.probe_url, probe_options(settings)), settings.probe_interval_s
    )


def open_canary_feed(
    settings: Settings,
    url: str,
    engine_url: str | None,
    endpoints: tuple[str, ...],
    count: int,
    options: ProbeOptions,
) -> CanaryFeed:
    """`count` canaries per endpoint through `url`, the engine (its own URL, else the same)
    scraped around them with the settings' deadline, key and TLS policy."""
    engine = VllmHttpSource(engine_url or url, scrape_options(settings))
    sources = [ProbeSource(url, dataclasses.replace(options, endpoint=e)) for e in endpoints]
    return CanaryFeed(engine, sources, count)


def first_server(settings: Settings) -> Settings:
    """The settings narrowed to their first endpoint (a one-shot command judges one server)."""
    return dataclasses.replace(settings, urls=settings.urls[:1])
