"""Stuck or dead, on a real vLLM: a custom logits processor of our own (loaded with
`--logits-processors`, tests/support/vllm_harness/faulty_logits.py) that spins on request, then
one that raises. Each test measures its precondition (tokens frozen while /health answers 200;
the fatal error and its traceback in the log) and then asks vtop where the engine is stuck, or
why it died, as a user would (`vtop stacks`, `vtop diagnose`).

One server for all, in order: each spin is released before the raise kills it; it is the
pool's two-slot server (tests/support/scenarios.py), which loads the processor for these tests
and is used by no test after them."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.incidents import Load, LoadProcess
from tests.support.scenarios import SEQ_LIMITED
from tests.support.vllm_harness.server import ServerPool, VllmServer
from tests.support.vtop_cli import Ran, vtop

pytestmark = pytest.mark.vllm

FAULTY = SEQ_LIMITED
FROZEN_S = 5.0
"""How long tokens must stay frozen, /health answering, before the spin counts as a stall."""
SETTLE_S = 15.0
"""How long the trigger may take to stop the tokens before the frozen window is measured."""


@pytest.fixture
def faulty(vllm_pool: ServerPool) -> VllmServer:
    """The pool's server with the faulty processor (the raise test discards it, dead)."""
    assert FAULTY.logits_processors, "the server spec lost its faulty logits processor"
    return vllm_pool.get(FAULTY)


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


def engine_figures(url: str) -> dict[str, float]:
    """Generated tokens, running and waiting now (summed over engines)."""
    text = httpx.get(f"{url}/metrics", timeout=5).text
    names = {
        "generated": "vllm:generation_tokens_total{",
        "running": "vllm:num_requests_running{",
        "waiting": "vllm:num_requests_waiting{",
    }
    figures = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        for name, prefix in names.items():
            if line.startswith(prefix):
                figures[name] += float(line.rsplit(" ", 1)[1])
    return figures


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=3).status_code == 200
    except httpx.HTTPError:
        return False


def frozen(url: str) -> dict[str, float]:
    """The precondition: no token generated for FROZEN_S while /health answers 200; the
    gauges as the engine last published them. The trigger may take a few seconds to be
    admitted on a busy host: the measurement starts once a second passes without a token
    (SETTLE_S at most)."""
    settle_by, last = time.monotonic() + SETTLE_S, engine_figures(url)["generated"]
    while time.monotonic() < settle_by:
        time.sleep(1.0)
        now = engine_figures(url)["generated"]
        if now == last:
            break
        last = now
    before, started = engine_figures(url), time.monotonic()
    time.sleep(FROZEN_S)
    after, alive = engine_figures(url), healthy(url)
    seen = f"{before} -> {after} over {time.monotonic() - started:.1f} s, health {alive}"
    assert after["generated"] == before["generated"] and alive, f"no stall: {seen}"
    return after


def as_json(ran: Ran) -> dict[str, Any]:
    try:
        return dict(json.loads(ran.out))
    except json.JSONDecodeError as error:
        raise AssertionError(f"exit {ran.code}, not JSON: {ran.text[-2000:]}") from error


def spinning(server: VllmServer, release: Path) -> threading.Thread:
    """The trigger request, in a thread (it hangs until `release` exists)."""
    asked = {"vtop_fault": "spin", "vtop_release": str(release)}
    thread = threading.Thread(
        target=completion, args=(server, "vtop-fault-spin", 600, asked), daemon=True
    )
    thread.start()
    return thread


def released(server: VllmServer, release: Path, spin: threading.Thread) -> None:
    """Release the spin; the engine steps again."""
    release.write_text("go")
    spin.join(timeout=120)
    before = engine_figures(server.url)["generated"]
    assert completion(server, "vtop-after-spin", 120) == 200, server.log_tail()
    assert engine_figures(server.url)["generated"] > before, "the engine did not resume"
    release.unlink()


def assert_spinning_in_the_processor(found: dict[str, Any]) -> None:
    assert found["activity"] == "spinning" and found["stuck"], found
    assert found["process"]["role"] == "worker", found
    assert found["process"]["where"]["function"] == "spin_until_released", found
    assert found["process"]["where"]["file"].endswith("faulty_logits.py"), found
    assert "custom logits processor" in found["owner"], found
    assert found["via"]["role"] == "engine core", found


