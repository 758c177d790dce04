"""What a server's own metrics say about its engine and its traffic over a window, the model
fitted to them, and how well the model's replay of the current config reproduces them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vtop.core.config.inference import is_inferred
from vtop.core.config.server_config import ServerConfig
from vtop.core.rules.promql.evaluator import Context, EvaluationError, evaluate
from vtop.core.rules.promql.parser import parse
from vtop.core.store.store import Store
from vtop.core.whatif.scheduler import EngineConfig, Outcome, Workload
from vtop.core.whatif.step_time import StepFit, StepPoint

SLICE_S = 5.0
"""The step time is fitted over slices of this length (steps/s against requests and tokens
per step)."""
TOLERANCE = {"generation_tokens_per_s": 0.25, "ttft_p50_s": 0.25, "preemptions_per_s": 0.30}
"""How close the replay of the current config must come to the measurement to predict."""
NEAR_ZERO_PREEMPTIONS = 0.05
BUCKETED = frozenset({"ttft_p50_s", "ttft_p99_s"})
"""The figures the server measures through its TTFT histogram's buckets."""
UNBOUNDED_BUDGET = 1 << 30
"""The token budget when nothing says what it is: taken as not binding (said in the report)."""
UNBOUNDED_SEQS = 1 << 20
"""The sequence cap when nothing says what it is and nothing waited in the window: a cap that
never held a request back is taken as not binding (said in the report)."""
UNMODELLED: dict[str, tuple[str, ...]] = {
    "speculative decoding": ("sum(rate(vllm:spec_decode_num_draft_tokens_total[{w}s]))",),
    "LoRA adapters": ('count(vllm:lora_requests_info{running_lora_adapters!=""})',),
    "a KV connector (transfers or offload)": (
        "sum(rate(vllm:kv_offload_load_bytes_total[{w}s]))",
        "sum(rate(vllm:kv_offload_store_bytes_total[{w}s]))",
        "sum(rate(vllm:kv_offload_total_bytes_total[{w}s]))",
        "sum(rate(vllm:nixl_xfer_time_seconds_count[{w}s]))",
        "sum(rate(vllm:mooncake_store_operation_total[{w}s]))",
    ),
    "multimodal encoders": ("sum(rate(vllm:mm_cache_queries_total[{w}s]))",),
}
"""Mechanisms the model does not capture, each by the counters vLLM moves while it is active
(the offloading connector's load and store bytes, and the one total of both it exported before
splitting them; NIXL's transfers; Mooncake's store operations): a refusal, never a number."""


@dataclass(frozen=True)
class Measured:
    """The server's figures over the window (all engines together)."""

    running: float
    """Requests in the engine past their first scheduling (Little's law: preempted ones too)."""
    waiting: float
    preemptions_per_s: float
    generation_tokens_per_s: float
    prompt_tokens_per_s: float
    requests_per_s: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    prompt_tokens: float
    output_tokens: float
    steps_per_s: float
    tokens_per_step: float
    frontend_s: float = 0.0
    """Mean time to first token less the engine's queue and prefill time: the API server's."""
    scheduled_gauge: float = 0.0
    """The running gauge averaged over the window's scrapes."""
    inter_token_s: float = 0.0
    """Mean inter-token latency: the time of the steps a decoding request is in."""

    @property
    def scheduled(self) -> float:
        """Requests the scheduler runs per step: Little's law on the inference time, unless
        requests were preempted (it counts them while they wait again): then the gauge, which
        a scrape between a request's end and the next admission reads one low."""
        if self.preemptions_per_s > 0 and self.scheduled_gauge > 0:
            return min(self.running, self.scheduled_gauge)
        return self.running


@dataclass(frozen=True)
class Fit:
    """The model fitted to one server: its config, workload, step cost and the fit's error."""

    config: EngineConfig
    workload: Workload
    step: StepFit
    engines: int
    frontend_s: float = 0.0
    """Time to first token spent outside the engine (tokenising, the API server), measured."""
    inferred: tuple[str, ...] = ()
    """The scheduler settings the model uses as vtop inferred them (the report says so)."""
    cap_unbound_because: str = ""
    """Why an unknown sequence cap is taken as not binding ("" when the cap is known)."""


