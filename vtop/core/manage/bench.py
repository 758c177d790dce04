"""Load generator for OpenAI-compatible vLLM endpoints (the seed articles' asyncio stress test).

Closed loop (fixed concurrency) or open loop (Poisson arrivals at a request rate), streaming or
not, completions or chat. Latencies are measured on the client; QPS is completed requests over
wall-clock time, never a sum of latencies.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from vtop.core.ingest.sources.openai_stream import (
    DONE,
    EventLines,
    carries_a_token,
    data_of,
    error_of,
    usage_of,
)
from vtop.core.manage.bench_report import BenchReport, RequestResult, summarize

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
]

KEEPALIVE_S = 2.0
"""Idle connections are dropped before uvicorn's 5 s keep-alive timeout; with httpx's default of
5 s a request can go out on a connection the server is closing (a spurious ReadError)."""


@dataclass(frozen=True)
class Lengths:
    """A token-count distribution: fixed (low == high) or uniform in [low, high]."""

    low: int
    high: int

    @staticmethod
    def parse(text: str) -> Lengths:
        """'128' (fixed) or '64:256' (uniform)."""
        low, _, high = text.partition(":")
        lengths = Lengths(int(low), int(high or low))
        if lengths.low < 1 or lengths.high < lengths.low:
            raise ValueError(f"bad length {text!r}: want N or LOW:HIGH with 1 <= LOW <= HIGH")
        return lengths

    def draw(self, rng: random.Random) -> int:
        """One length."""
        return rng.randint(self.low, self.high)


@dataclass(frozen=True)
class BenchConfig:
    """What load to send and how to judge it."""

    url: str
    model: str | None = None
    endpoint: str = "completions"
    stream: bool = True
    concurrency: int = 8
    request_rate: float | None = None
    num_requests: int | None = 100
    duration_s: float | None = None
    prompt_tokens: Lengths = Lengths(128, 128)
    output_tokens: Lengths = Lengths(128, 128)
    shared_prefix_tokens: int = 0
    ignore_eos: bool = True
    request_timeout_s: float = 300.0
    stall_timeout_s: float = 60.0
    token_id_max: int = 500
    seed: int = 0
    api_key: str | None = None


class PromptMaker:
    """Prompts of the configured lengths, sharing a common prefix when asked."""

    def __init__(self, config: BenchConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        prefix_rng = random.Random(config.seed + 1)
        self.prefix_ids = [
            prefix_rng.randrange(10, config.token_id_max)
            for _ in range(config.shared_prefix_tokens)
        ]

    def token_ids(self) -> list[int]:
        """A prompt as token ids (exact length on any model with vocab >= token_id_max)."""
        length = self.config.prompt_tokens.draw(self.rng)
        own = max(0, length - len(self.prefix_ids))
        return self.prefix_ids + [
            self.rng.randrange(10, self.config.token_id_max) for _ in range(own)
        ]

    def text(self) -> str:
        """A prompt as words (about one token each on common tokenizers)."""
        return " ".join(WORDS[i % len(WORDS)] for i in self.token_ids())


def request_body(config: BenchConfig, model: str, prompts: PromptMaker) -> dict[str, Any]:
    """The JSON body of one request."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": config.output_tokens.draw(prompts.rng),
        "stream": config.stream,
    }
    if config.ignore_eos:
        body["ignore_eos"] = True
    if config.stream:
        body["stream_options"] = {"include_usage": True}
    if config.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompts.text()}]
    else:
        body["prompt"] = prompts.token_ids()
    return body


def endpoint_path(config: BenchConfig) -> str:
    """The OpenAI route for the configured endpoint."""
    return "/v1/chat/completions" if config.endpoint == "chat" else "/v1/completions"


class StreamStalledError(Exception):
    """The server sent nothing for longer than the stall timeout in the middle of a stream."""


async def sse_events(
    response: httpx.Response, stall_timeout_s: float
) -> AsyncIterator[dict[str, Any]]:
    """The stream's events (openai_stream reads them, as `vtop probe` does), each within
    `stall_timeout_s` of the one before."""
    lines = EventLines()
    chunks = response.aiter_bytes()
    while True:
        try:
            chunk = await asyncio.wait_for(anext(chunks), stall_timeout_s)
        except StopAsyncIteration:
            break
        except TimeoutError as error:
            raise StreamStalledError from error
        for line in lines.feed(chunk):
            event = data_of(line)
            if event == DONE:
                return
            if isinstance(event, dict):
                yield event
    for line in lines.rest():
        event = data_of(line)
        if isinstance(event, dict):
            yield event


async def run_streaming(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    config: BenchConfig,
    headers: dict[str, str] | None = None,
) -> RequestResult:
    """Send one streaming request and time its chunks."""
    started = time.perf_counter()
    result = RequestResult(ok=False)
    last: float | None = None
    async with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code != 200:
            await response.aread()
            return RequestResult(ok=False, error=f"HTTP {response.status_code}")
        async for event in sse_events(response, config.stall_timeout_s):
            now = time.perf_counter()
            failure = error_of(event)
            if failure is not None:
                return RequestResult(ok=False, error=f"error event in the stream: {failure[1]}")
            if carries_a_token(event):
                if last is None:
                    result.ttft_s = now - started
                else:
                    result.chunk_gaps_s.append(now - last)
                last = now
            usage = usage_of(event)
            if usage is not None:
                result.prompt_tokens, result.output_tokens = usage[0] or 0, usage[1] or 0
    result.e2e_s = time.perf_counter() - started
    result.ok = True
    return result


