"""A step-by-step model of vLLM 0.32's V1 scheduler (`vllm/v1/core/sched/scheduler.py`,
`kv_cache_manager.py`), for predicting what a flag change does before a restart.

Each step schedules the running requests first, in order: a decode needs one token, a prefill
a chunk of what remains of its prompt, within the per-step token budget
(`max-num-batched-tokens`); a request that cannot get the KV blocks for its tokens preempts the
last running request (recompute: it goes back to the front of the queue and its KV is freed),
itself last. Only when nothing was preempted are waiting requests admitted, while fewer than
`max-num-seqs` run and budget is left, each only if the blocks for its whole sequence fit in the
free pool beyond the watermark (vLLM's `scheduler_reserve_full_isl`). The KV pool counts whole
blocks of `block-size` tokens. A step takes `StepCost.seconds(tokens, requests, context)`,
the context being the tokens of the KV blocks in use (what vLLM's `kv_cache_usage_perc` counts).
Time is simulated, never read from a clock."""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class EngineConfig:
    """The settings the scheduler obeys, for one engine."""

    max_num_seqs: int
    max_num_batched_tokens: int
    num_blocks: int
    """Usable KV blocks (vLLM keeps one more as the null block)."""
    block_size: int
    watermark: float = 0.0


@dataclass(frozen=True)
class StepCost:
    """The time of one engine step: a fixed part, a part per scheduled token, a part per
    scheduled request (sampling, output processing) and a part per token of context the
    engine holds in its KV cache (attention reads every running request's whole context)."""

    fixed_s: float
    per_token_s: float
    per_sequence_s: float = 0.0
    per_context_token_s: float = 0.0

    def seconds(self, tokens: float, requests: float = 0, context: float = 0) -> float:
        return (
            self.fixed_s
            + self.per_token_s * tokens
            + self.per_sequence_s * requests
            + self.per_context_token_s * context
        )


@dataclass(frozen=True)
class Workload:
    """Who sends what: `clients` in a closed loop (each sends again when answered), or an
    open loop of `arrivals_per_s` (Poisson); prompt and output lengths around their means."""

    prompt_tokens: float
    output_tokens: float
    clients: int = 0
    arrivals_per_s: float = 0.0
    spread: float = 0.2
    """Lengths are uniform within +-spread of the mean."""


@dataclass(slots=True)
class _Request:
    arrival: float
    prompt: int
    output: int
    computed: int = 0
    generated: int = 0
    blocks: int = 0
    target: int = 0
    """Tokens to (re)compute before the next token is sampled: the prompt, or after a
    preemption the prompt plus what was generated."""
    first_token: float | None = None

    def __post_init__(self) -> None:
        self.target = self.prompt


@dataclass
class Outcome:
    """What the simulated engine did over the measured part of the run."""

    seconds: float
    running: float
    """Mean requests running (time-weighted)."""
    waiting: float
    preemptions_per_s: float
    generation_tokens_per_s: float
    prompt_tokens_per_s: float
    requests_per_s: float
    ttft_s: list[float] = field(default_factory=list)
    steps: int = 0
    kv_tokens: float = 0.0
    """Mean tokens held in the KV cache (time-weighted): what the step's context costs."""

    def ttft_quantile(self, q: float) -> float | None:
        """The q-quantile of the first-token times (None without any)."""
        return quantile(self.ttft_s, q)


def quantile(values: list[float], q: float) -> float | None:
    """The q-quantile of the values, one of them (None without any)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _Engine:
    """The scheduler's state during one simulation."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.free = config.num_blocks
        self.running: list[_Request] = []
        self.waiting: deque[_Request] = deque()
        self.watermark_blocks = int(config.watermark * config.num_blocks)

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.config.block_size)

    def grow(self, request: _Request, tokens: int) -> bool:
        """Allocate blocks so `tokens` more of the request's tokens have KV slots."""
        if request.computed + tokens <= request.blocks * self.config.block_size:
            return True
        needed = self.blocks_for(request.computed + tokens) - request.blocks
        if needed > self.free:
            return False
        self.free -= max(needed, 0)
        request.blocks += max(needed, 0)
        return True

    def preempt_last(self) -> _Request:
        victim = self.running.pop()
        self.free += victim.blocks
        victim.blocks, victim.computed = 0, 0
        victim.target = victim.prompt + victim.generated
        self.waiting.appendleft(victim)
        return victim

    def schedule(self) -> tuple[list[tuple[_Request, int]], int]:
        """One step's (request, tokens) and the number of preemptions it made."""
        scheduled: list[tuple[_Request, int]] = []
        budget, preempted = self.config.max_num_batched_tokens, 0
        size, running = self.config.block_size, self.running
        append = scheduled.append
        index = 0
        while index < len(running) and budget > 0:
            request = running[index]
            remaining = request.target - request.computed
            tokens = remaining if remaining > 1 else 1
            if tokens > budget:
                tokens = budget
            if request.computed + tokens > request.blocks * size:
                victim = None
                while not self.grow(request, tokens):
                    victim = self.preempt_last()
                    preempted += 1
                    if victim is request:
                        break
                if victim is request:
                    break
            append((request, tokens))
            budget -= tokens
            index += 1
        if preempted:
            return scheduled, preempted
        while self.waiting and len(running) < self.config.max_num_seqs and budget > 0:
            request = self.waiting[0]
            whole = self.blocks_for(request.target) - request.blocks
            if whole + self.watermark_blocks * bool(running) > self.free:
                break
            tokens = min(request.target - request.computed, budget)
            self.grow(request, tokens)
            running.append(self.waiting.popleft())
            append((request, tokens))
            budget -= tokens
        return scheduled, preempted


