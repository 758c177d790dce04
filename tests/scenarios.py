"""The seed articles' scenarios on the real vLLM: server flags plus the load that provokes them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.vllm_harness.server import ServerSpec
from vtop.core.bench import BenchConfig, Lengths

WINDOW = 15.0
LIGHT = ServerSpec(max_num_seqs=16)
STORM = ServerSpec(num_gpu_blocks_override=8, block_size=128, max_num_seqs=16)
SEQ_LIMITED = ServerSpec(max_num_seqs=2)
NO_PREFIX_CACHE = ServerSpec(prefix_caching=False)
SMALL_BUDGET = ServerSpec(max_num_seqs=16, max_num_batched_tokens=64)


LOAD_OUTLASTS_WINDOW_S = 12.0
"""The load starts 4 s before the diagnosis window and must still run at its last scrape, which
on a busy 2-core CPU server can take 3 s to answer."""


def load(url: str, concurrency: int, prompt: int, output: int, **extra: Any) -> BenchConfig:
    """Closed-loop load that outlasts a diagnosis window."""
    return BenchConfig(
        url=url,
        concurrency=concurrency,
        num_requests=None,
        duration_s=WINDOW + LOAD_OUTLASTS_WINDOW_S,
        prompt_tokens=Lengths(prompt, prompt),
        output_tokens=Lengths(output, output),
        stall_timeout_s=180,
        **extra,
    )


def warm_up(url: str, max_num_seqs: int) -> BenchConfig:
    """A short burst that makes a fresh CPU server compile its batch shapes (about a minute)."""
    return BenchConfig(
        url=url,
        concurrency=max_num_seqs,
        num_requests=2 * max_num_seqs,
        prompt_tokens=Lengths(32, 32),
        output_tokens=Lengths(16, 16),
        stream=False,
    )


@dataclass(frozen=True)
class Scenario:
    """A named server configuration and the load to run against it."""

    name: str
    spec: ServerSpec
    load: Callable[[str], BenchConfig]
    expected: str


SCENARIOS = (
    Scenario("healthy light load", LIGHT, lambda u: load(u, 2, 32, 32, stream=False), "no warning"),
    Scenario("preemption storm", STORM, lambda u: load(u, 24, 96, 300), "M1, lower --max-num-seqs"),
    Scenario(
        "shared prefix < 1 block",
        STORM,
        lambda u: load(u, 2, 128, 16, shared_prefix_tokens=96, stream=False),
        "K1-block, no 'enable caching'",
    ),
    Scenario(
        "max-num-seqs 2", SEQ_LIMITED, lambda u: load(u, 16, 32, 64, stream=False), "Q2, raise it"
    ),
    Scenario(
        "prefix caching off",
        NO_PREFIX_CACHE,
        lambda u: load(u, 2, 160, 16, shared_prefix_tokens=128, stream=False),
        "K1-off, enable it",
    ),
    Scenario(
        "token budget 64",
        SMALL_BUDGET,
        lambda u: load(u, 16, 400, 8, stream=False),
        "Q3, raise --max-num-batched-tokens",
    ),
)
