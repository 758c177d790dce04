"""vtop's ASGI middleware for vLLM's API server: the requests in flight, at GET /vtop/inflight.

vLLM exports a request's span only when the request ends, so a generation that has run for
minutes is invisible until then. `vtop serve` copies this file into its state directory, puts
that directory on vLLM's PYTHONPATH and adds `--middleware vtop_inflight.InFlight`. It runs
inside vLLM's process, so it imports nothing but the standard library, and keeps nothing of a
request but its id, path, start, body size, max_tokens and the count of streamed events: no
prompt, no output.

Each POST under /v1/ is listed while it runs. A request without an X-Request-Id is given one
(`vtop-` and 16 hex digits), which vLLM then uses in its own request id and span, so a request
listed here is found again among the spans when it ends.
"""

from __future__ import annotations

import hmac
import itertools
import json
import os
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Scope = MutableMapping[str, Any]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

PATH = "/vtop/inflight"
SCHEMA = "vtop.inflight/1"
LISTED_AT_MOST = 1000
"""Requests in one answer, the oldest first (the answer stays small on a flooded server)."""
ID_HEADER = b"x-request-id"
API_KEY_ENV = "VLLM_API_KEY"
ID_CHARS_KEPT = 128
MAX_TOKENS = re.compile(
    rb'(?<!\\)"(?:max_tokens|max_completion_tokens|max_output_tokens)"\s*:\s*(\d{1,9})'
)
"""The output cap, found in the body as it streams in: the body is never held or parsed whole
(a long prompt is megabytes). A key inside a JSON string has its quotes escaped, so it does
not match."""
STREAMED = re.compile(rb'(?<!\\)"stream"\s*:\s*true')
OVERLAP = 64
"""Bytes of the previous body chunk searched again with the next (a key split between two)."""


class Request:
    """One request in flight: what the list shows of it."""

    __slots__ = ("body_bytes", "events", "max_tokens", "path", "request_id", "started", "stream")

    def __init__(self, request_id: str, path: str) -> None:
        self.request_id = request_id
        self.path = path
        self.started = time.time()
        self.body_bytes = 0
        self.max_tokens: int | None = None
        self.stream = False
        self.events = 0
        """Server-sent events written so far (about one per token when streamed)."""

    def listed(self, now: float) -> dict[str, Any]:
        """The request as the list writes it."""
        return {
            "request_id": self.request_id,
            "path": self.path,
            "age_s": round(max(now - self.started, 0.0), 3),
            "stream": self.stream,
            "max_tokens": self.max_tokens,
            "events": self.events,
            "body_bytes": self.body_bytes,
        }


class InFlight:
    """The middleware (`vllm serve --middleware vtop_inflight.InFlight`). Where the server
    takes an API key (`VLLM_API_KEY`, where `vtop serve` puts `--api-key`), the list asks
    for it too: request ids are the clients'."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.requests: dict[int, Request] = {}
        self.numbers = itertools.count()
        key = os.environ.get(API_KEY_ENV, "")
        self.authorization = f"Bearer {key}".encode() if key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
        elif path == PATH:
            await self.answer(scope, send)
        elif scope.get("method") == "POST" and path.startswith("/v1/"):
            await self.follow(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def follow(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, listed until the app has answered it."""
        scope, request_id = with_request_id(scope)
        request = Request(request_id, str(scope.get("path", "")))
        number = next(self.numbers)
        self.requests[number] = request
        try:
            await self.app(scope, reading(receive, request), writing(send, request))
        finally:
            self.requests.pop(number, None)

    async def answer(self, scope: Scope, send: Send) -> None:
        """The list as JSON (GET only)."""
        if scope.get("method") != "GET":
            await respond(send, 405, b'{"error": "GET only"}')
            return
        if self.authorization is not None and not authorized(scope, self.authorization):
            await respond(send, 401, b'{"error": "Unauthorized"}')
            return
        now = time.time()
        running = sorted(self.requests.values(), key=lambda request: request.started)
        document = {
            "schema": SCHEMA,
            "now": now,
            "in_flight": len(running),
            "requests": [request.listed(now) for request in running[:LISTED_AT_MOST]],
        }
        await respond(send, 200, json.dumps(document).encode())


def authorized(scope: Scope, expected: bytes) -> bool:
    """True when the request carries the server's bearer token."""
    given = [bytes(v) for n, v in scope.get("headers", []) if bytes(n).lower() == b"authorization"]
    return any(hmac.compare_digest(value, expected) for value in given)


def with_request_id(scope: Scope) -> tuple[Scope, str]:
    """The scope with an X-Request-Id (the client's, or one given here) and that id."""
    headers = list(scope.get("headers", []))
    for name, value in headers:
        if bytes(name).lower() == ID_HEADER:
            return scope, bytes(value).decode("latin-1")[:ID_CHARS_KEPT]
    request_id = f"vtop-{uuid.uuid4().hex[:16]}"
    headers.append((ID_HEADER, request_id.encode()))
    return {**scope, "headers": headers}, request_id


def reading(receive: Receive, request: Request) -> Receive:
    """`receive`, noting the body's size, its max_tokens and whether it asks to stream."""
    tail = b""

    async def receive_noted() -> Message:
        nonlocal tail
        message = await receive()
        if message.get("type") == "http.request":
            body = bytes(message.get("body", b""))
            request.body_bytes += len(body)
            searched = tail + body
            found = MAX_TOKENS.search(searched)
            if found is not None and request.max_tokens is None:
                request.max_tokens = int(found.group(1))
            request.stream = request.stream or STREAMED.search(searched) is not None
            tail = searched[-OVERLAP:]
        return message

    return receive_noted


def writing(send: Send, request: Request) -> Send:
    """`send`, counting the server-sent events written (`data: ` at a line's start)."""

    async def send_noted(message: Message) -> None:
        if message.get("type") == "http.response.body":
            body = bytes(message.get("body", b""))
            request.events += body.count(b"\ndata: ") + body.startswith(b"data: ")
            request.events -= body.count(b"data: [DONE]")
        await send(message)

    return send_noted


async def respond(send: Send, status: int, body: bytes) -> None:
    """A complete JSON response."""
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
