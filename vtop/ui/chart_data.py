"""What each chart plots, and its points relative to now (pure, no Textual)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from vtop.core.frame import EventKind
from vtop.core.session.history import ChartHistory
from vtop.core.session.session import Mark

CHART_MARKS = frozenset(
    {
        EventKind.RESTART,
        EventKind.COUNTER_RESET,
        EventKind.APPLIED,
        EventKind.PREEMPTIONS,
        EventKind.KV,
        EventKind.ROLLBACK,
    }
)


@dataclass(frozen=True)
class LineSpec:
    """One plotted summary field."""

    label: str
    field: str
    scale: float = 1.0


@dataclass(frozen=True)
class ChartSpec:
    """One chart panel."""

    panel: str
    title: str
    lines: tuple[LineSpec, ...]
    y_max: float | None = None
    limit: str | None = None
    """Config setting drawn as a horizontal line (e.g. max_num_seqs)."""


CHARTS = (
    ChartSpec(
        "requests",
        "Requests",
        (LineSpec("running", "running"), LineSpec("waiting", "waiting")),
        limit="max_num_seqs",
    ),
    ChartSpec("kv", "KV cache %", (LineSpec("used", "kv_usage", 100),), y_max=100),
    ChartSpec("preemptions", "Preemptions/s", (LineSpec("preempt/s", "preemptions_per_s"),)),
    ChartSpec(
        "ttft",
        "TTFT / E2E s",
        (
            LineSpec("p50", "ttft_p50_s"),
            LineSpec("p99", "ttft_p99_s"),
            LineSpec("E2E p50", "e2e_p50_s"),
            LineSpec("E2E p99", "e2e_p99_s"),
        ),
    ),
    ChartSpec(
        "throughput",
        "Tokens/s",
        (
            LineSpec("prompt", "prompt_tokens_per_s"),
            LineSpec("generation", "generation_tokens_per_s"),
        ),
    ),
    ChartSpec(
        "latency",
        "Latency s",
        (
            LineSpec("ITL p50", "itl_p50_s"),
            LineSpec("ITL p99", "itl_p99_s"),
            LineSpec("queue", "queue_mean_s"),
            LineSpec("prefill", "prefill_mean_s"),
        ),
    ),
    ChartSpec(
        "prefix_cache", "Prefix-cache hit %", (LineSpec("hit", "prefix_hit_rate", 100),), y_max=100
    ),
    ChartSpec(
        "finished",
        "Finished req/s",
        (
            LineSpec("stop", "stop_per_s"),
            LineSpec("length", "length_per_s"),
            LineSpec("abort", "abort_per_s"),
            LineSpec("error", "error_per_s"),
        ),
    ),
)


def line_points(
    history: ChartHistory, line: LineSpec, now: float, span: float
) -> tuple[list[float], list[float]]:
    """(seconds relative to now, value) for the known values within the span; a value no chart
    can hold (NaN, infinite, negative: every charted figure is a count, a rate or a time) is left
    out, never plotted (the endpoint's data-quality report names it)."""
    xs: list[float] = []
    ys: list[float] = []
    for timestamp, value in history.points(line.field, now - span, now):
        if 0 <= value < math.inf:
            xs.append(timestamp - now)
            ys.append(value * line.scale)
    return xs, ys


def mark_offsets(marks: Iterable[Mark], target: str, now: float, span: float) -> list[float]:
    """Where chart-worthy events fall, in seconds relative to now."""
    return [
        m.timestamp - now
        for m in marks
        if m.kind in CHART_MARKS and m.target == target and now - span <= m.timestamp <= now
    ]


def bucket_counts(cumulative: list[tuple[float, float]]) -> tuple[list[str], list[float]]:
    """Per-bucket counts and 'le' labels from cumulative histogram buckets (+Inf dropped if 0)."""
    labels: list[str] = []
    counts: list[float] = []
    below = 0.0
    for upper, count in cumulative:
        if upper == float("inf") and count - below <= 0:
            break
        labels.append("+Inf" if upper == float("inf") else f"{upper:g}")
        counts.append(max(0.0, count - below))
        below = count
    return labels, counts
