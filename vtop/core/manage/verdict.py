"""Measure a server over a window, and judge a before/after measurement against a finding."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from vtop.core.rules.engine import Finding
from vtop.core.store.store import Store
from vtop.core.store.summary import summarize


@dataclass(frozen=True)
class Measurement:
    """What a change is judged on, over one window."""

    preemptions_per_s: float | None
    waiting: float | None
    kv_usage: float | None
    ttft_p99_s: float | None
    generation_tokens_per_s: float | None
    errors: int = 0
    noise: dict[str, float] = field(default_factory=dict)
    """Standard error of each figure, from its spread across segments of the window."""


@dataclass(frozen=True)
class Target:
    """The figure a finding's fix must improve, and which way."""

    metric: str
    lower_is_better: bool


TARGETS = {
    "memory": Target("preemptions_per_s", True),
    "queue": Target("waiting", True),
    "latency": Target("ttft_p99_s", True),
    "compute": Target("generation_tokens_per_s", False),
}
DEFAULT_TARGET = Target("ttft_p99_s", True)
MIN_IMPROVEMENT = 0.05
"""The target figure must move at least this share..."""
NOISE_FACTOR = 2.0
"""...and by more than this many standard errors of the difference (noise is not an effect)."""
SEGMENT_S = 5.0
"""Length of the window segments whose spread estimates the noise."""
JUDGED = ("preemptions_per_s", "waiting", "ttft_p99_s", "generation_tokens_per_s")
THROUGHPUT_TOLERANCE = 0.10
"""A fix may cost at most this share of output tokens/s and still be kept."""


def measure(store: Store, target: str, now: float, window: float, errors: int = 0) -> Measurement:
    """The judged figures over a window of the store, with their noise across segments."""
    figures = _figures(store, target, now, window)
    return Measurement(
        figures["preemptions_per_s"],
        figures["waiting"],
        figures["kv_usage"],
        figures["ttft_p99_s"],
        figures["generation_tokens_per_s"],
        errors,
        _noise(store, target, now, window),
    )


def _figures(store: Store, target: str, now: float, window: float) -> dict[str, float | None]:
    """Rates and gauge averages over one window (gauges averaged, KV as the fullest engine)."""
    summary = summarize(store, target, now, window)
    only = {"instance": target}
    waiting = store.sum_by(store.avg_over_time, "vllm:num_requests_waiting", now, window, only)
    queued = store.sum_by(store.rate, "vllm:request_queue_time_seconds_sum", now, window, only)
    kv = store.sum_by(
        store.avg_over_time, "vllm:kv_cache_usage_perc", now, window, only, ["engine"]
    )
    return {
        "preemptions_per_s": summary.preemptions_per_s,
        "waiting": _larger(waiting.get(()), queued.get(())),
        "kv_usage": max(kv.values(), default=None),
        "ttft_p99_s": summary.ttft_p99_s,
        "generation_tokens_per_s": summary.generation_tokens_per_s,
    }


def _larger(gauge: float | None, little: float | None) -> float | None:
    """Average waiting: the gauge's average or, by Little's law, queue seconds per second,
    whichever is larger (the gauge can read 0 between engine steps while a queue persists)."""
    known = [value for value in (gauge, little) if value is not None]
    return max(known) if known else None


def _noise(store: Store, target: str, now: float, window: float) -> dict[str, float]:
    """Standard error of each judged figure: its spread over SEGMENT_S-long segments."""
    count = int(window // SEGMENT_S)
    if count < 3:
        return {}
    length = window / count
    segments = [_figures(store, target, now - i * length, length) for i in range(count)]
    noise: dict[str, float] = {}
    for name in JUDGED:
        values = [v for v in (segment[name] for segment in segments) if v is not None]
        if len(values) >= 3:
            noise[name] = statistics.stdev(values) / math.sqrt(len(values))
    return noise


@dataclass(frozen=True)
class Verdict:
    """Whether a change helped, on its target metric, without a cost elsewhere."""

    improved: bool
    reason: str


def judge(finding: Finding, before: Measurement, after: Measurement) -> Verdict:
    """Better on the finding's target metric, no new errors, no large loss of output tok/s."""
    target = TARGETS.get(finding.rule.phase, DEFAULT_TARGET)
    old, new = getattr(before, target.metric), getattr(after, target.metric)
    if after.errors > before.errors:
        return Verdict(False, f"errors rose from {before.errors} to {after.errors}")
    lost = _throughput_loss(before, after)
    if lost is not None and lost > THROUGHPUT_TOLERANCE:
        return Verdict(
            False, f"output tok/s fell {lost:.0%} (more than {THROUGHPUT_TOLERANCE:.0%})"
        )
    if old is None or new is None:
        return Verdict(False, f"{target.metric} not measured before and after")
    gain = old - new if target.lower_is_better else new - old
    margin = _margin(before, after, target.metric)
    moved = f"{target.metric} {old:.3g} -> {new:.3g}"
    if new == old == 0 and target.lower_is_better:
        return Verdict(True, moved)
    if gain > abs(old) * MIN_IMPROVEMENT and gain > margin:
        return Verdict(True, moved)
    if gain > abs(old) * MIN_IMPROVEMENT:
        return Verdict(False, f"{moved} is within the noise (+/- {margin:.3g})")
    return Verdict(False, f"{target.metric} did not improve: {old:.3g} -> {new:.3g}")


def _margin(before: Measurement, after: Measurement, metric: str) -> float:
    """NOISE_FACTOR standard errors of the before/after difference (0 when unmeasured)."""
    spread = math.hypot(before.noise.get(metric, 0.0), after.noise.get(metric, 0.0))
    return NOISE_FACTOR * spread


def _throughput_loss(before: Measurement, after: Measurement) -> float | None:
    """The fraction of output tokens/s lost (negative when it rose), None when unmeasured."""
    old, new = before.generation_tokens_per_s, after.generation_tokens_per_s
    if old is None or new is None or old <= 0:
        return None
    return (old - new) / old


def comparison_lines(before: Measurement, after: Measurement) -> list[str]:
    """Side-by-side figures."""
    return measurement_table([("before", before), ("after", after)])


def measurement_table(columns: list[tuple[str, Measurement]]) -> list[str]:
    """The judged figures, one column per named measurement."""
    rows: list[tuple[str, Callable[[Measurement], float | None], str]] = [
        ("preemptions/s", lambda m: m.preemptions_per_s, "{:.2f}"),
        ("waiting (avg)", lambda m: m.waiting, "{:.1f}"),
        ("KV usage", lambda m: m.kv_usage, "{:.0%}"),
        ("TTFT p99 s", lambda m: m.ttft_p99_s, "{:.2f}"),
        ("output tok/s", lambda m: m.generation_tokens_per_s, "{:.0f}"),
        ("errors", lambda m: float(m.errors), "{:.0f}"),
    ]
    lines = [f"{'':16}" + "".join(f"{name:>12}" for name, _ in columns)]
    for label, figure, pattern in rows:
        cells = "".join(f"{_cell(figure(m), pattern):>12}" for _, m in columns)
        lines.append(f"{label:16}{cells}")
    return lines


def _cell(value: float | None, pattern: str) -> str:
    """A figure or '-'."""
    return "-" if value is None else pattern.format(value)
