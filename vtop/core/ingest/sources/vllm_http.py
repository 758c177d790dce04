"""Scrape one vLLM server's /metrics over HTTP(S) with httpx."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from vtop.core import redact
from vtop.core.catalog import is_vllm
from vtop.core.config.settings import API_KEY_ENV, SAMPLE_LIMIT
from vtop.core.frame import (
    InFlightRequest,
    Sample,
    SampleColumns,
    ScrapeStatus,
    Series,
    TargetScrape,
)
from vtop.core.ingest.exposition import ExpositionParser, is_openmetrics
from vtop.core.ingest.sources.bounded_http import (
    BodyError,
    BoundedResponse,
    DeadlineError,
    bounded_get,
)
from vtop.core.ingest.sources.fast_http import FastGet, FastTimeoutError, FastTooLargeError
from vtop.core.ingest.sources.in_flight import NotListed, ask_in_flight
from vtop.core.ingest.sources.server_facts import ServerFacts, ask_server_facts
from vtop.core.ingest.sources.tls import tls_context

MAX_BODY_BYTES = 64 * 1024 * 1024
ACCEPT = "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5"


def metrics_url(base_url: str) -> str:
    """The /metrics URL for a server base URL (a URL already ending in /metrics is kept)."""
    url = base_url.rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url if url.endswith("/metrics") else url + "/metrics"


def target_name(base_url: str) -> str:
    """The label vtop uses for a target: its URL without /metrics or a trailing slash, and
    without a password (the label is shown and written everywhere; requests use the URL)."""
    url = metrics_url(base_url)
    return redact.url(url[: -len("/metrics")])


@dataclass(frozen=True)
class ScrapeOptions:
    """How to reach a target."""

    timeout_s: float = 5.0
    api_key: str | None = None
    verify_tls: bool = True
    max_body_bytes: int = MAX_BODY_BYTES
    sample_limit: int = SAMPLE_LIMIT
    """More vLLM samples than this in one scrape, and the scrape is refused."""

    @staticmethod
    def from_env(timeout_s: float = 5.0, verify_tls: bool = True) -> ScrapeOptions:
        """Options with the API key taken from VLLM_API_KEY when set."""
        return ScrapeOptions(timeout_s, os.environ.get(API_KEY_ENV) or None, verify_tls)


class VllmHttpSource:
    """Fetches and parses one target's /metrics; keeps its parser warm across ticks."""

    def __init__(
        self, base_url: str, options: ScrapeOptions, client: httpx.AsyncClient | None = None
    ) -> None:
        self.target = target_name(base_url)
        self.url = metrics_url(base_url)
        self.base_url = self.url[: -len("/metrics")]
        """The URL requests go to (a password in it stays here, never in `target`)."""
        self.options = options
        self._parser = ExpositionParser(sample_limit=options.sample_limit)
        self._client = client or make_client(options)
        self._owns_client = client is None
        self._fast = FastGet(self.url, options.max_body_bytes)
        self._vllm_layout: tuple[Series, ...] | None = None
        """The series of the last payload layout seen to hold vllm: series."""
        self._facts: tuple[float | None, ServerFacts] | None = None
        """(process start time, what the server said) of the last ask; asked again on restart."""
        self._not_listing: tuple[float | None] | None = None
        """(process start time,) of a server that said it lists no requests in flight."""

    async def close(self) -> None:
        """Close the HTTP client if this source created it, and the fast path's connection."""
        await self._fast.close()
        if self._owns_client:
            await self._client.aclose()

    async def scrape(self) -> TargetScrape:
        """Fetch /metrics once within one deadline (connect, headers and body, both paths
        together) and the byte limit; every failure becomes a typed result, never an exception."""
        started = time.monotonic()
        deadline = started + self.options.timeout_s
        try:
            fast = await self._fast.get(self._headers(), self.options.timeout_s)
        except FastTimeoutError as error:
            return self._failed(ScrapeStatus.UNREACHABLE, str(error), started)
        except FastTooLargeError as error:
            return self._failed(ScrapeStatus.HTTP_ERROR, f"/metrics {error}", started, 200)
        if fast is not None:
            content_type, body = fast
            text = body.decode("utf-8", errors="replace")
            del fast, body  # the bytes are not kept beside the text while it is parsed
            return await self._read(text, content_type, 200, started)
        try:
            response = await bounded_get(
                self._client,
                self.url,
                self._headers(),
                max(deadline - time.monotonic(), 0.001),
                self.options.max_body_bytes,
            )
        except DeadlineError as error:
            return self._failed(ScrapeStatus.UNREACHABLE, str(error), started)
        except BodyError as error:
            return self._failed(ScrapeStatus.HTTP_ERROR, f"/metrics {error}", started, 200)
        except httpx.HTTPError as error:
            return self._failed(ScrapeStatus.UNREACHABLE, describe_error(error), started)
        if response.status_code != 200:
            message = f"HTTP {response.status_code} from {self.target}/metrics{auth_hint(response)}"
            return self._failed(ScrapeStatus.HTTP_ERROR, message, started, response.status_code)
        content_type = response.headers.get("content-type", "")
        return await self._read(response.text, content_type, response.status_code, started)

    async def _server_facts(self, started: float | None) -> ServerFacts:
        """Version and settings from the server's own endpoints, asked once per process start."""
        if self._facts is None or self._facts[0] != started:
            facts = await ask_server_facts(
                self._client, self.base_url, self._headers(), self.options.timeout_s
            )
            self._facts = started, facts
        return self._facts[1]

    async def _in_flight(self, started: float | None) -> tuple[InFlightRequest, ...] | None:
        """The requests in flight, from vtop's middleware; not asked again until the process
        restarts once the server has answered that it does not list them."""
        if self._not_listing == (started,):
            return None
        listing = await ask_in_flight(
            self._client, self.base_url, self._headers(), self.options.timeout_s
        )
        if isinstance(listing, NotListed):
            self._not_listing = (started,)
            return None
        return listing

    def _headers(self) -> dict[str, str]:
        """Request headers: Accept, and the bearer token when configured."""
        headers = {"Accept": ACCEPT}
        if self.options.api_key:
            headers["Authorization"] = f"Bearer {self.options.api_key}"
        return headers

    def _failed(
        self, status: ScrapeStatus, message: str, started: float, http_status: int | None = None
    ) -> TargetScrape:
        """A scrape result that carries no samples."""
        elapsed = time.monotonic() - started
        shown = redact.Redactor([self.options.api_key or ""]).text(message)
        return TargetScrape(
            self.target, status, error=shown, http_status=http_status, duration_s=elapsed
        )

    async def _read(
        self, text: str, content_type: str, http_status: int, started: float
    ) -> TargetScrape:
        """Parse a 200 response's text, classify it, and add the server's version."""
        parsed = self._parser.parse(text, is_openmetrics(content_type))
        if parsed.over_limit:
            message = (
                f"{self.target}/metrics holds more than {self.options.sample_limit:,} samples: "
                "refused, as Prometheus's sample_limit refuses such a scrape (an exporter whose "
                "labels explode; sample_limit in the settings raises the limit)"
            )
            return self._failed(ScrapeStatus.HTTP_ERROR, message, started, http_status)
        status, message, facts, in_flight = ScrapeStatus.OK, "", ServerFacts(), None
        if self._serves_vllm(parsed.samples):
            started_at = process_start(parsed.samples)
            facts = await self._server_facts(started_at)
            in_flight = await self._in_flight(started_at)
        else:
            status = ScrapeStatus.NOT_VLLM
            message = (
                f"no vllm: series at {self.target}/metrics (not vLLM, or started with "
                "--disable-log-stats)"
            )
        return TargetScrape(
            self.target,
            status,
            raw_text=text,
            samples=parsed.frozen_samples(),
            metric_types=parsed.types,
            parse_errors=tuple(parsed.errors),
            error=message,
            http_status=http_status,
            duration_s=time.monotonic() - started,
            server_version=facts.version,
            server_settings=facts.settings,
            skipped_series=parsed.skipped,
            in_flight=in_flight,
        )

    def _serves_vllm(self, samples: Sequence[Sample]) -> bool:
        """True when some sample is a vllm: series (remembered for a payload layout)."""
        if isinstance(samples, SampleColumns) and samples.series is self._vllm_layout:
            return True
        found = any(is_vllm(sample.series.name) for sample in samples)
        if found and isinstance(samples, SampleColumns):
            self._vllm_layout = samples.series
        return found


