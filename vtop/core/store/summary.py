"""Headline figures of one target over a window, computed from the store."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vtop.core.histogram import Buckets, merge_buckets
from vtop.core.histogram import quantile as histogram_quantile
from vtop.core.store.store import Store

TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
E2E = "vllm:e2e_request_latency_seconds"
FINISHED = "vllm:request_success_total"
QUEUE = "vllm:request_queue_time_seconds"
PREFILL = "vllm:request_prefill_time_seconds"
PREFIX_HITS = "vllm:prefix_cache_hits_total"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREEMPTIONS = "vllm:num_preemptions_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"
WINDOW_NAMES = frozenset(
    {
        *(f"{histogram}_bucket" for histogram in (TTFT, ITL, E2E)),
        *(f"{histogram}{part}" for histogram in (QUEUE, PREFILL) for part in ("_sum", "_count")),
        *(FINISHED, PREFIX_HITS, PREFIX_QUERIES, PREEMPTIONS, PROMPT_TOKENS, GENERATION_TOKENS),
        *(RUNNING, WAITING, KV_USAGE),
    }
)
"""Every name a summary reads over its window, and the gauges a report states over it: a
diagnosis reads them over all a watching session holds, so its store holds them that long."""


@dataclass(frozen=True, slots=True)
class TargetSummary:
    """What an operator reads first; None means unknown, never zero."""

    target: str
    running: float | None
    waiting: float | None
    kv_usage: float | None
    preemptions_per_s: float | None
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None = None
    itl_p99_s: float | None = None
    queue_mean_s: float | None = None
    prefill_mean_s: float | None = None
    prefix_hit_rate: float | None = None
    requests_per_s: float | None = None
    """Requests finished per second, every finish reason."""
    e2e_p50_s: float | None = None
    e2e_p99_s: float | None = None
    finish_shares: tuple[tuple[str, float], ...] = ()
    """(finish reason, its share of the requests finished in the window), largest first."""

    def finished_per_s(self, reason: str) -> float | None:
        """Requests per second that ended for `reason` (None: no finished count)."""
        if self.requests_per_s is None:
            return None
        return self.requests_per_s * dict(self.finish_shares).get(reason, 0.0)

    @property
    def stop_per_s(self) -> float | None:
        """Finished at a stop condition (EOS, a stop string)."""
        return self.finished_per_s("stop")

    @property
    def length_per_s(self) -> float | None:
        """Cut at max_tokens or the model's context."""
        return self.finished_per_s("length")

    @property
    def abort_per_s(self) -> float | None:
        """Aborted (the client went away, or a timeout)."""
        return self.finished_per_s("abort")

    @property
    def error_per_s(self) -> float | None:
        """Ended in an error inside the engine."""
        return self.finished_per_s("error")


def unknown_summary(target: str) -> TargetSummary:
    """A summary with every figure unknown (None, never zero)."""
    return TargetSummary(
        target,
        running=None,
        waiting=None,
        kv_usage=None,
        preemptions_per_s=None,
        prompt_tokens_per_s=None,
        generation_tokens_per_s=None,
        ttft_p50_s=None,
        ttft_p99_s=None,
    )


def _one(values: Mapping[tuple[tuple[str, str], ...], float | None]) -> float | None:
    """The single merged value of a by=() aggregation."""
    return values.get(())


def summarize(
    store: Store, target: str, now: float, window: float, only: Mapping[str, str] | None = None
) -> TargetSummary:
    """Headline figures of the series `only` selects (default: one target, engines merged).

    Histograms are merged by adding buckets, so a fleet's or an engine's quantiles are exact
    to the bucket, never an average of quantiles.
    """
    return summarize_with_ttft(store, target, now, window, only)[0]


def summarize_with_ttft(
    store: Store, target: str, now: float, window: float, only: Mapping[str, str] | None = None
) -> tuple[TargetSummary, Buckets | None]:
    """`summarize`, and the TTFT buckets' increases its quantiles came from (None without
    them): a fleet's TTFT adds its servers' buckets."""
    only = {"instance": target} if only is None else only

    def rate(name: str) -> float | None:
        return _one(store.sum_by(store.rate, name, now, window, only))

    def mean(name: str) -> float | None:
        return _one(store.histogram_mean(name, now, window, only))

    def median_and_p99(buckets: Buckets | None) -> tuple[float | None, float | None]:
        """Both quantiles from one read of the buckets (the costly part of a summary)."""
        if buckets is None:
            return None, None
        return histogram_quantile(0.5, buckets), histogram_quantile(0.99, buckets)

    def buckets_of(name: str) -> Buckets | None:
        return store.histogram_buckets(name, now, window, only).get(())

    finished_per_s, shares = _finished(store, now, window, only)
    ttft_buckets = buckets_of(TTFT)
    ttft_p50, ttft_p99 = median_and_p99(ttft_buckets)
    itl_p50, itl_p99 = median_and_p99(buckets_of(ITL))
    e2e_p50, e2e_p99 = median_and_p99(buckets_of(E2E))
    summary = dataclasses.replace(
        quick_summary(store, target, now, window, None, only),
        ttft_p50_s=ttft_p50,
        ttft_p99_s=ttft_p99,
        itl_p50_s=itl_p50,
        itl_p99_s=itl_p99,
        queue_mean_s=mean(QUEUE),
        prefill_mean_s=mean(PREFILL),
        prefix_hit_rate=_ratio(rate(PREFIX_HITS), rate(PREFIX_QUERIES)),
        e2e_p50_s=e2e_p50,
        e2e_p99_s=e2e_p99,
        requests_per_s=finished_per_s,
        finish_shares=shares,
    )
    return summary, ttft_buckets


