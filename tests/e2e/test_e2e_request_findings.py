"""`vtop diagnose URL --otlp ADDR` on a real vLLM: the requests that made others wait, named by
their ids from vLLM's own spans. Slot hogs on the two-slot server (two generations run to
their max_tokens while short requests queue), head-of-line blocking on the 64-token budget (four
900-token prompts prefilled in chunks while short ones wait). Each test first measures its
precondition on the client (the short requests waited far longer than one alone takes) and
fails with the figures when it does not hold. The same shapes on a server with room to spare
give neither finding."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from tests.support.scenarios import LIGHT, SEQ_LIMITED, SMALL_BUDGET
from tests.support.vllm_harness.server import ServerPool, VllmServer
from tests.support.vtop_cli import Ran, vtop
from vtop.core.ingest.exposition import ExpositionParser

pytestmark = pytest.mark.vllm

WINDOW_S = 25.0
WAITED_FACTOR = 3.0
"""The precondition: the short requests took at least this many times one alone."""
IN_ENGINE_WITHIN_S = 10.0
"""The victims go once the engine has every culprit (running, waiting or done: a 400-token
generation takes about a second here, 3,600 prompt tokens at 64 a step several dozen steps);
a fixed head start was not enough on a busy 2-core host, where the culprits' own request for
the model's name could come after the victims'."""
POLL_S = 0.02


def tokens(count: int, offset: int = 0) -> list[int]:
    """A prompt of exactly `count` token ids (the test model's vocabulary holds them)."""
    return [100 + (offset + index) % 200 for index in range(count)]


async def complete(
    client: httpx.AsyncClient,
    server: VllmServer,
    request_id: str,
    prompt: list[int],
    max_tokens: int,
) -> float:
    """One completion (its id sent as X-Request-Id), its latency on the client."""
    models = (await client.get(server.url + "/v1/models")).json()
    body = {
        "model": models["data"][0]["id"],
        "prompt": prompt,
        "max_tokens": max_tokens,
        "ignore_eos": True,
    }
    started = time.monotonic()
    reply = await client.post(
        server.url + "/v1/completions", json=body, headers={"X-Request-Id": request_id}
    )
    assert reply.status_code == 200, reply.text
    return time.monotonic() - started


async def alone(server: VllmServer, prompt: list[int], max_tokens: int) -> float:
    """What a short request takes with nothing in its way (the precondition's baseline)."""
    async with httpx.AsyncClient(timeout=120) as client:
        await complete(client, server, "vtop-warm", prompt, max_tokens)
        return await complete(client, server, "vtop-alone", prompt, max_tokens)


async def diagnose_during(
    server: VllmServer,
    culprits: list[tuple[str, list[int], int]],
    victims: list[tuple[str, list[int], int]],
) -> tuple[Ran, list[float]]:
    """`vtop diagnose URL --otlp ... --json` while the culprits go, then the victims a moment
    later; the victims' latencies on the client."""
    assert server.otlp_port is not None
    scheme = server.spec.otlp_protocol
    address = f"{scheme}://127.0.0.1:{server.otlp_port}"
    argv = ("diagnose", server.url, "--otlp", address, "--window", f"{WINDOW_S:g}", "--json")
    command = asyncio.create_task(asyncio.to_thread(vtop, *argv, timeout_s=WINDOW_S + 90))
    await asyncio.sleep(3.0)  # the receiver listens and the window has begun
    async with httpx.AsyncClient(timeout=120) as client:
        finished = await engine_counts(client, server)
        held = [asyncio.create_task(complete(client, server, *c)) for c in culprits]
        await until_in_engine(client, server, len(culprits), finished["done"])
        waited = await asyncio.gather(*(complete(client, server, *v) for v in victims))
        await asyncio.gather(*held)
    return await command, list(waited)


async def engine_counts(client: httpx.AsyncClient, server: VllmServer) -> dict[str, float]:
    """The engine's running and waiting requests now, and those it has finished."""
    text = (await client.get(server.url + "/metrics")).text
    counts = {"running": 0.0, "waiting": 0.0, "done": 0.0}
    names = {
        "vllm:num_requests_running": "running",
        "vllm:num_requests_waiting": "waiting",
        "vllm:request_success_total": "done",
    }
    for sample in ExpositionParser().parse(text).samples:
        if sample.series.name in names:
            counts[names[sample.series.name]] += sample.value
    return counts


async def until_in_engine(
    client: httpx.AsyncClient, server: VllmServer, count: int, done_before: float
) -> None:
    """Wait until the engine holds (or has finished) `count` more requests; fail with the
    figures when it does not within IN_ENGINE_WITHIN_S."""
    deadline = time.monotonic() + IN_ENGINE_WITHIN_S
    while True:
        now = await engine_counts(client, server)
        inside = now["running"] + now["waiting"] + now["done"] - done_before
        if inside >= count:
            return
        assert time.monotonic() < deadline, f"the culprits never reached the engine: {now}"
        await asyncio.sleep(POLL_S)


def the_finding(ran: Ran, kind: str) -> dict[str, Any]:
    """The report's request finding of `kind`, with the report in the failure."""
    assert ran.code in (1, 2), ran.text  # never healthy with requests held up
    report: dict[str, Any] = json.loads(ran.out)
    requests = report["requests"]
    assert requests is not None and requests["received"] > 0, requests
    found = [f for f in requests["findings"] if f["kind"] == kind]
    assert found, json.dumps(requests, indent=1)[:4000]
    assert report["verdict"] != "ok"
    finding: dict[str, Any] = found[0]
    return finding


def ids(spans: list[dict[str, Any]]) -> set[str]:
    """The request ids vtop names (vLLM's contain the client's X-Request-Id)."""
    return {span["request_id"] for span in spans}


def named(found: set[str], sent: list[str]) -> bool:
    return all(any(mine in theirs for mine in sent) for theirs in found)


async def test_generations_holding_both_slots_are_named_slot_hogs(vllm_pool: ServerPool) -> None:
    server = vllm_pool.get(SEQ_LIMITED)
    short = tokens(20)
    baseline = await alone(server, short, 8)
    hogs = [(f"vtop-hog-{i}", tokens(20, 50 * i), 400) for i in range(2)]
    victims = [(f"vtop-wait-{i}", tokens(20, 7 * i), 8) for i in range(6)]
    ran, waited = await diagnose_during(server, hogs, victims)
    mean_wait = sum(waited) / len(waited)
    assert mean_wait >= WAITED_FACTOR * baseline, (
        f"precondition: the short requests took {mean_wait:.2f} s on average, one alone "
        f"{baseline:.2f} s: they did not wait behind the long generations"
    )
    finding = the_finding(ran, "slot-hog")
    assert named(ids(finding["culprits"]), [h[0] for h in hogs]), finding["culprits"]
    assert len(finding["culprits"]) == 2
    assert named(ids(finding["victims"]), [v[0] for v in victims]), finding["victims"]
    assert finding["changes"][0].startswith("max_tokens <= "), finding
    # the server has two slots: whether known or counted from the spans, never more
    assert finding["changes"][1].startswith("--max-num-seqs above 2,"), finding


async def test_short_requests_behind_chunked_prompts_are_head_of_line_blocked(
    vllm_pool: ServerPool,
) -> None:
    server = vllm_pool.get(SMALL_BUDGET)
    short = tokens(24)
    baseline = await alone(server, short, 4)
    long = [(f"vtop-long-{i}", tokens(900, 300 * i), 2) for i in range(4)]
    victims = [(f"vtop-short-{i}", tokens(24, 11 * i), 4) for i in range(6)]
    ran, waited = await diagnose_during(server, long, victims)
    mean_wait = sum(waited) / len(waited)
    assert mean_wait >= WAITED_FACTOR * baseline, (
        f"precondition: the short requests took {mean_wait:.2f} s on average, one alone "
        f"{baseline:.2f} s: the long prompts' prefill did not hold them up"
    )
    finding = the_finding(ran, "head-of-line")
    assert named(ids(finding["culprits"]), [c[0] for c in long]), finding["culprits"]
    assert named(ids(finding["victims"]), [v[0] for v in victims]), finding["victims"]
    assert finding["changes"][0].startswith("--long-prefill-token-threshold "), finding


async def test_the_same_shapes_with_room_to_spare_give_neither_finding(
    vllm_pool: ServerPool,
) -> None:
    """Long generations and long prompts beside short requests on the 16-slot server, whose
    step budget takes each prompt whole: nobody waits behind anybody, and neither finding is
    made although the spans show the same spread of lengths."""
    server = vllm_pool.get(LIGHT)
    short = tokens(20)
    baseline = await alone(server, short, 8)
    long = [(f"vtop-gen-{i}", tokens(20, 50 * i), 200) for i in range(2)]
    long += [(f"vtop-prompt-{i}", tokens(300, 300 * i), 2) for i in range(2)]
    shorts = [(f"vtop-chat-{i}", tokens(20, 7 * i), 8) for i in range(6)]
    ran, _ = await diagnose_during(server, long, shorts)
    report: dict[str, Any] = json.loads(ran.out)
    waiting_max = report["window_gauges"]["waiting"]["max"]
    queue_mean = report["statistics"]["queue_mean_s"]
    # batched with long work the short requests run slower, but none may wait to be admitted:
    # the engine's queue stays empty, and its mean queue time is under what one short takes
    assert waiting_max == 0 and queue_mean is not None and queue_mean < baseline, (
        f"precondition: the engine's queue reached {waiting_max} in the window and its mean "
        f"queue time was {queue_mean} s against {baseline:.3f} s for a short request alone: "
        "this load was not free of waiting"
    )
    requests = report["requests"]
    assert requests is not None and requests["received"] >= len(long) + len(shorts), requests
    kinds = [finding["kind"] for finding in requests["findings"]]
    assert "slot-hog" not in kinds and "head-of-line" not in kinds, json.dumps(requests)[:4000]