async def run_plain(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> RequestResult:
    """Send one non-streaming request."""
    started = time.perf_counter()
    response = await client.post(url, json=body, headers=headers)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        return RequestResult(ok=False, error=f"HTTP {response.status_code}", e2e_s=elapsed)
    usage = response.json().get("usage") or {}
    return RequestResult(
        ok=True,
        e2e_s=elapsed,
        output_tokens=int(usage.get("completion_tokens") or 0),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
    )


async def one_request(
    client: httpx.AsyncClient,
    config: BenchConfig,
    model: str,
    prompts: PromptMaker,
    request_id: str | None = None,
) -> RequestResult:
    """One request with its overall timeout (sent with `request_id` as its X-Request-Id, which
    vLLM's span of it carries); every failure becomes a result."""
    body = request_body(config, model, prompts)
    url = config.url.rstrip("/") + endpoint_path(config)
    headers = {"X-Request-Id": request_id} if request_id else None
    try:
        async with asyncio.timeout(config.request_timeout_s):
            if config.stream:
                return await run_streaming(client, url, body, config, headers)
            return await run_plain(client, url, body, headers)
    except StreamStalledError:
        return RequestResult(ok=False, error="stalled stream")
    except TimeoutError:
        return RequestResult(ok=False, error="timeout")
    except httpx.HTTPError as error:
        return RequestResult(ok=False, error=type(error).__name__)
    except (ValueError, KeyError) as error:
        return RequestResult(ok=False, error=f"bad response: {type(error).__name__}")


class NotAnApiError(Exception):
    """The URL does not serve an OpenAI-compatible API (no model list to read)."""


async def detect_model(client: httpx.AsyncClient, base_url: str) -> str:
    """The first model the server lists at /v1/models (NotAnApiError, in one line, when the
    server answers anything else: an HTML page, a 404, a list without models)."""
    url = base_url.rstrip("/") + "/v1/models"
    try:
        response = await client.get(url)
    except httpx.HTTPError as error:
        raise NotAnApiError(f"unreachable: {type(error).__name__}: {error}") from None
    if response.status_code != HTTP_OK:
        raise NotAnApiError(f"HTTP {response.status_code} from {url}: not an OpenAI API")
    try:
        return str(response.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise NotAnApiError(f"{url} lists no model: not an OpenAI API") from None


HTTP_OK = 200


Progress = Callable[[int, int | None], None]


class Bench:
    """One load-generation run."""

    def __init__(self, config: BenchConfig, progress: Progress | None = None) -> None:
        self.config = config
        self.progress = progress or (lambda done, total: None)
        self.results: list[RequestResult] = []
        self.prompts = PromptMaker(config)
        self.run_id = f"vtop-bench-{secrets.token_hex(4)}"
        """Every request's X-Request-Id begins with it (`RUN_ID-N`): vLLM's spans of this
        run's requests are found by it."""
        self._issued = 0
        self._numbers = itertools.count()
        self._deadline = math.inf

    def _may_issue(self) -> bool:
        """True while the request count and duration allow another request."""
        if self.config.num_requests is not None and self._issued >= self.config.num_requests:
            return False
        return time.perf_counter() < self._deadline

    async def run(self) -> BenchReport:
        """Run to completion and report."""
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=None, keepalive_expiry=KEEPALIVE_S
        )
        async with httpx.AsyncClient(timeout=None, headers=headers, limits=limits) as client:
            model = self.config.model or await detect_model(client, self.config.url)
            started = time.perf_counter()
            if self.config.duration_s is not None:
                self._deadline = started + self.config.duration_s
            if self.config.request_rate:
                await self._open_loop(client, model)
            else:
                await self._closed_loop(client, model)
            return summarize(self.results, time.perf_counter() - started)

    async def _record(self, client: httpx.AsyncClient, model: str) -> None:
        """Issue one request and record its result."""
        request_id = f"{self.run_id}-{next(self._numbers)}"
        result = await one_request(client, self.config, model, self.prompts, request_id)
        self.results.append(result)
        self.progress(len(self.results), self.config.num_requests)

    async def _closed_loop(self, client: httpx.AsyncClient, model: str) -> None:
        """`concurrency` workers, each sending its next request when the previous one ends."""

        async def worker() -> None:
            while self._may_issue():
                self._issued += 1
                await self._record(client, model)

        await asyncio.gather(*(worker() for _ in range(self.config.concurrency)))

    async def _open_loop(self, client: httpx.AsyncClient, model: str) -> None:
        """Poisson arrivals at `request_rate`, independent of how fast the server answers."""
        rng = random.Random(self.config.seed + 2)
        rate = self.config.request_rate or 1.0
        tasks: list[asyncio.Task[None]] = []
        while self._may_issue():
            self._issued += 1
            tasks.append(asyncio.create_task(self._record(client, model)))
            await asyncio.sleep(rng.expovariate(rate))
        await asyncio.gather(*tasks)
