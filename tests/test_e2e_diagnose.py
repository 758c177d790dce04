"""`vtop diagnose` against a real vLLM under the seed articles' scenarios."""

from __future__ import annotations

import asyncio
import math

import pytest

from tests.scenarios import (
    LIGHT,
    NO_PREFIX_CACHE,
    SEQ_LIMITED,
    SMALL_BUDGET,
    STORM,
    WINDOW,
    load,
)
from tests.vllm_harness.server import ServerPool, VllmServer
from vtop.core.bench import Bench, BenchConfig
from vtop.core.diagnose import DiagnoseOptions, Diagnosis, diagnose_url
from vtop.core.engine import Finding
from vtop.core.rules import load_rules
from vtop.core.sources.vllm_http import ScrapeOptions

pytestmark = pytest.mark.vllm
# Ordered so that consecutive tests share one server (the pool keeps one; a start is ~75 s here),
# ending on the storm server that test_e2e_vllm.py starts with.


async def diagnose_under_load(server: VllmServer, config: BenchConfig) -> Diagnosis:
    """Start the load, let it settle, then diagnose the server while it runs."""
    bench = asyncio.create_task(Bench(config).run())
    await asyncio.sleep(4)
    options = DiagnoseOptions(
        window_s=WINDOW, vllm_args=" ".join(server.argv()), vllm_log=server.log_text()
    )
    diagnosis = await diagnose_url(server.url, load_rules(), options, ScrapeOptions(timeout_s=10))
    report = await bench
    assert report.failed == 0, report.errors
    return diagnosis


def findings(diagnosis: Diagnosis) -> dict[str, Finding]:
    """Every finding and attached symptom by rule id."""
    assert diagnosis.triage is not None, diagnosis.reason
    found = {f.rule.id: f for f in diagnosis.triage.findings}
    found |= {s.rule.id: s for f in diagnosis.triage.findings for s in f.symptoms}
    return found


def proposed(finding: Finding, flag: str) -> float | str | None:
    return next(c.proposed for c in finding.changes if c.flag == flag)


async def test_small_token_budget_with_long_prompts(vllm_pool: ServerPool) -> None:
    server = vllm_pool.get(SMALL_BUDGET)
    diagnosis = await diagnose_under_load(server, load(server.url, 16, 400, 8, stream=False))
    found = findings(diagnosis)
    assert "Q3" in found, list(found)
    assert proposed(found["Q3"], "--max-num-batched-tokens") == 128


async def test_prefix_caching_off_is_flagged(vllm_pool: ServerPool) -> None:
    server = vllm_pool.get(NO_PREFIX_CACHE)
    config = load(server.url, 2, 160, 16, shared_prefix_tokens=128, stream=False)
    found = findings(await diagnose_under_load(server, config))
    assert "K1-off" in found
    assert proposed(found["K1-off"], "--enable-prefix-caching") == "--enable-prefix-caching"


async def test_max_num_seqs_is_the_limiter(vllm_pool: ServerPool) -> None:
    server = vllm_pool.get(SEQ_LIMITED)
    # Long prompts, short outputs: the engine is the busy part. With short prompts on this 2-core
    # machine the API server (which also answers /metrics) could not feed two slots, so the
    # batch was not full and Q2 rightly stayed quiet.
    diagnosis = await diagnose_under_load(server, load(server.url, 16, 256, 32, stream=False))
    assert diagnosis.triage is not None and diagnosis.triage.primary is not None
    primary = diagnosis.triage.primary
    assert primary.rule.id == "Q2", (diagnosis.triage, diagnosis.summary)
    value = proposed(primary, "--max-num-seqs")
    assert isinstance(value, float) and 2 < value <= 8


async def test_healthy_light_load_has_no_warning(vllm_pool: ServerPool) -> None:
    server = vllm_pool.get(LIGHT)
    diagnosis = await diagnose_under_load(server, load(server.url, 2, 32, 32, stream=False))
    assert diagnosis.verdict == "ok", [f.rule.id for f in diagnosis.triage.findings]  # type: ignore[union-attr]
    assert diagnosis.exit_code == 0


async def test_short_shared_prefix_explains_zero_hits_without_enabling_caching(
    vllm_pool: ServerPool,
) -> None:
    server = vllm_pool.get(STORM)
    config = load(server.url, 2, 128, 16, shared_prefix_tokens=96, stream=False)
    found = findings(await diagnose_under_load(server, config))
    assert "K1-block" in found
    assert "K1-off" not in found
    all_flags = {c.flag for f in found.values() for c in f.changes}
    assert "--enable-prefix-caching" not in all_flags


async def test_preemption_storm_is_memory_over_admission(vllm_pool: ServerPool) -> None:
    server = vllm_pool.get(STORM)
    diagnosis = await diagnose_under_load(server, load(server.url, 24, 96, 300))
    assert diagnosis.triage is not None and diagnosis.triage.primary is not None
    primary = diagnosis.triage.primary
    assert primary.rule.id == "M1", (diagnosis.triage.findings, diagnosis.summary)
    assert diagnosis.exit_code == 2
    capacity = diagnosis.config.number("kv_capacity_tokens")
    assert capacity == 1024
    shape = primary.evidence["mean_prompt"], primary.evidence["mean_output"]
    assert shape[0] == pytest.approx(96, rel=0.05)
    block = diagnosis.config.number("block_size")
    assert block == 128
    usable_blocks = capacity / block - 1  # vLLM keeps one block as its null block
    per_request = math.ceil((shape[0] + shape[1]) / block)  # type: ignore[operator]
    expected = max(1, math.floor(0.9 * usable_blocks / per_request))
    assert proposed(primary, "--max-num-seqs") == expected < 16
    # --num-gpu-blocks-override 8 pins this pool: more blocks, not more memory, is the alternative
    assert proposed(primary, "--num-gpu-blocks-override") == math.ceil(16 * per_request / 0.9) + 1
    assert "--gpu-memory-utilization" not in {c.flag for c in primary.changes}
    assert "ST3" not in findings(diagnosis)  # 300 of 512 tokens is max_tokens, not the context
