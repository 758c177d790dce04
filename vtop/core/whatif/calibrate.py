"""What a server's own metrics say about its engine and its traffic over a window, the model
fitted to them, and how well the model's replay of the current config reproduces them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vtop.core.config.server_config import ServerConfig
from vtop.core.rules.promql.evaluator import Context, EvaluationError, evaluate
from vtop.core.rules.promql.parser import parse
from vtop.core.store.store import Store
from vtop.core.whatif.scheduler import EngineConfig, Outcome, StepCost, Workload

SLICE_S = 5.0
"""The step time is fitted over slices of this length (steps/s against tokens/step)."""
SPREAD = 0.2
"""Tokens per step must vary by this much across slices to identify a cost per token..."""
IDENTIFIED = 0.8
"""...and the line must cut the constant's error by a fifth."""
TOLERANCE = {"generation_tokens_per_s": 0.25, "ttft_p50_s": 0.25, "preemptions_per_s": 0.30}
"""How close the replay of the current config must come to the measurement to predict."""
NEAR_ZERO_PREEMPTIONS = 0.05
UNBOUNDED_BUDGET = 1 << 30
"""The token budget when nothing says what it is: taken as not binding (said in the report)."""
UNMODELLED = {
    "speculative decoding": "sum(rate(vllm:spec_decode_num_draft_tokens_total[{w}s]))",
    "LoRA adapters": 'count(vllm:lora_requests_info{running_lora_adapters!=""})',
    "a KV connector (transfers or offload)": "sum(rate(vllm:kv_transfer_time_seconds_count[{w}s]))",
    "multimodal encoders": "sum(rate(vllm:mm_cache_queries_total[{w}s]))",
}
"""Mechanisms the model does not capture: a refusal, never a number, where they are active."""


@dataclass(frozen=True)
class Measured:
    """The server's figures over the window (all engines together)."""

    running: float
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


@dataclass(frozen=True)
class Fit:
    """The model fitted to one server: its config, workload, step cost and the fit's error."""

    config: EngineConfig
    workload: Workload
    cost: StepCost
    engines: int
    step_fit_error: float
    """Mean relative error of the step-time fit over the window's slices."""


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
    )


def refusal(store: Store, target: str, now: float, window_s: float) -> str | None:
    """Why the model cannot speak for this server, or None."""
    for mechanism, expr in UNMODELLED.items():
        value = _value(store, target, now, expr.replace("{w}", str(max(int(window_s), 1))))
        if value is not None and value > 0:
            return f"{mechanism} is active, and the model does not capture it"
    return None


def fit_step_cost(store: Store, target: str, now: float, window_s: float) -> tuple[StepCost, float]:
    """Seconds per step against tokens per step over the window's slices (a busy engine steps
    back to back, so a slice's step time is 1 / its steps per second), and the fit's error.
    A constant unless the slices identify a line that fits clearly better: a cost per token
    read off slices of one mix would charge a 400-token prefill like 400 decodes."""
    points = []
    slices = max(1, int(window_s // SLICE_S))
    for index in range(slices):
        end = now - index * SLICE_S
        figures = measure(store, target, end, SLICE_S)
        if figures.steps_per_s > 0 and figures.tokens_per_step > 0 and figures.running >= 0.5:
            points.append((figures.tokens_per_step, 1.0 / figures.steps_per_s))
    if not points:
        raise CannotModelError(
            "no engine steps in the window (no traffic, or no iteration metrics)"
        )
    cost = _constant(points)
    fitted = _least_squares(points)
    if fitted is not None and _error(fitted, points) < IDENTIFIED * _error(cost, points):
        cost = fitted
    return cost, _error(cost, points)


def _error(cost: StepCost, points: list[tuple[float, float]]) -> float:
    """Mean relative error of a step cost over (tokens per step, seconds per step) points."""
    return sum(abs(cost.fixed_s + cost.per_token_s * x - y) / y for x, y in points) / len(points)


def _constant(points: list[tuple[float, float]]) -> StepCost:
    """The step time of all the slices' steps together (a slice of few steps, mostly idle,
    would weigh as much as a busy one in a plain mean of step times)."""
    return StepCost(len(points) / sum(1.0 / y for _, y in points), 0.0)


def _least_squares(points: list[tuple[float, float]]) -> StepCost | None:
    """The line through the points, None when the points cannot identify it (too few, tokens
    per step varying by less than a fifth) or it is not a cost (a negative part)."""
    if len(points) < 3:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread <= (SPREAD * mean_x) ** 2 * len(points):
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    fixed = mean_y - slope * mean_x
    return StepCost(fixed, slope) if slope >= 0 and fixed >= 0 else None


def engine_config(config: ServerConfig, engines: int) -> EngineConfig:
    """The scheduler settings of one engine, from the server's effective config (an unknown
    token budget is taken as not binding)."""
    needed = ("max_num_seqs", "kv_capacity_tokens", "block_size")
    missing = [name for name in needed if config.number(name) is None]
    if missing:
        raise CannotModelError(
            f"unknown: {', '.join(missing)} (give --vllm-args or --vllm-log, or let the server "
            "report cache_config_info)"
        )
    block = int(config.number("block_size") or 16)
    capacity = float(config.number("kv_capacity_tokens") or 0.0) / max(engines, 1)
    return EngineConfig(
        max_num_seqs=int(config.number("max_num_seqs") or 1),
        max_num_batched_tokens=int(config.number("max_num_batched_tokens") or UNBOUNDED_BUDGET),
        num_blocks=max(int(capacity // block) - 1, 1),
        block_size=block,
    )


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
    }


def measured_figures(measured: Measured) -> dict[str, float | None]:
    """The measured counterparts of `figures`."""
    return {
        "running": measured.running,
        "waiting": measured.waiting,
        "preemptions_per_s": measured.preemptions_per_s,
        "generation_tokens_per_s": measured.generation_tokens_per_s,
        "ttft_p50_s": measured.ttft_p50_s,
        "ttft_p99_s": measured.ttft_p99_s,
    }


def misses(measured: dict[str, float | None], replay: dict[str, float | None]) -> list[str]:
    """The figures the replay of the current config does not reproduce within tolerance."""
    found = []
    for name, tolerance in TOLERANCE.items():
        real, modelled = measured.get(name), replay.get(name)
        if real is None or modelled is None:
            continue
        if name == "preemptions_per_s" and max(real, modelled) < NEAR_ZERO_PREEMPTIONS:
            continue
        if abs(modelled - real) > tolerance * max(abs(real), 1e-9):
            found.append(f"{name} {modelled:.3g} vs measured {real:.3g}")
    return found