def test_a_spin_under_load_is_the_stall_with_its_function_and_a_stopped_worker_is_stopped(
    faulty: VllmServer, tmp_path: Path
) -> None:
    url, release = faulty.url, tmp_path / "release"
    assert completion(faulty, "vtop-warm", 120) == 200
    # two clients hold both slots: the trigger waits for one, so the gauges the engine published
    # before it spins always show requests (one client's short requests leave the engine idle
    # between them, and a trigger admitted after an idle step froze gauges that read 0)
    load = LoadProcess(Load(2, 32, 256), url, 300)
    try:
        time.sleep(3)
        spin = spinning(faulty, release)
        try:
            time.sleep(2)
            gauges = frozen(url)
            assert gauges["running"] + gauges["waiting"] >= 1, f"gauges show no request: {gauges}"

            stacks = vtop("stacks", url, "--json", timeout_s=60)
            assert stacks.code == 2, stacks.text
            assert_spinning_in_the_processor(as_json(stacks)["stacks"])

            diagnosed = vtop("diagnose", url, "--json", "--no-gpu", "--no-predict", timeout_s=120)
            report = as_json(diagnosed)
            assert diagnosed.code == 2, diagnosed.text[-3000:]
            assert report["primary"]["id"] == "S1", diagnosed.text[-3000:]
            assert_spinning_in_the_processor(report["stacks"])

            worker = int(as_json(stacks)["stacks"]["process"]["pid"])
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
    finally:
        load.stop()
    released(faulty, release, spin)


def test_a_spin_whose_gauges_look_idle_is_still_stuck_by_its_stacks(
    faulty: VllmServer, tmp_path: Path
) -> None:
    """Alone, the trigger hangs in the step that admits it: the engine publishes no gauges
    after it, so its metrics read 0 running and 0 waiting (no traffic) while it hangs."""
    url, release = faulty.url, tmp_path / "release"
    spin = spinning(faulty, release)
    try:
        time.sleep(2)
        gauges = frozen(url)
        assert gauges["running"] + gauges["waiting"] == 0, f"the gauges show the hang: {gauges}"
        text = vtop("diagnose", url, "--no-gpu", "--no-predict", "--window", "5", timeout_s=120)
        assert text.code == 2, text.text[-3000:]
        assert "VERDICT: CRITICAL - the engine is stuck" in text.out, text.out
        assert "WHERE THE ENGINE IS: SPINNING" in text.out, text.out
        assert "spin_until_released (faulty_logits.py:" in text.out, text.out
        assert "IN FLIGHT (1 running" in text.out and "vtop-fault-spin" in text.out, text.out
        assert_the_stuck_request_is_named(url)
    finally:
        release.write_text("go")
        spin.join(timeout=120)
    released(faulty, release, spin)
    after = as_json(vtop("requests", url, "--json", timeout_s=60))
    assert after["in_flight"] == [], after["in_flight"]


def assert_the_stuck_request_is_named(url: str) -> None:
    """vtop's middleware in the server lists the trigger request in flight, held since the
    engine froze, although the gauges read idle."""
    listed = as_json(vtop("requests", url, "--json", timeout_s=60))
    stuck = [r for r in listed["in_flight"] or [] if r["request_id"] == "vtop-fault-spin"]
    assert stuck, listed
    assert stuck[0]["age_s"] >= FROZEN_S and stuck[0]["max_tokens"] == 8, stuck
    assert stuck[0]["path"] == "/v1/completions" and stuck[0]["stream"] is False, stuck
    text = vtop("requests", url, timeout_s=60)
    assert text.code == 0 and "IN FLIGHT (1 running" in text.out, text.text


def test_a_raising_logits_processor_is_the_last_words_of_a_dead_server(
    faulty: VllmServer, vllm_pool: ServerPool
) -> None:
    try:
        raise_and_read_the_last_words(faulty)
    finally:
        vllm_pool.discard(FAULTY)


def raise_and_read_the_last_words(faulty: VllmServer) -> None:
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
