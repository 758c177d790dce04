"""Feeding a store in the store's tests: the series and frames they share."""

from __future__ import annotations

import itertools

from tests.support.frames import (
    TARGET,
    frame,
)
from vtop.core.frame import Series
from vtop.core.store.store import Store

COUNTER = {"vllm:num_preemptions_total": "counter"}


GAUGE = {"vllm:num_requests_waiting": "gauge"}


def preemptions(engine: str = "0") -> Series:
    return Series("vllm:num_preemptions_total", (("engine", engine), ("instance", TARGET)))


def feed_counter(store: Store, values: list[float], start: float = 0.0, step: float = 1.0) -> None:
    for index, value in enumerate(values):
        store.ingest(
            frame(start + index * step, COUNTER, {'vllm:num_preemptions_total{engine="0"}': value})
        )


def reference_increase(values: list[float]) -> float:
    """Prometheus counter semantics: a drop means the counter restarted from zero."""
    total = 0.0
    for previous, current in itertools.pairwise(values):
        total += current - previous if current >= previous else current
    return total


def ttft_text(counts: dict[str, float], engine: str) -> str:
    lines = ["# TYPE vllm:time_to_first_token_seconds histogram"]
    for le, count in counts.items():
        lines.append(
            f'vllm:time_to_first_token_seconds_bucket{{engine="{engine}",le="{le}"}} {count}'
        )
    total = counts["+Inf"]
    lines.append(f'vllm:time_to_first_token_seconds_count{{engine="{engine}"}} {total}')
    lines.append(f'vllm:time_to_first_token_seconds_sum{{engine="{engine}"}} {total * 0.3}')
    return "\n".join(lines)
