"""`vtop requests` receiving the real vLLM's request spans, over OTLP/gRPC and OTLP/HTTP, from
its own exporter (`--otlp-traces-endpoint`): each request the test sends is listed by its id
with its tokens and its time split into queue, prefill and decode."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.support.scenarios import LIGHT, SEQ_LIMITED
from tests.support.vllm_harness.server import ServerPool, VllmServer
from tests.support.vtop_cli import Ran, vtop

pytestmark = pytest.mark.vllm

WINDOW_S = 20.0
"""The command's window: the requests, then two of the exporter's 2 s rounds to spare."""


async def answered(server: VllmServer, request_ids: list[str]) -> list[int]:
    """Completions, one per id (sent as X-Request-Id), of 4, 8, 12... tokens each."""
    async with httpx.AsyncClient(timeout=120) as client:
        models = (await client.get(server.url + "/v1/models")).json()
        model = models["data"][0]["id"]

        async def one(index: int, request_id: str) -> int:
            body = {
                "model": model,
                "prompt": "the quick brown fox " * (4 + index),
                "max_tokens": 4 * (index + 1),
                "ignore_eos": True,
            }
            headers = {"X-Request-Id": request_id}
            reply = await client.post(server.url + "/v1/completions", json=body, headers=headers)
            return reply.status_code

        return list(await asyncio.gather(*(one(i, rid) for i, rid in enumerate(request_ids))))


async def requests_while_sending(server: VllmServer, scheme: str) -> tuple[Ran, list[str]]:
    """`vtop requests --otlp SCHEME://127.0.0.1:PORT --json` running while the requests go."""
    assert server.otlp_port is not None
    address = f"{scheme}://127.0.0.1:{server.otlp_port}"
    ids = [f"vtop-span-{scheme}-{index}" for index in range(4)]
    argv = ("requests", "--otlp", address, "--window", f"{WINDOW_S:g}", "--json")
    command = asyncio.create_task(asyncio.to_thread(vtop, *argv, timeout_s=WINDOW_S + 60))
    await asyncio.sleep(3.0)  # listening before the first request ends
    statuses = await answered(server, ids)
    assert statuses == [200] * len(ids), statuses  # the precondition: every request answered
    return await command, ids


def assert_listed(ran: Ran, ids: list[str]) -> None:
    assert ran.code == 0, ran.text
    report: dict[str, Any] = json.loads(ran.out)
    assert report["schema"] == "vtop.requests/1"
    spans = report["requests"]
    for index, request_id in enumerate(ids):
        mine = [s for s in spans if request_id in s["request_id"]]
        assert len(mine) == 1, (request_id, [s["request_id"] for s in spans])
        [span] = mine
        assert span["output_tokens"] == span["max_tokens"] == 4 * (index + 1), span
        assert span["prompt_tokens"] and span["prompt_tokens"] > 0, span
        parts = span["queue_s"] + span["prefill_s"] + span["decode_s"]
        assert 0 < parts <= span["e2e_s"] * 1.01, span
        assert 0 < span["ttft_s"] <= span["e2e_s"], span
    assert report["time_split"] and report["time_split"][0]["requests"] >= 1, report


async def test_request_spans_over_grpc(vllm_pool: ServerPool) -> None:
    ran, ids = await requests_while_sending(vllm_pool.get(LIGHT), "grpc")
    assert_listed(ran, ids)


async def test_request_spans_over_http(vllm_pool: ServerPool) -> None:
    ran, ids = await requests_while_sending(vllm_pool.get(SEQ_LIMITED), "http")
    assert_listed(ran, ids)
