"""The canary counts the events vLLM writes for generated tokens, as vLLM 0.32 shapes them:
one per engine step, its text empty while a character's bytes are incomplete; chat opens with a
role event and both end with a usage event that carry no token."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from tests.support.http_server import QuietHandler, serving_handler
from vtop.core.ingest.sources.probe import ProbeOptions, ProbeSource

TEXTS = ["", " a", "", "", " b"]
"""What the detokenizer released at each of five steps (a random-weight model's share of empty
steps is often larger)."""


def vllm_shaped_chunks(endpoint: str) -> list[dict[str, object]]:
    """The events `vllm serve` streams for TEXTS, with usage asked."""
    last = len(TEXTS) - 1
    if endpoint == "chat":
        chunks: list[dict[str, object]] = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        ]
        chunks += [
            {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
            for text in TEXTS
        ]
    else:
        chunks = [
            {
                "choices": [
                    {"index": 0, "text": text, "finish_reason": "length" if i == last else None}
                ]
            }
            for i, text in enumerate(TEXTS)
        ]
    chunks.append({"choices": [], "usage": {"completion_tokens": len(TEXTS)}})
    return chunks


def streaming(endpoint: str) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.reply(200, json.dumps({"data": [{"id": "m"}]}).encode(), "application/json")

        def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            events = [f"data: {json.dumps(c)}\n\n" for c in vllm_shaped_chunks(endpoint)]
            self.reply(200, ("".join(events) + "data: [DONE]\n\n").encode(), "text/event-stream")

    return Handler


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_steps_with_no_text_are_tokens_and_the_role_and_usage_events_are_not(
    endpoint: str,
) -> None:
    with serving_handler(streaming(endpoint)) as url:
        source = ProbeSource(url, ProbeOptions(endpoint, max_tokens=len(TEXTS), timeout_s=5))
        try:
            canary = await source.probe()
        finally:
            await source.close()
    assert canary.ok, canary
    assert (canary.tokens, canary.usage_tokens) == (len(TEXTS), len(TEXTS)), canary


async def test_each_canary_carries_its_own_request_id_and_trace_context() -> None:
    seen: list[tuple[str | None, str | None]] = []

    class Recording(streaming("completions")):  # type: ignore[misc]
        def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
            seen.append((self.headers.get("X-Request-Id"), self.headers.get("traceparent")))
            super().do_POST()

    with serving_handler(Recording) as url:
        source = ProbeSource(url, ProbeOptions(max_tokens=len(TEXTS), timeout_s=5))
        try:
            canaries = [await source.probe(), await source.probe()]
        finally:
            await source.close()
    assert len(seen) == 2 and seen[0] != seen[1]
    for canary, (request_id, parent) in zip(canaries, seen, strict=True):
        assert canary.ok and request_id == canary.request_id
        assert canary.request_id.startswith("vtop-canary-")
        assert parent is not None
        version, trace, span, flags = parent.split("-")
        assert (version, flags, trace) == ("00", "01", canary.trace_id)
        assert len(trace) == 32 and len(span) == 16