CONNECT_FAILED = "connection failed"


def process_start(samples: Sequence[Sample]) -> float | None:
    """The process's start time (`process_start_time_seconds`): a new value is a restart."""
    return next((s.value for s in samples if s.series.name == "process_start_time_seconds"), None)


def cannot_connect(scrape: TargetScrape) -> bool:
    """True when the scrape failed before any answer: refused, or no such host (waiting a
    window will not change that; a timeout might)."""
    return scrape.status is ScrapeStatus.UNREACHABLE and scrape.error.startswith(CONNECT_FAILED)


def never_vllm(scrape: TargetScrape) -> bool:
    """True when waiting cannot make the target a vLLM to judge: nothing listens there, it
    answers without vLLM's series (an HTML page, another exporter), or refuses the path or
    the key (a 4xx). A 5xx or a timeout may pass; these do not."""
    if cannot_connect(scrape) or scrape.status is ScrapeStatus.NOT_VLLM:
        return True
    status = scrape.http_status
    return scrape.status is ScrapeStatus.HTTP_ERROR and status is not None and 400 <= status < 500


KEEPALIVE_S = 2.0
"""Below uvicorn's 5 s keep-alive, so a scrape never goes out on a connection being closed."""


def make_client(options: ScrapeOptions) -> httpx.AsyncClient:
    """An HTTP client with the scrape timeout and TLS policy."""
    return httpx.AsyncClient(
        timeout=options.timeout_s,
        verify=tls_context(options.verify_tls),
        follow_redirects=True,
        limits=httpx.Limits(keepalive_expiry=KEEPALIVE_S),
    )


def describe_error(error: httpx.HTTPError) -> str:
    """One line saying why a target could not be reached."""
    if isinstance(error, httpx.TimeoutException):
        return f"timed out: {type(error).__name__}"
    if isinstance(error, httpx.ConnectError):
        return f"{CONNECT_FAILED}: {error}" if str(error) else f"{CONNECT_FAILED}: refused"
    return f"{type(error).__name__}: {error}"


def auth_hint(response: httpx.Response | BoundedResponse) -> str:
    """A hint appended to 401/403 errors."""
    if response.status_code in (401, 403):
        return f" (set --api-key or {API_KEY_ENV})"
    return ""
