"""A preemption storm as exposition text, frame by frame (for store, rule and session tests)."""

from __future__ import annotations

from tests.support.frames import frame_from_text
from vtop.core.frame import Frame

ENGINE_TICK = """# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} <waiting>
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} <running>
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} <kv>
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{engine="0",model_name="m"}} {p}
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="m"}} {g}
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="<reason>",model_name="m"}} {n}
# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_sum{{engine="0",model_name="m"}} {ps}
vllm:request_prompt_tokens_count{{engine="0",model_name="m"}} {n}
# TYPE vllm:request_generation_tokens histogram
vllm:request_generation_tokens_sum{{engine="0",model_name="m"}} {gs}
vllm:request_generation_tokens_count{{engine="0",model_name="m"}} {n}
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{{cache_labels}}} 1.0
"""
"""One engine's exposition: its gauges (<waiting>, <running>, <kv>) and finish reason given by
`engine_tick`, its counters ({p} preemptions, {g} generated, {n} requests, {ps} and {gs} their
prompt and output tokens) by `str.format`."""


def engine_tick(waiting: float, running: float, kv: float, reason: str) -> str:
    """ENGINE_TICK with its gauges and finish reason set (the counters still to format)."""
    text = ENGINE_TICK.replace("<waiting>", f"{waiting:g}").replace("<running>", f"{running:g}")
    return text.replace("<kv>", repr(float(kv))).replace("<reason>", reason)


STORM_TICK = engine_tick(waiting=10, running=4, kv=1.0, reason="length")
"""A preemption storm: ten waiting, four running, the KV cache full."""
CACHE_LABELS = (
    'block_size="128",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.92",'
    'kv_cache_size_tokens="1024",num_gpu_blocks="8"'
)


def storm_frames(seconds: int = 16) -> list[Frame]:
    return [
        frame_from_text(
            float(t),
            STORM_TICK.format(
                p=3 * t, g=300 * t, n=t, ps=96 * t, gs=300 * t, cache_labels=CACHE_LABELS
            ),
        )
        for t in range(seconds)
    ]


def storm(t: int, start: int = 0) -> Frame:
    """A preemption-storm scrape at second t (counters since `start`)."""
    n = t - start
    text = STORM_TICK.format(
        p=3 * n, g=300 * n, n=n, ps=96 * n, gs=300 * n, cache_labels=CACHE_LABELS
    )
    return frame_from_text(float(t), text)