class CannotModelError(ValueError):
    """The window or the server is outside what the model captures; says why."""


def _value(store: Store, target: str, now: float, expr: str) -> float | None:
    """A one-element PromQL result, None when empty or not a number."""
    try:
        result = evaluate(parse(expr), Context(store, target, now))
    except EvaluationError:
        return None
    value = result if isinstance(result, float) else next(iter(result.values()), None)
    return None if value is None or math.isnan(value) or math.isinf(value) else value


def measure(store: Store, target: str, now: float, window_s: float) -> Measured:
    """The figures the model is calibrated on, from the server's own counters."""
    w = f"{max(int(window_s), 1)}"

    def rate(name: str) -> float:
        return _value(store, target, now, f"sum(rate({name}[{w}s]))") or 0.0

    def ratio(numerator: str, denominator: str) -> float:
        low = rate(denominator)
        return rate(numerator) / low if low > 0 else 0.0

    def mean(histogram: str) -> float:
        return ratio(f"{histogram}_sum", f"{histogram}_count")

    def ttft(q: float) -> float | None:
        by_le = f"sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[{w}s]))"
        return _value(store, target, now, f"histogram_quantile({q}, {by_le})")

    return Measured(
        running=rate("vllm:request_inference_time_seconds_sum"),
        waiting=rate("vllm:request_queue_time_seconds_sum"),
        preemptions_per_s=rate("vllm:num_preemptions_total"),
        generation_tokens_per_s=rate("vllm:generation_tokens_total"),
        prompt_tokens_per_s=rate("vllm:prompt_tokens_total"),
        requests_per_s=rate("vllm:request_success_total"),
        ttft_p50_s=ttft(0.5),
        ttft_p99_s=ttft(0.99),
        prompt_tokens=ratio("vllm:request_prompt_tokens_sum", "vllm:request_prompt_tokens_count"),
        output_tokens=ratio(
            "vllm:request_generation_tokens_sum", "vllm:request_generation_tokens_count"
        ),
        steps_per_s=rate("vllm:iteration_tokens_total_count"),
        tokens_per_step=ratio(
            "vllm:iteration_tokens_total_sum", "vllm:iteration_tokens_total_count"
        ),
        inter_token_s=mean("vllm:inter_token_latency_seconds"),
        scheduled_gauge=_value(
            store, target, now, f"sum(avg_over_time(vllm:num_requests_running[{w}s]))"
        )
        or 0.0,
        frontend_s=max(
            0.0,
            mean("vllm:time_to_first_token_seconds")
            - mean("vllm:request_queue_time_seconds")
            - mean("vllm:request_prefill_time_seconds"),
        ),
    )


def refusal(store: Store, target: str, now: float, window_s: float) -> str | None:
    """Why the model cannot speak for this server, or None."""
    seconds = str(max(int(window_s), 1))
    for mechanism, exprs in UNMODELLED.items():
        for expr in exprs:
            value = _value(store, target, now, expr.replace("{w}", seconds))
            if value is not None and value > 0:
                return f"{mechanism} is active, and the model does not capture it"
    return None


