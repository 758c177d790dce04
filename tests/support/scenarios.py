"""Server flags of the seed articles' scenarios (their loads: tests/incidents.py)."""

from __future__ import annotations

import json

from tests.support.vllm_harness.server import ServerSpec
from vtop.core.manage.bench import BenchConfig, Lengths

LIGHT = ServerSpec(max_num_seqs=16, otlp_protocol="grpc")
"""Sixteen slots; its request spans go over OTLP/gRPC to a port a test may listen on."""
STORM = ServerSpec(num_gpu_blocks_override=8, block_size=128, max_num_seqs=16)
SEQ_LIMITED = ServerSpec(
    max_num_seqs=2,
    logits_processors="faulty_logits:FaultWhenAsked",
    otlp_protocol="http",
    in_flight=True,
)
"""Two sequence slots. It also loads the test's faulty logits processor, which does nothing
unless a request asks it to spin or raise (tests/e2e/test_e2e_stacks.py, the last to use this
server: one start serves the cap, the front door, the request spans and the stuck-or-dead
tests); its request spans go over OTLP/HTTP; vtop's in-flight middleware lists its requests
(the stuck request named by it)."""
SMALL_BUDGET = ServerSpec(
    max_num_seqs=16,
    max_num_batched_tokens=64,
    prefix_caching=False,
    max_model_len=1024,
    otlp_protocol="grpc",
)
"""A 64-token step budget with prefix caching off (as in the incident the URL-only triage once
got wrong: the budget must be the primary, not the disabled cache); a context long enough for
prompts that hold a step's budget for a dozen steps each; its request spans go over OTLP/gRPC
(the head-of-line test names the long prompts by them)."""
ADMISSION_LIMITED = ServerSpec(max_num_seqs=2, max_num_queued_reqs=4, lora_adapters=3)
"""vLLM's admission limit: beyond four requests in the system, HTTP 503. It also serves three
LoRA adapters with one slot (--max-loras 1), for the LoRA scenario: one start for both (the
base model's requests take no adapter slot)."""

SPEC_DECODE = ServerSpec(
    max_num_seqs=4,
    speculative_config=json.dumps(
        {
            "method": "ngram",
            "num_speculative_tokens": 4,
            "prompt_lookup_max": 3,
            "prompt_lookup_min": 1,
        }
    ),
)
"""Speculative decoding with vLLM's n-gram drafter (the CPU build runs it): on sampled text
of a random-weight model the drafts it finds in the prompt are almost never accepted."""


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
