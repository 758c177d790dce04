"""vtop's in-flight middleware as vLLM's API server runs it: an ASGI app behind it (here a
stand-in streaming server-sent events until told to finish), requests in flight listed with
their ids, ages, max_tokens and events so far, and gone when they end."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from vtop.core.manage.vtop_inflight import PATH, InFlight, Message, Receive, Scope, Send


class Streaming:
    """An ASGI app that reads the body, streams `events` then waits for `finish`."""

    def __init__(self, events: int) -> None:
        self.events = events
        self.finish = asyncio.Event()
        self.streaming = asyncio.Event()
        self.seen_ids: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        self.seen_ids.append(headers.get(b"x-request-id", b"").decode())
        more = True
        while more:
            message: Message = await receive()
            more = bool(message.get("more_body"))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for index in range(self.events):
            await send(
                {
                    "type": "http.response.body",
                    "body": b'data: {"i": %d}\n\n' % index,
                    "more_body": True,
                }
            )
        self.streaming.set()
        await self.finish.wait()
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vllm")


async def listed(http: httpx.AsyncClient) -> dict[str, Any]:
    reply = await http.get(PATH)
    assert reply.status_code == 200
    document: dict[str, Any] = reply.json()
    return document


async def test_a_streaming_request_is_listed_until_it_ends() -> None:
    app = Streaming(events=3)
    async with client(InFlight(app)) as http:
        fields = {"model": "m", "prompt": 'say "max_tokens": 5', "max_tokens": 400, "stream": True}
        body = json.dumps(fields).encode()
        sent = asyncio.create_task(
            http.post("/v1/completions", content=body, headers={"X-Request-Id": "hog-1"})
        )
        await asyncio.wait_for(app.streaming.wait(), 5)
        document = await listed(http)
        assert document["schema"] == "vtop.inflight/1" and document["in_flight"] == 1
        [request] = document["requests"]
        assert request["request_id"] == "hog-1" and request["path"] == "/v1/completions"
        assert request["max_tokens"] == 400  # not the 5 inside the prompt's text
        assert request["stream"] is True and request["events"] == 3
        assert request["body_bytes"] == len(body)
        assert request["age_s"] >= 0
        app.finish.set()
        assert (await sent).status_code == 200
        assert (await listed(http))["requests"] == []


async def test_a_request_without_an_id_is_given_one_vllm_then_uses() -> None:
    app = Streaming(events=0)
    async with client(InFlight(app)) as http:
        sent = asyncio.create_task(http.post("/v1/chat/completions", json={"max_tokens": 8}))
        await asyncio.wait_for(app.streaming.wait(), 5)
        [request] = (await listed(http))["requests"]
        assert request["request_id"].startswith("vtop-") and len(request["request_id"]) == 21
        assert app.seen_ids == [request["request_id"]]
        assert request["stream"] is False
        app.finish.set()
        await sent


async def test_a_key_split_between_two_body_chunks_is_still_read() -> None:
    app = Streaming(events=0)
    body = b'{"prompt": "' + b"x" * 5000 + b'", "max_completion_tokens": 77}'
    middle = len(body) - 20

    async def chunks() -> Any:
        yield body[:middle]
        yield body[middle:]

    async with client(InFlight(app)) as http:
        sent = asyncio.create_task(http.post("/v1/chat/completions", content=chunks()))
        await asyncio.wait_for(app.streaming.wait(), 5)
        [request] = (await listed(http))["requests"]
        assert request["max_tokens"] == 77 and request["body_bytes"] == len(body)
        app.finish.set()
        await sent


async def test_a_request_that_fails_leaves_the_list() -> None:
    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("engine died")

    middleware = InFlight(failing)
    async with client(middleware) as http:
        with pytest.raises(RuntimeError, match="engine died"):
            await http.post("/v1/completions", json={})
        assert (await listed(http))["requests"] == []


async def test_other_paths_pass_untouched_and_the_list_is_read_only() -> None:
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async with client(InFlight(app)) as http:
        assert (await http.get("/metrics")).status_code == 204
        assert (await http.post(PATH)).status_code == 405
        assert (await listed(http))["in_flight"] == 0
    assert seen == ["/metrics"]


async def test_where_the_server_takes_an_api_key_the_list_asks_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "sekrit")
    async with client(InFlight(Streaming(events=0))) as http:
        assert (await http.get(PATH)).status_code == 401
        wrong = await http.get(PATH, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        right = await http.get(PATH, headers={"Authorization": "Bearer sekrit"})
        assert right.status_code == 200 and right.json()["in_flight"] == 0
