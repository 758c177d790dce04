"""The front door: a canary request through the URL users call, timed as a user's client sees it.

One streamed completion of a few tokens (chat or completions, `stream_options.include_usage`
asked), the time of every read as it arrives on the socket, the bytes and reads per token,
the first byte against the first token, the response headers that tell a proxy's hand
(`Content-Encoding`, `X-Accel-Buffering`, `Transfer-Encoding`, `Server`, `Via`), whether usage
arrived in the stream, and the status and body of a failure. Every read is bounded: one deadline
for the whole request, a byte limit on the body. What a stream through a proxy that holds it
back looks like: every token in one read, after the whole answer was generated.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import httpx

from vtop.core import redact
from vtop.core.frame import ProbeResult
from vtop.core.ingest.sources.openai_stream import (
    DONE,
    EventLines,
    carries_a_token,
    data_of,
    error_of,
    usage_of,
)
from vtop.core.ingest.sources.tls import tls_context

SHOWN_HEADERS = ("content-encoding", "x-accel-buffering", "transfer-encoding", "server", "via")
MAX_PROBE_BYTES = 4 * 1024 * 1024
MAX_FAILURE_BODY = 2000
"""Characters of a failed response's body kept (the proxy's or vLLM's own words)."""
PROMPT = "Count from one to fifty in words, separated by spaces:"


@dataclass(frozen=True)
class ProbeOptions:
    """How to send the canary."""

    endpoint: str = "completions"
    """`completions` or `chat`."""
    max_tokens: int = 64
    timeout_s: float = 30.0
    api_key: str | None = None
    verify_tls: bool = True
    model: str | None = None
    """The served model (default: the first /v1/models lists)."""
    include_usage: bool = True


@dataclass
class _Reading:
    """What the stream has shown so far."""

    started: float
    reads: list[tuple[float, int]] = field(default_factory=list)
    lines: EventLines = field(default_factory=EventLines)
    first_token_s: float | None = None
    tokens: int = 0
    usage_tokens: int | None = None
    finished: bool = False
    total: int = 0
    failure: tuple[int | None, str] | None = None
    """An error event inside a 200 stream (vLLM answers a refusal that way once streaming)."""

    def take(self, at: float, raw: bytes, decoded: bytes) -> None:
        """One read off the socket: its time and size, and the events it completes."""
        self.reads.append((at, len(raw)))
        self.total += len(raw)
        for line in self.lines.feed(decoded):
            self._line(at, line)

    def _line(self, at: float, line: str) -> None:
        """One SSE line."""
        event = data_of(line)
        if event == DONE:
            self.finished = True
            return
        if not isinstance(event, dict):
            return
        failure = error_of(event)
        if failure is not None:
            self.failure = failure
            return
        if carries_a_token(event):
            self.tokens += 1
            if self.first_token_s is None:
                self.first_token_s = at
        usage = usage_of(event)
        if usage is not None and usage[1] is not None:
            self.usage_tokens = usage[1]


def _decoder(encoding: str | None) -> Any:
    """An incremental decoder for the body's Content-Encoding (identity: None)."""
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(wbits=31)
    if encoding == "deflate":
        return zlib.decompressobj()
    return None


def request_body(options: ProbeOptions, model: str) -> dict[str, Any]:
    """The canary's JSON body: a few tokens, streamed, usage asked."""
    body: dict[str, Any] = {"model": model, "max_tokens": options.max_tokens, "stream": True}
    if options.include_usage:
        body["stream_options"] = {"include_usage": True}
    if options.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": PROMPT}]
    else:
        body["prompt"] = PROMPT
    body["ignore_eos"] = True
    return body


@dataclass(frozen=True)
class Identity:
    """A canary's request id and W3C trace context: the engine's span of it is found by them."""

    request_id: str
    trace_id: str
    span_id: str

    @staticmethod
    def new() -> Identity:
        """Fresh random ids (the request id names vtop, so an operator knows its canaries)."""
        return Identity(
            f"vtop-canary-{secrets.token_hex(6)}", secrets.token_hex(16), secrets.token_hex(8)
        )

    def headers(self) -> dict[str, str]:
        """`X-Request-Id` and `traceparent` (sampled)."""
        return {
            "X-Request-Id": self.request_id,
            "traceparent": f"00-{self.trace_id}-{self.span_id}-01",
        }

    def on(self, result: ProbeResult) -> ProbeResult:
        """The result, marked with these ids."""
        return dataclasses.replace(result, request_id=self.request_id, trace_id=self.trace_id)


