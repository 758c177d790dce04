"""What a load run measured: each request's result, and percentiles over the run."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestResult:
    """One request as the client saw it."""

    ok: bool
    error: str = ""
    ttft_s: float | None = None
    e2e_s: float = 0.0
    output_tokens: int = 0
    prompt_tokens: int = 0
    chunk_gaps_s: list[float] = field(default_factory=list)

    @property
    def tpot_s(self) -> float | None:
        """Mean time per output token after the first."""
        if self.ttft_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass(frozen=True)
class Percentiles:
    """p50/p95/p99 and mean of one latency, None with no data."""

    p50: float | None
    p95: float | None
    p99: float | None
    mean: float | None

    @staticmethod
    def of(values: list[float]) -> Percentiles:
        """Nearest-rank-with-interpolation percentiles of `values`."""
        if not values:
            return Percentiles(None, None, None, None)
        ordered = sorted(values)
        return Percentiles(
            _percentile(ordered, 50),
            _percentile(ordered, 95),
            _percentile(ordered, 99),
            math.fsum(ordered) / len(ordered),
        )


def _percentile(ordered: list[float], pct: float) -> float:
    """Linear-interpolated percentile of sorted values."""
    position = (len(ordered) - 1) * pct / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class BenchReport:
    """The outcome of a run."""

    completed: int
    failed: int
    timeouts: int
    stalls: int
    duration_s: float
    qps: float
    output_tokens_per_s: float
    total_output_tokens: int
    ttft: Percentiles
    tpot: Percentiles
    itl: Percentiles
    e2e: Percentiles
    errors: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out: dict[str, Any] = dict(self.__dict__)
        for key in ("ttft", "tpot", "itl", "e2e"):
            out[key] = dict(getattr(self, key).__dict__)
        return out


def summarize(results: list[RequestResult], duration_s: float) -> BenchReport:
    """Aggregate request results over the run's wall-clock duration."""
    good = [r for r in results if r.ok]
    errors: dict[str, int] = {}
    for result in results:
        if not result.ok:
            errors[result.error] = errors.get(result.error, 0) + 1
    tokens = sum(r.output_tokens for r in good)
    return BenchReport(
        completed=len(good),
        failed=len(results) - len(good),
        timeouts=sum(1 for r in results if r.error == "timeout"),
        stalls=sum(1 for r in results if r.error == "stalled stream"),
        duration_s=duration_s,
        qps=len(good) / duration_s if duration_s > 0 else 0.0,
        output_tokens_per_s=tokens / duration_s if duration_s > 0 else 0.0,
        total_output_tokens=tokens,
        ttft=Percentiles.of([r.ttft_s for r in good if r.ttft_s is not None]),
        tpot=Percentiles.of([t for r in good if (t := r.tpot_s) is not None]),
        itl=Percentiles.of([gap for r in good for gap in r.chunk_gaps_s]),
        e2e=Percentiles.of([r.e2e_s for r in good]),
        errors=errors,
    )