def _finished(
    store: Store, now: float, window: float, only: Mapping[str, str]
) -> tuple[float | None, tuple[tuple[str, float], ...]]:
    """Requests finished per second, and each finish reason's share of them (largest first)."""
    by_reason = store.sum_by(store.rate, FINISHED, now, window, only, ("finished_reason",))
    if not by_reason:
        return None, ()
    total = sum(by_reason.values())
    if total <= 0:
        return total, ()
    shares = [
        (dict(labels).get("finished_reason", "unknown"), value / total)
        for labels, value in by_reason.items()
    ]
    return total, tuple(sorted(shares, key=lambda pair: -pair[1]))


def quick_summary(
    store: Store,
    target: str,
    now: float,
    window: float,
    previous: TargetSummary | None,
    only: Mapping[str, str] | None = None,
) -> TargetSummary:
    """Gauges and rates now; latency figures (histograms, the costly part) as last computed.

    Used alone for servers off screen in a large fleet, whose full figures refresh in turn.
    """
    only = {"instance": target} if only is None else only

    def rate(name: str) -> float | None:
        return _one(store.sum_by(store.rate, name, now, window, only))

    kv_now = [store.latest(s, now) for s in store.select(KV_USAGE, only)]
    present = [v for v in kv_now if v is not None]
    base = previous or unknown_summary(target)
    return dataclasses.replace(
        base,
        target=target,
        running=_one(store.latest_by(RUNNING, now, only)),
        waiting=_one(store.latest_by(WAITING, now, only)),
        kv_usage=max(present) if present else None,
        preemptions_per_s=rate(PREEMPTIONS),
        prompt_tokens_per_s=rate(PROMPT_TOKENS),
        generation_tokens_per_s=rate(GENERATION_TOKENS),
    )


def merged_ttft(parts: Iterable[Buckets | None]) -> tuple[float | None, float | None]:
    """TTFT p50 and p99 over servers, their buckets added before the quantiles (servers
    without any left out)."""
    kept = [buckets for buckets in parts if buckets]
    if not kept:
        return None, None
    merged = merge_buckets(kept)
    return histogram_quantile(0.5, merged), histogram_quantile(0.99, merged)


def merged_latency(store: Store, now: float, window: float) -> TargetSummary:
    """TTFT over every server, buckets added before the quantiles (for the fleet line; the only
    part of the fleet figures that reads every server's histogram)."""
    merged = store.histogram_buckets(TTFT, now, window, {}).get(())
    unknown = unknown_summary("fleet")
    if merged is None:
        return unknown
    return dataclasses.replace(
        unknown,
        ttft_p50_s=histogram_quantile(0.5, merged),
        ttft_p99_s=histogram_quantile(0.99, merged),
    )


def _ratio(part: float | None, whole: float | None) -> float | None:
    """part / whole, None when either is unknown or nothing was counted."""
    if part is None or whole is None or whole <= 0:
        return None
    return part / whole


def _fmt(value: float | None, pattern: str) -> str:
    """Format a figure, '-' when unknown."""
    return "-" if value is None else pattern.format(value)


def format_summary(summary: TargetSummary) -> str:
    """One line for the plain-text monitor and logs."""
    kv = None if summary.kv_usage is None else summary.kv_usage * 100
    return (
        f"run {_fmt(summary.running, '{:.0f}')} wait {_fmt(summary.waiting, '{:.0f}')} "
        f"kv {_fmt(kv, '{:.1f}')}% preempt/s {_fmt(summary.preemptions_per_s, '{:.2f}')} "
        f"gen tok/s {_fmt(summary.generation_tokens_per_s, '{:.0f}')} "
        f"ttft p50/p99 {_fmt(summary.ttft_p50_s, '{:.3f}')}/{_fmt(summary.ttft_p99_s, '{:.3f}')}s"
        f" e2e p50/p99 {_fmt(summary.e2e_p50_s, '{:.2f}')}/{_fmt(summary.e2e_p99_s, '{:.2f}')}s"
        f" req/s {_fmt(summary.requests_per_s, '{:.2f}')}{finish_text(summary)}"
    )


def finish_text(summary: TargetSummary) -> str:
    """` finished stop 88% length 12%`: how the window's requests ended (nothing when none did)."""
    shown = [f"{reason} {share:.0%}" for reason, share in summary.finish_shares if share > 0]
    return " finished " + " ".join(shown) if shown else ""