def step_points(
    store: Store,
    target: str,
    now: float,
    window_s: float,
    engines: int,
    kv_tokens: float | None = None,
) -> list[StepPoint]:
    """The window's 5 s slices with the engine busy. An engine with a queue steps back to
    back, so its step time is 1 / its steps per second; a lightly loaded one idles between
    steps, so there the inter-token latency (the steps a running request sees) is the step
    time. Per engine; each slice's context is the KV cache's mean usage times `kv_tokens`, one
    engine's KV capacity (unknown without it)."""
    busy = []
    for index in range(max(1, int(window_s // SLICE_S))):
        end = now - index * SLICE_S
        figures = measure(store, target, end, SLICE_S)
        requests = figures.scheduled / max(engines, 1)
        if figures.steps_per_s <= 0 or figures.tokens_per_step <= 0 or requests < 0.5:
            continue
        queued = figures.waiting / max(engines, 1) >= 0.5
        seconds = engines / figures.steps_per_s
        if not queued and figures.inter_token_s > 0:
            seconds = min(seconds, figures.inter_token_s)
        context = _context(store, target, end, kv_tokens)
        busy.append(StepPoint(requests, figures.tokens_per_step, seconds, context))
    if not busy:
        raise CannotModelError(
            "no engine steps in the window (no traffic, or no iteration metrics)"
        )
    return busy


def _context(store: Store, target: str, end: float, kv_tokens: float | None) -> float | None:
    """The tokens of context one engine held over the slice ending at `end`: the KV cache's
    mean usage (over engines and the slice's scrapes) times one engine's capacity."""
    if not kv_tokens:
        return None
    expr = f"avg(avg_over_time(vllm:kv_cache_usage_perc[{SLICE_S:.0f}s]))"
    usage = _value(store, target, end, expr)
    return None if usage is None else max(usage, 0.0) * kv_tokens


def kv_tokens_per_engine(config: ServerConfig, engines: int) -> float | None:
    """One engine's KV capacity in tokens, None when unknown."""
    capacity = config.number("kv_capacity_tokens")
    return None if capacity is None else capacity / max(engines, 1)


def engine_config(
    config: ServerConfig, engines: int, waiting: float = 0.0, held_by: str = ""
) -> EngineConfig:
    """The scheduler settings of one engine, from the server's effective config. An unknown
    token budget is taken as not binding, and so is an unknown sequence cap while nothing
    waits (`waiting`: the window's mean, all engines) or while the window shows another limit
    holding the queue (`held_by`: the KV pool full or preempting, steps at the token budget):
    a cap that never held a request back cannot be what the model must reproduce. With a queue
    nothing else explains, an unknown cap is a refusal."""
    needed = ("kv_capacity_tokens", "block_size")
    missing = [name for name in needed if config.number(name) is None]
    seqs = config.number("max_num_seqs")
    if seqs is None and waiting / max(engines, 1) >= 0.5 and not held_by:
        missing.insert(0, "max_num_seqs (requests waited, so the cap may be what held them)")
    if missing:
        raise CannotModelError(
            f"unknown: {', '.join(missing)} (give --vllm-args or --vllm-log, or let the server "
            "report cache_config_info)"
        )
    block = int(config.number("block_size") or 16)
    capacity = kv_tokens_per_engine(config, engines) or 0.0
    return EngineConfig(
        max_num_seqs=UNBOUNDED_SEQS if seqs is None else int(seqs),
        max_num_batched_tokens=int(config.number("max_num_batched_tokens") or UNBOUNDED_BUDGET),
        num_blocks=max(int(capacity // block) - 1, 1),
        block_size=block,
    )


KV_FULL = 0.9
"""The KV cache this full holds the queue (as rule Q1 reads it)."""
AT_BUDGET = 0.9
"""Steps this close to the token budget are held by it (as rule Q3 reads it)."""


def queue_held_by(
    store: Store, target: str, now: float, window_s: float, measured: Measured, config: ServerConfig
) -> str:
    """Which limit other than the sequence cap the window shows holding its queue ("" for
    none): requests preempted or the KV cache full, or steps at the token budget."""
    if measured.waiting < 0.5:
        return ""
    if measured.preemptions_per_s > 0:
        return "requests were preempted, so the KV pool held the queue"
    peak = _value(
        store, target, now, f"max(max_over_time(vllm:kv_cache_usage_perc[{window_s:.0f}s]))"
    )
    if peak is not None and peak >= KV_FULL:
        return f"the KV cache reached {peak:.0%}, which held the queue"
    budget = config.number("max_num_batched_tokens")
    if budget and measured.tokens_per_step >= AT_BUDGET * budget:
        carried = f"{measured.tokens_per_step:.0f} tokens at the {budget:.0f}-token budget"
        return f"steps carried {carried}, which held the queue"
    return ""


def inferred_settings(config: ServerConfig) -> tuple[str, ...]:
    """The scheduler settings whose value vtop inferred from the metrics."""
    names = ("max_num_seqs", "max_num_batched_tokens")
    return tuple(n for n in names if (s := config.settings.get(n)) is not None and is_inferred(s))


def workload_of(measured: Measured, engines: int, max_num_seqs: int) -> Workload:
    """A closed loop of the requests in the system when a queue forms or the batch is full;
    otherwise an open loop at the completion rate."""
    if measured.prompt_tokens <= 0 or measured.output_tokens <= 0:
        raise CannotModelError("no finished requests in the window: request lengths are unknown")
    in_system = (measured.running + measured.waiting) / max(engines, 1)
    queued = measured.waiting / max(engines, 1) >= 0.5 or in_system >= 0.9 * max_num_seqs
    if queued:
        return Workload(measured.prompt_tokens, measured.output_tokens, clients=round(in_system))
    return Workload(
        measured.prompt_tokens,
        measured.output_tokens,
        arrivals_per_s=measured.requests_per_s / max(engines, 1),
    )


def figures(outcome: Outcome, engines: int) -> dict[str, float | None]:
    """The simulated figures for the whole server (engines are independent pools)."""
    return {
        "running": outcome.running * engines,
        "waiting": outcome.waiting * engines,
        "preemptions_per_s": outcome.preemptions_per_s * engines,
        "generation_tokens_per_s": outcome.generation_tokens_per_s * engines,
        "ttft_p50_s": outcome.ttft_quantile(0.5),
        "ttft_p99_s": outcome.ttft_quantile(0.99),
        "kv_tokens": outcome.kv_tokens * engines,
    }


def measured_figures(measured: Measured) -> dict[str, float | None]:
    """The measured counterparts of `figures`."""
    return {
        "running": measured.scheduled,
        "waiting": measured.waiting,
        "preemptions_per_s": measured.preemptions_per_s,
        "generation_tokens_per_s": measured.generation_tokens_per_s,
        "ttft_p50_s": measured.ttft_p50_s,
        "ttft_p99_s": measured.ttft_p99_s,
    }


def misses(
    measured: Mapping[str, float | None],
    replay: Mapping[str, float | None],
    exact: Mapping[str, float | None] | None = None,
    bounds: Sequence[float] = (),
) -> list[str]:
    """The figures the replay of the current config does not reproduce within tolerance. A
    TTFT quantile read from the server's buckets is known only to lie in its bucket (a median
    of 0.87 s interpolated in 0.75-1 s), so the replay's own quantile (`exact`, before it is
    read through the buckets) is judged against that bucket widened by the tolerance: read
    through the buckets too, 1.05 s would land in 1-2.5 s and read 1.75 s, a miss of 2x where
    the model is 5% past what the server can tell apart."""
    found = []
    for name, tolerance in TOLERANCE.items():
        real, modelled = measured.get(name), replay.get(name)
        if real is None or modelled is None:
            continue
        if name == "preemptions_per_s" and max(real, modelled) < NEAR_ZERO_PREEMPTIONS:
            continue
        unbucketed = (exact or {}).get(name) if name in BUCKETED else None
        if unbucketed is not None and bounds:
            low, high = bucket_of(real, bounds)
            if low * (1 - tolerance) <= unbucketed <= high * (1 + tolerance):
                continue
            found.append(
                f"{name} {unbucketed:.3g} vs measured {real:.3g} (its bucket {low:g}-{high:g} s)"
            )
            continue
        if abs(modelled - real) > tolerance * max(abs(real), 1e-9):
            found.append(f"{name} {modelled:.3g} vs measured {real:.3g}")
    return found


def bucket_of(value: float, bounds: Sequence[float]) -> tuple[float, float]:
    """The bucket a quantile interpolated from these finite bounds lies in: the largest bound
    below it (0 for none) and the smallest above or at it; infinite from the last bound on
    (histogram_quantile gives the last bound for a quantile in the +Inf bucket)."""
    low = max((b for b in bounds if b < value), default=0.0)
    if not bounds or value >= max(bounds):
        return low, math.inf
    return low, min(b for b in bounds if b >= value)
