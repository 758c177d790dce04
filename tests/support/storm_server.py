"""Local /metrics servers for fleet tests: a preemption storm whose counters grow with time
(queue time included, so queue rules see it), and an idle server of the same model."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler

from tests.support.http_server import QuietHandler
from tests.support.storm import CACHE_LABELS, STORM_TICK

QUEUE_LINES = """# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{{engine="0",model_name="m"}} {q}
vllm:request_queue_time_seconds_count{{engine="0",model_name="m"}} {n}
"""
IDLE = """# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 500
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} 0
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} 5
"""


def storm_handler(started: float) -> type[BaseHTTPRequestHandler]:
    """/metrics of a server in a preemption storm, counters growing with time."""

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            t = time.time() - started + 1
            values = {"p": 3 * t, "g": 300 * t, "n": t, "ps": 96 * t, "gs": 300 * t, "q": 8 * t}
            body = STORM_TICK.format(cache_labels=CACHE_LABELS, **values)
            self.reply(200, (body + QUEUE_LINES.format(**values)).encode())

    return Handler


HEALTHY = """# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} 0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} 2
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.3
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{engine="0",model_name="m"}} 0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="m"}} {g}
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="m"}} {ps}
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="m"}} {n}
# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_sum{{engine="0",model_name="m"}} {ps}
vllm:request_prompt_tokens_count{{engine="0",model_name="m"}} {n}
# TYPE vllm:request_generation_tokens histogram
vllm:request_generation_tokens_sum{{engine="0",model_name="m"}} {g}
vllm:request_generation_tokens_count{{engine="0",model_name="m"}} {n}
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{{engine="0",model_name="m"}} {q}
vllm:request_queue_time_seconds_count{{engine="0",model_name="m"}} {n}
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{{cache_labels}}} 1.0
"""
"""A server of the same model with room to spare: two requests running, none waiting, a
third of its KV cache used, tokens flowing."""


def healthy_handler(
    started: float, cache_labels: str = CACHE_LABELS
) -> type[BaseHTTPRequestHandler]:
    """/metrics of a healthy server of the storm's model, counters growing with time (its
    cache config's labels given: replicas of other settings)."""

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            t = time.time() - started + 1
            values = {"g": 200 * t, "n": 2 * t, "ps": 100 * t, "q": 0.002 * t}
            self.reply(200, HEALTHY.format(cache_labels=cache_labels, **values).encode())

    return Handler