class ProbeSource:
    """Sends canaries through one URL; keeps its connection pool and the model name."""

    def __init__(self, url: str, options: ProbeOptions) -> None:
        self.base_url = url.rstrip("/")
        self.url = redact.url(self.base_url)
        self.options = options
        headers = {"Accept-Encoding": "gzip, deflate", "Accept": "text/event-stream"}
        if options.api_key:
            headers["Authorization"] = f"Bearer {options.api_key}"
        self._client = httpx.AsyncClient(
            timeout=options.timeout_s, verify=tls_context(options.verify_tls), headers=headers
        )
        self._model = options.model

    async def close(self) -> None:
        """Release the connections."""
        await self._client.aclose()

    async def model(self) -> str | None:
        """The served model's name (asked once, through the same URL)."""
        if self._model is None:
            try:
                response = await self._client.get(self.base_url + "/v1/models")
                self._model = str(response.json()["data"][0]["id"])
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
                return None
        return self._model

    async def probe(self) -> ProbeResult:
        """One canary, sent with its own X-Request-Id and W3C traceparent (vLLM's span of it
        carries both); every failure is a result, never an exception."""
        started = time.time()
        begun = time.monotonic()
        marks = Identity.new()
        model = await self.model()
        endpoint = self.options.endpoint
        if model is None:
            return marks.on(
                ProbeResult(
                    self.url, endpoint, started, error="no model: /v1/models did not answer"
                )
            )
        path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
        body = request_body(self.options, model)
        try:
            return marks.on(await self._stream(path, body, started, begun, marks.headers()))
        except httpx.TimeoutException:
            return marks.on(
                ProbeResult(
                    self.url,
                    endpoint,
                    started,
                    error=f"no complete answer within {self.options.timeout_s:g} s",
                    duration_s=time.monotonic() - begun,
                )
            )
        except httpx.HTTPError as error:
            return marks.on(
                ProbeResult(
                    self.url,
                    endpoint,
                    started,
                    error=f"{type(error).__name__}: {redact.redactor().text(str(error))}",
                    duration_s=time.monotonic() - begun,
                )
            )

    async def _stream(
        self,
        path: str,
        body: dict[str, Any],
        started: float,
        begun: float,
        headers: dict[str, str],
    ) -> ProbeResult:
        """Send, read the body read by read, and say what arrived when."""
        deadline = begun + self.options.timeout_s
        url = self.base_url + path
        async with self._client.stream("POST", url, json=body, headers=headers) as response:
            kept = tuple((k, v) for k in SHOWN_HEADERS if (v := response.headers.get(k)))
            decoder = _decoder(response.headers.get("content-encoding"))
            reading = _Reading(started)
            failure = b""
            cut = ""
            try:
                async for raw in response.aiter_raw():
                    at = time.monotonic() - begun
                    if response.status_code != 200:
                        failure += raw[: MAX_FAILURE_BODY - len(failure)]
                        continue
                    decoded = decoder.decompress(raw) if decoder is not None else raw
                    reading.take(at, raw, decoded)
                    if reading.total > MAX_PROBE_BYTES or time.monotonic() > deadline:
                        break
            except httpx.TimeoutException:
                raise
            except (httpx.TransportError, zlib.error) as broken:
                # the headers came, the body did not: a proxy's read timeout closing the
                # connection mid-stream, a server that died; what arrived is kept
                cut = f" ({type(broken).__name__} after {reading.total} bytes)"
        duration = time.monotonic() - begun
        common: dict[str, Any] = {
            "status": response.status_code,
            "duration_s": duration,
            "reads": tuple(reading.reads),
            "headers": kept,
            "body_bytes": reading.total,
            "first_byte_s": reading.reads[0][0] if reading.reads else None,
        }
        if response.status_code != 200:
            text = failure.decode("utf-8", errors="replace").strip()
            error = (
                f"HTTP {response.status_code}: {redact.redactor().text(text)[:MAX_FAILURE_BODY]}"
            )
            return ProbeResult(self.url, self.options.endpoint, started, error=error, **common)
        if reading.failure is not None:
            code, message = reading.failure
            common["status"] = code or response.status_code
            error = f"an error in the stream (HTTP {code}): {redact.redactor().text(message)}"
            return ProbeResult(self.url, self.options.endpoint, started, error=error, **common)
        error = "" if reading.finished else f"the stream ended without data: [DONE] (cut){cut}"
        return ProbeResult(
            self.url,
            self.options.endpoint,
            started,
            error=error,
            first_token_s=reading.first_token_s,
            tokens=reading.tokens,
            usage_tokens=reading.usage_tokens,
            usage_asked=self.options.include_usage,
            finished=reading.finished,
            **common,
        )
