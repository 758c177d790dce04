"""Local /metrics servers for fleet tests: a preemption storm whose counters grow with time
(queue time included, so queue rules see it), and an idle server of the same model."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler

from tests.support.http_server import QuietHandler
from tests.support.storm import CACHE_LABELS, STORM_TICK, engine_tick

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


HEALTHY = engine_tick(waiting=0, running=2, kv=0.3, reason="stop") + QUEUE_LINES
"""A server of the same model with room to spare: two requests running, none waiting, a
third of its KV cache used, tokens flowing."""


def healthy_body(t: float, cache_labels: str = CACHE_LABELS) -> bytes:
    """A healthy server's exposition `t` seconds after it started."""
    values = {"p": 0, "g": 200 * t, "gs": 200 * t, "n": 2 * t, "ps": 100 * t, "q": 0.002 * t}
    return HEALTHY.format(cache_labels=cache_labels, **values).encode()
