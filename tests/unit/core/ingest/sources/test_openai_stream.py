"""The one OpenAI stream reader: its lines, which events carry a token, and `vtop bench` and
`vtop probe` reading the same recorded stream alike (reasoning, tool-call and empty-text
events included), against a small real HTTP server."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler

import pytest

from tests.support.http_server import serving_handler
from vtop.core.ingest.sources.openai_stream import (
    DONE,
    MAX_LINE_BYTES,
    EventLines,
    NotAnEventStreamError,
    carries_a_token,
    data_of,
)
from vtop.core.ingest.sources.probe import ProbeOptions, ProbeSource
from vtop.core.manage.bench import Bench, BenchConfig

FIRST_TOKEN_S = 0.3
"""The recorded stream's wait between its opening role event and its first token."""

RECORDED: list[tuple[float, dict[str, object] | str]] = [
    (0.0, {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
    (FIRST_TOKEN_S, {"choices": [{"index": 0, "delta": {"reasoning_content": "Let"}}]}),
    (0.02, {"choices": [{"index": 0, "delta": {"reasoning": " me"}}]}),
    (0.02, {"choices": [{"index": 0, "delta": {"content": ""}}]}),  # a character's first byte
    (0.02, {"choices": [{"index": 0, "delta": {"content": "é"}}]}),
    (0.02, {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "t"}]}}]}),
    (0.02, {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
    (0.0, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}),
    (0.0, DONE),
]
"""A chat stream as vLLM writes it: role, reasoning (both spellings), an empty text, text, a
tool call, the finish, the usage. Five events carry a token."""


def recorded_stream() -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._send(json.dumps({"data": [{"id": "m"}]}).encode())

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for wait, event in RECORDED:
                time.sleep(wait)
                payload = event if isinstance(event, str) else json.dumps(event)
                self.wfile.write(f"data: {payload}\n\n".encode())
                self.wfile.flush()
            self.close_connection = True

        def _send(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


def test_lines_split_only_where_sse_does_and_a_giant_line_is_refused() -> None:
    lines = EventLines()
    assert lines.feed(b"data: a\r\ndata: b\rdata: c\n") == ["data: a", "data: b", "data: c"]
    split = EventLines()
    assert split.feed('data: "x\u2028y"\r'.encode()) == ['data: "x\u2028y"']
    assert split.feed(b"\ndata: [DONE]") == [""] and split.rest() == ["data: [DONE]"]
    with pytest.raises(NotAnEventStreamError):
        EventLines().feed(b"x" * (MAX_LINE_BYTES + 1))


@pytest.mark.parametrize(
    ("event", "token"),
    [(event, index not in (0, 6, 7)) for index, (_, event) in enumerate(RECORDED[:-1])],
)
def test_which_events_carry_a_token(event: dict[str, object], token: bool) -> None:
    assert carries_a_token(event) is token
    assert data_of(f"data: {json.dumps(event)}") == event
    assert data_of("data: [DONE]") == DONE and data_of(": keep-alive") is None


async def test_bench_and_probe_read_the_same_stream_alike() -> None:
    with serving_handler(recorded_stream()) as url:
        bench = Bench(BenchConfig(url=url, endpoint="chat", concurrency=1, num_requests=1))
        await bench.run()
        source = ProbeSource(url, ProbeOptions(endpoint="chat"))
        try:
            probed = await source.probe()
        finally:
            await source.close()
    (benched,) = bench.results
    assert benched.ok and benched.ttft_s is not None, benched
    assert probed.first_token_s is not None, probed
    tokens = len(benched.chunk_gaps_s) + 1
    assert tokens == probed.tokens == 5, (benched, probed)
    assert benched.ttft_s >= FIRST_TOKEN_S and probed.first_token_s >= FIRST_TOKEN_S
    assert abs(benched.ttft_s - probed.first_token_s) < 0.15, (benched.ttft_s, probed)