def simulate(
    config: EngineConfig,
    workload: Workload,
    cost: StepCost,
    seconds: float,
    seed: int = 0,
    warmup_s: float | None = None,
) -> Outcome:
    """Run the engine on the workload for `seconds` of simulated time; the first `warmup_s`
    (a fifth by default) are not measured."""
    rng = random.Random(seed)
    engine = _Engine(config)
    warmup = seconds / 5 if warmup_s is None else warmup_s

    def new_request(now: float) -> _Request:
        def length(mean: float) -> int:
            return max(1, round(mean * rng.uniform(1 - workload.spread, 1 + workload.spread)))

        return _Request(now, length(workload.prompt_tokens), length(workload.output_tokens))

    now, next_arrival = 0.0, 0.0
    for _ in range(workload.clients):
        engine.waiting.append(new_request(now))
    totals = {"running": 0.0, "waiting": 0.0, "preemptions": 0.0, "generated": 0.0}
    totals |= {"prompt": 0.0, "finished": 0.0, "context": 0.0}
    outcome = Outcome(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    while now < seconds:
        if workload.arrivals_per_s > 0:
            while next_arrival <= now:
                engine.waiting.append(new_request(next_arrival))
                next_arrival += rng.expovariate(workload.arrivals_per_s)
        scheduled, preempted = engine.schedule()
        tokens = sum(n for _, n in scheduled)
        context = (config.num_blocks - engine.free) * config.block_size
        step = (
            cost.seconds(tokens, len(scheduled), context)
            if scheduled
            else _idle(workload, next_arrival, now)
        )
        measured = now >= warmup
        if measured:
            totals["running"] += len(engine.running) * step
            totals["waiting"] += len(engine.waiting) * step
            totals["context"] += context * step
            totals["preemptions"] += preempted
            outcome.steps += bool(scheduled)
        now += step
        for request, count in scheduled:
            if request.computed >= request.target:  # a decode: the common case, inline
                request.computed += count
                request.generated += 1
                totals["generated"] += measured
            else:
                _advance(request, count, now, measured, totals, outcome)
            if request.generated >= request.output:
                engine.running.remove(request)
                engine.free += request.blocks
                totals["finished"] += measured
                if workload.clients:
                    engine.waiting.append(new_request(now))
    span = max(now - warmup, 1e-9)
    outcome.seconds = span
    outcome.running = totals["running"] / span
    outcome.waiting = totals["waiting"] / span
    outcome.preemptions_per_s = totals["preemptions"] / span
    outcome.generation_tokens_per_s = totals["generated"] / span
    outcome.prompt_tokens_per_s = totals["prompt"] / span
    outcome.requests_per_s = totals["finished"] / span
    outcome.kv_tokens = totals["context"] / span
    return outcome


def _idle(workload: Workload, next_arrival: float, now: float) -> float:
    """How long an engine with nothing to schedule waits (for the next arrival)."""
    return max(next_arrival - now, 1e-3) if workload.arrivals_per_s > 0 else 1e-3


def _advance(
    request: _Request,
    tokens: int,
    now: float,
    measured: bool,
    totals: dict[str, float],
    outcome: Outcome,
) -> None:
    """A prefilling request after the step: its KV grew; a finished prefill samples a token."""
    prefilling = request.computed < request.target
    request.computed += tokens
    if prefilling and measured:
        totals["prompt"] += tokens
    if request.computed < request.target:
        return
    request.generated += 1
    totals["generated"] += measured
    if request.first_token is None:
        request.first_token = now
        if measured:
            outcome.ttft_s.append(now - request.arrival)
