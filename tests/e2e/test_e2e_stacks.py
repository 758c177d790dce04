"""Stuck or dead, on a real vLLM: a custom logits processor of our own (loaded with
`--logits-processors`, tests/support/vllm_harness/faulty_logits.py) that spins on request, then
one that raises. Each test measures its precondition (tokens frozen while /health answers 200;
the fatal error and its traceback in the log) and then asks vtop where the engine is stuck, or
why it died, as a user would (`vtop stacks`, `vtop diagnose`).

One server for both, in order: the spin is released before the raise kills it."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.vllm_harness.server import CACHE, ServerSpec, VllmServer
from tests.support.vtop_cli import Ran, vtop

pytestmark = pytest.mark.vllm

FAULTY = ServerSpec(max_num_seqs=4, logits_processors="faulty_logits:FaultWhenAsked")
FROZEN_S = 5.0
"""How long tokens must stay frozen, /health answering, before the spin counts as a stall."""


@pytest.fixture(scope="module")
def faulty() -> Iterator[VllmServer]:
    """A server of its own (it ends dead), stopped whatever happens."""
    server = VllmServer(FAULTY, CACHE / "logs" / f"vllm-faulty-{time.time():.0f}.log")
    try:
        server.start()
        yield server
    finally:
        server.stop()


def completion(
    server: VllmServer, request_id: str, timeout_s: float, xargs: dict[str, str] | None = None
) -> int:
    """One completion request; its status (0 when the connection failed)."""
    body: dict[str, Any] = {
        "model": str(server.model_path),
        "prompt": "hello " * 8,
        "max_tokens": 8,
    }
    if xargs:
        body["vllm_xargs"] = xargs
    try:
        response = httpx.post(
            f"{server.url}/v1/completions",
            json=body,
            headers={"X-Request-Id": request_id},
            timeout=timeout_s,
        )
    except httpx.HTTPError:
        return 0
    return response.status_code


def generated(url: str) -> float:
    """vllm:generation_tokens_total now (summed over engines)."""
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:generation_tokens_total{")
    )


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=3).status_code == 200
    except httpx.HTTPError:
        return False


def assert_frozen(url: str) -> None:
    """The precondition: no token generated for FROZEN_S while /health answers 200."""
    before, started = generated(url), time.monotonic()
    time.sleep(FROZEN_S)
    after, alive = generated(url), healthy(url)
    figures = f"tokens {before:.0f} -> {after:.0f} over {time.monotonic() - started:.1f} s"
    assert after == before and alive, (
        f"the spin did not stall the engine: {figures}, health {alive}"
    )


def as_json(ran: Ran) -> dict[str, Any]:
    try:
        return dict(json.loads(ran.out))
    except json.JSONDecodeError as error:
        raise AssertionError(f"exit {ran.code}, not JSON: {ran.text[-2000:]}") from error


def test_a_spinning_logits_processor_is_found_where_it_spins_and_a_stopped_worker_is_stopped(
    faulty: VllmServer, tmp_path: Path
) -> None:
    url, release = faulty.url, tmp_path / "release"
    assert completion(faulty, "vtop-warm", 120) == 200
    spin = threading.Thread(
        target=completion,
        args=(faulty, "vtop-fault-spin", 600, {"vtop_fault": "spin", "vtop_release": str(release)}),
        daemon=True,
    )
    try:
        spin.start()
        time.sleep(2)
        assert_frozen(url)

        stacks = vtop("stacks", url, "--json", timeout_s=60)
        found = as_json(stacks)["stacks"]
        assert stacks.code == 2, stacks.text
        assert found["activity"] == "spinning" and found["stuck"], found
        assert found["process"]["role"] == "worker", found
        assert found["process"]["where"]["function"] == "spin_until_released", found
        assert found["process"]["where"]["file"].endswith("faulty_logits.py"), found
        assert "custom logits processor" in found["owner"], found
        assert found["via"]["role"] == "engine core", found

        diagnosed = vtop("diagnose", url, "--json", "--no-gpu", "--no-predict", timeout_s=120)
        report = as_json(diagnosed)
        assert diagnosed.code == 2 and report["primary"]["id"] == "S1", diagnosed.text[-3000:]
        where = report["stacks"]["process"]["where"]
        assert report["stacks"]["activity"] == "spinning", report["stacks"]
        assert where["function"] == "spin_until_released", report["stacks"]
        text = vtop("diagnose", url, "--no-gpu", "--no-predict", "--window", "10", timeout_s=120)
        assert "WHERE THE ENGINE IS: SPINNING" in text.out, text.text[-3000:]
        assert "spin_until_released (faulty_logits.py:" in text.out, text.out

        worker = int(found["process"]["pid"])
        os.kill(worker, signal.SIGSTOP)
        try:
            stopped = vtop("stacks", url, "--json", timeout_s=60)
            seen = as_json(stopped)["stacks"]
            assert stopped.code == 2 and seen["activity"] == "stopped", seen
            assert seen["process"]["pid"] == worker, seen
        finally:
            os.kill(worker, signal.SIGCONT)
    finally:
        release.write_text("go")
        spin.join(timeout=120)
    before = generated(url)
    assert completion(faulty, "vtop-after-spin", 120) == 200
    assert generated(url) > before, "the engine did not resume after the release"


def test_a_raising_logits_processor_is_the_last_words_of_a_dead_server(
    faulty: VllmServer,
) -> None:
    url = faulty.url
    assert healthy(url), faulty.log_tail()
    completion(faulty, "vtop-fault-raise", 120, {"vtop_fault": "raise"})
    deadline = time.monotonic() + 120
    while healthy(url) or "EngineCore encountered a fatal error" not in faulty.log_text():
        assert time.monotonic() < deadline, (
            f"the raise did not kill the engine: health {healthy(url)}\n{faulty.log_tail()}"
        )
        time.sleep(1)
    assert "Traceback (most recent call last)" in faulty.log_text(), faulty.log_tail()

    diagnosed = vtop(
        "diagnose", url, "--json", "--no-gpu", "--vllm-log", str(faulty.log_path), timeout_s=60
    )
    report = as_json(diagnosed)
    words = report["last_words"]
    assert diagnosed.code == 2 and report["verdict"] == "critical", diagnosed.text[-3000:]
    assert words is not None, report
    assert "InjectedFaultError" in words["root"]["exception"], words
    assert words["root"]["raised_at"]["function"] == "raise_on_request", words
    assert words["root"]["raised_at"]["file"].endswith("faulty_logits.py"), words
    assert any("vtop-fault-raise" in request for request in words["requests"]), words
    text = vtop("diagnose", url, "--no-gpu", "--vllm-log", str(faulty.log_path), timeout_s=60)
    assert text.code == 2 and "WHY IT DIED" in text.out and "raise_on_request" in text.out
    without = vtop("diagnose", url, "--no-gpu", timeout_s=60)
    assert without.code == 3, without.text
