"""`vtop probe`'s feed on a real local endpoint, opened as every feed is: canaries one after
another, the engine scraped before the first and after the last, and its view of the window
from those two scrapes."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

from tests.support.http_server import QuietHandler, serving_handler
from tests.support.payloads import fixture
from vtop.core.config.settings import Settings
from vtop.core.ingest.open_feed import open_canary_feed
from vtop.core.ingest.sources.probe import ProbeOptions
from vtop.core.ops.front_door import probe_front_door
from vtop.core.rules.loader import load_rules

TOKENS = 4


def streaming_engine(metrics_asked: list[str]) -> type[BaseHTTPRequestHandler]:
    """/metrics (the vLLM 0.32 capture), /v1/models and a streamed completion of TOKENS tokens
    with its usage."""

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                metrics_asked.append(self.path)
                self.reply(200, fixture("underload").encode())
            elif self.path == "/v1/models":
                self.reply(200, json.dumps({"data": [{"id": "m"}]}).encode(), "application/json")
            else:
                self.reply(404, b"not found")

        def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            chunks: list[dict[str, object]] = [
                {"choices": [{"text": f" w{i}", "index": 0}]} for i in range(TOKENS)
            ]
            chunks.append({"choices": [], "usage": {"completion_tokens": TOKENS}})
            body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            self.reply(200, body.encode(), "text/event-stream")

    return Handler


async def test_canaries_run_back_to_back_between_two_engine_scrapes() -> None:
    asked: list[str] = []
    with serving_handler(streaming_engine(asked)) as url:
        options = ProbeOptions(max_tokens=TOKENS, timeout_s=5)
        endpoints = ("completions", "chat")
        feed = open_canary_feed(Settings(timeout_s=5), url, None, endpoints, 3, options)
        door = await probe_front_door(feed, load_rules())
    assert [c.endpoint for c in door.canaries] == ["completions", "chat"] * 3
    assert all(c.ok and c.tokens == TOKENS and c.usage_tokens == TOKENS for c in door.canaries)
    assert len(asked) == 2, asked  # before the first canary and after the last
    assert door.engine.target is not None and door.verdict == "ok", door
