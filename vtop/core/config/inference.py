"""Settings nobody told vtop, inferred from how the engine behaves over a window.

No metric exposes max-num-seqs or the per-step token budget, but a scheduler that holds requests
back leaves a mark: running pinned at one value while requests wait and KV has room is the
sequence cap; steps that carry a constant number of tokens while prompts wait, chunked over
several steps, are the token budget. An inference is weaker than a flag, a log line or a metric
(`Setting.source` starts with "inferred"), needs a window (never one scrape), and is kept per
server until the evidence contradicts it or the server restarts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vtop.core.config.server_config import Setting
from vtop.core.frame import Labels, Series
from vtop.core.store.store import INSTANCE, Store

INFERRED = "inferred"
WINDOW_S = 60.0
MIN_SPAN_S = 10.0
MIN_SCRAPES = 5
KV_ROOM = 0.8
"""Below this KV usage memory is not what holds requests back."""
PLATEAU_SHARE = 0.6
"""Without Little's law: the scrapes that must read running at its peak."""
LITTLE_BAND = (0.9, 1.15)
"""Mean running by Little's law (rate of request_inference_time_seconds_sum) within this band of
the peak: the slots never stay free. Under a token budget running wanders below its peak (seen
on vLLM 0.32: peak 3, mean 2.1); under a sequence cap it sits there (peak 2, mean 1.97). The top
is loose because requests finishing in the window bring their whole inference time."""
LITTLE_WHOLE = 0.1
"""Little's mean this near a whole number above the gauge's peak is read as that number held."""
SHARE_AT_PEAK = 0.2
"""With Little's law, scrapes must still read the peak this often: a large batch wandering
around its mean under a token budget averages near its peak but rarely touches it."""
PREFILLING = 0.8

"""Requests in prefill on average (Little's law on request_prefill_time_seconds) at or above
this: a prompt is mid-prefill in nearly every step. Under a saturated token budget one always
is, since any budget left over would admit a waiting request; under a sequence cap prefills
are brief (seen on vLLM 0.32: 1.16 under a 64-token budget, 0.5 at max-num-seqs 2)."""
POWER_OF_TWO_SHARE = 0.75
"""A step size within this share of the next power of two is read as that power (budgets are
powers of two almost everywhere: vLLM's defaults are 2048, 4096, 8192, 16384)."""
OVERSHOOT = 1.15
"""A step size this far above a power of two is still read as it. The mean is measured high:
its steps are counted by the mean inter-token latency, which misses steps in which no request
decodes (a real 64-token budget on a busy 2-core host read 68.7 tokens a step); no step can carry
more than the budget, so an estimate above a power of two is the measurement's, not the
server's."""


@dataclass(frozen=True)
class EngineWindow:
    """One engine's scheduler evidence over the inference window."""

    labels: Labels
    span_s: float
    scrapes: int
    running_peak: float
    running_share_at_peak: float
    running_little: float | None
    waiting: float
    kv_peak: float
    preemptions: float
    generated: float
    tokens_per_step: float | None
    prefilling: float | None
    """Requests in prefill on average over the window (Little's law)."""
    prompt_p99: float | None
    finished: float | None = None
    """Requests that finished in the window (every finish reason)."""

    @property
    def queue_with_room(self) -> bool:
        """Requests wait, memory has room, nothing is preempted and the engine makes progress."""
        return (
            self.scrapes >= MIN_SCRAPES
            and self.span_s >= MIN_SPAN_S
            and self.waiting >= 1
            and self.kv_peak < KV_ROOM
            and self.preemptions == 0
            and self.generated > 0
        )

    @property
    def held_at(self) -> float:
        """The running count the window held: the gauge's peak, or Little's law's mean where
        that is a whole number above the peak (vLLM 0.32's gauge, read between steps, has read
        1 at every scrape of a window whose counters say 2.00 requests ran throughout)."""
        little = self.running_little
        if little is not None:
            whole = round(little)
            if whole > self.running_peak and abs(little - whole) <= LITTLE_WHOLE:
                return float(whole)
        return self.running_peak

    @property
    def little_share_at_peak(self) -> float:
        """The least share of the time at the peak that Little's law's mean implies for a count
        of whole requests that never exceeds its peak (mean <= peak*p + (peak-1)*(1-p)). The
        gauge is read between steps and can miss the slot a finished request leaves for a
        moment (seen on a busy 2-core host: 9% of scrapes at the peak of 2, Little's mean
        1.88); the counters miss nothing."""
        if self.running_little is None:
            return 0.0
        return max(0.0, min(1.0, self.running_little - (self.held_at - 1)))

    @property
    def pinned(self) -> bool:
        """Running sat at its peak: most scrapes read it, or Little's law says it averaged it."""
        peak = self.held_at
        if peak < 1:
            return False
        if self.running_little is not None:
            low, high = LITTLE_BAND
            gauge_share = self.running_share_at_peak if peak == self.running_peak else 0.0
            return (
                low * peak <= self.running_little <= high * peak
                and max(gauge_share, self.little_share_at_peak) >= SHARE_AT_PEAK
            )
        return self.running_share_at_peak >= PLATEAU_SHARE


def _engine_key(series: Series) -> Labels:
    """The labels that tell engines apart (engine, and Ray's replica), without instance."""
    return tuple((k, v) for k, v in series.labels if k in ("engine", "ReplicaId"))


class _Reader:
    """Windowed reads of one target's series, grouped by engine."""

    def __init__(self, store: Store, target: str, now: float, window: float) -> None:
        self.store, self.target, self.now, self.window = store, target, now, window

    def series(self, name: str) -> dict[Labels, list[Series]]:
        grouped: dict[Labels, list[Series]] = {}
        for series in self.store.select(name, {INSTANCE: self.target}):
            grouped.setdefault(_engine_key(series), []).append(series)
        return grouped

    def points(self, name: str) -> dict[Labels, list[tuple[float, float]]]:
        """Points of a gauge per engine (several series of one engine are summed per time)."""
        found: dict[Labels, dict[float, float]] = {}
        for key, members in self.series(name).items():
            for series in members:
                for when, value in self.store.points(series, self.now, self.window):
                    found.setdefault(key, {})
                    found[key][when] = found[key].get(when, 0.0) + value
        return {key: sorted(values.items()) for key, values in found.items()}

    def total(self, name: str, how: str) -> dict[Labels, float]:
        """Sum over an engine's series of rate or increase."""
        measure = self.store.rate if how == "rate" else self.store.increase
        totals: dict[Labels, float] = {}
        for key, members in self.series(name).items():
            values = [measure(series, self.now, self.window) for series in members]
            known = [value for value in values if value is not None and math.isfinite(value)]
            if known:
                totals[key] = math.fsum(known)
        return totals

    def mean(self, name: str) -> dict[Labels, float]:
        """rate(name_sum) / rate(name_count) per engine."""
        sums, counts = self.total(name + "_sum", "rate"), self.total(name + "_count", "rate")
        return {k: sums[k] / counts[k] for k in sums if counts.get(k)}

    def p99(self, name: str) -> dict[Labels, float]:
        """The 0.99 quantile of a histogram over the window, per engine."""
        found: dict[Labels, float] = {}
        quantiles = self.store.histogram_quantile(
            0.99, name, self.now, self.window, {INSTANCE: self.target}, ("engine", "ReplicaId")
        )
        for key, value in quantiles.items():
            if value is not None and math.isfinite(value):
                found[key] = value
        return found


def engine_windows(store: Store, target: str, now: float, window: float) -> list[EngineWindow]:
    """The scheduler evidence of every engine of a target."""
    read = _Reader(store, target, now, window)
    running, waiting = (
        read.points("vllm:num_requests_running"),
        read.points("vllm:num_requests_waiting"),
    )
    deferred = _deferred(read)
    kv = read.points("vllm:kv_cache_usage_perc")
    preempted = read.total("vllm:num_preemptions_total", "increase")
    generated = read.total("vllm:generation_tokens_total", "increase")
    finished = read.total("vllm:request_success_total", "increase")
    queue_rate = read.total("vllm:request_queue_time_seconds_sum", "rate")
    little = read.total("vllm:request_inference_time_seconds_sum", "rate")
    step_tokens = _tokens_per_step(read)
    prefilling = read.total("vllm:request_prefill_time_seconds_sum", "rate")
    prompt_p99 = read.p99("vllm:request_prompt_tokens")
    windows = []
    for key, points in running.items():
        values = [value for _, value in points]
        if not values:
            continue
        peak = max(values)
        waits = [value for _, value in waiting.get(key, [])]
        deferred_here = deferred.get(key, 0.0)
        average_wait = (math.fsum(waits) / len(waits) if waits else 0.0) - deferred_here
        windows.append(
            EngineWindow(
                labels=key,
                span_s=points[-1][0] - points[0][0],
                scrapes=len(values),
                running_peak=peak,
                running_share_at_peak=sum(1 for v in values if v == peak) / len(values),
                running_little=little.get(key),
                # the queue-time counter counts the deferred requests' wait too
                waiting=max(average_wait, queue_rate.get(key, 0.0) - deferred_here),
                kv_peak=max((value for _, value in kv.get(key, [])), default=math.nan),
                preemptions=preempted.get(key, 0.0),
                generated=generated.get(key, 0.0),
                tokens_per_step=step_tokens.get(key),
                prefilling=prefilling.get(key),
                prompt_p99=prompt_p99.get(key),
                finished=finished.get(key),
            )
        )
    return windows


def _deferred(read: _Reader) -> dict[Labels, float]:
    """Average deferred waiting requests per engine (they wait for LoRA or KV transfers)."""
    found: dict[Labels, float] = {}
    for key, members in read.series("vllm:num_requests_waiting_by_reason").items():
        for series in members:
            if series.label("reason") != "deferred":
                continue
            values = [v for _, v in read.store.points(series, read.now, read.window)]
            if values:
                found[key] = found.get(key, 0.0) + math.fsum(values) / len(values)
    return found


def _tokens_per_step(read: _Reader) -> dict[Labels, float]:
    """Tokens an engine step computes: prompt (local compute) plus generated, per step.

    Steps are counted by `iteration_tokens_total_count`, which skips steps that produced no
    output (a chunk of a prompt alone), and by the mean inter-token latency (one step while a
    request decodes); the larger count is nearer the truth. The rules count them the same way
    (the record engine:step_tokens:mean1m), so a finding's step size is the inference's.
    """
    computed = read.total("vllm:iteration_tokens_total_sum", "rate")
    counted = read.total("vllm:iteration_tokens_total_count", "rate")
    itl = read.mean("vllm:inter_token_latency_seconds")
    found: dict[Labels, float] = {}
    for key, tokens_per_s in computed.items():
        steps_per_s = max(counted.get(key, 0.0), 1 / itl[key] if itl.get(key) else 0.0)
        if steps_per_s > 0:
            found[key] = tokens_per_s / steps_per_s
    return found


def _budget_value(tokens_per_step: float) -> int:
    """The budget a saturated engine's mean step size points at: the power of two just below
    (window edges can overshoot a little) or above it (see POWER_OF_TWO_SHARE), else itself."""
    below = int(2 ** math.floor(math.log2(max(tokens_per_step, 1.0))))
    if tokens_per_step <= OVERSHOOT * below:
        return below
    if tokens_per_step >= POWER_OF_TWO_SHARE * 2 * below:
        return 2 * below
    return math.ceil(tokens_per_step)


def infer_max_num_seqs(window: EngineWindow, capacity_per_engine: float | None) -> Setting | None:
    """The sequence cap, when running is pinned while requests wait and KV has room."""
    if not (window.queue_with_room and window.pinned) or _budget_bound(window):
        return None
    if capacity_per_engine and window.prompt_p99 is not None:
        free = (1 - window.kv_peak) * capacity_per_engine
        if free < window.prompt_p99:
            return None
    how = (
        f"Little's law {window.running_little:.1f}"
        if window.running_little is not None
        else f"{window.running_share_at_peak:.0%} of scrapes"
    )
    source = (
        f"{INFERRED}: running held at {window.held_at:.0f} for {window.span_s:.0f} s "
        f"({how}) with {window.waiting:.1f} waiting and KV at most {window.kv_peak:.0%}"
    )
    return Setting(int(window.held_at), source)


def _budget_bound(window: EngineWindow) -> bool:
    """A prompt is mid-prefill in nearly every step and steps carry far more tokens than one per
    running request: prompt chunks fill the budget (running then sits still too, at the few
    requests the budget lets in, so a pinned count is no sequence cap here). And the mean step
    lies in a budget's band (`_near_a_budget`): a saturated budget's steps carry what it
    allows. Slow prefills under a sequence cap also keep a prompt mid-prefill most of the time
    (a real cap of 2 on a busy 2-core host, 256-token prompts: 0.83 prefilling, 10.5 tokens a
    step), but their mean step is no budget's."""
    return (
        window.tokens_per_step is not None
        and window.prefilling is not None
        and window.prefilling >= PREFILLING
        and window.tokens_per_step > 2 * window.held_at
        and _near_a_budget(window.tokens_per_step)
    )


def _near_a_budget(tokens_per_step: float) -> bool:
    """The mean step lies within -25%/+OVERSHOOT of a power of two: what a saturated budget
    gives (budgets are powers of two almost everywhere: vLLM's defaults are 2048, 4096, 8192,
    16384; the mean is measured a little high, never above the budget itself)."""
    above = float(2 ** math.ceil(math.log2(max(tokens_per_step, 1.0))))
    below = above / 2
    return tokens_per_step >= POWER_OF_TWO_SHARE * above or tokens_per_step <= OVERSHOOT * below


def infer_max_num_batched_tokens(window: EngineWindow) -> Setting | None:
    """The per-step token budget, when steps are full of prompt chunks while requests wait."""
    if not window.queue_with_room or not _budget_bound(window):
        return None
    assert window.tokens_per_step is not None and window.prefilling is not None
    value = _budget_value(window.tokens_per_step)
    source = (
        f"{INFERRED}: steps carried {window.tokens_per_step:.0f} tokens for "
        f"{window.span_s:.0f} s with a prompt mid-prefill in every step "
        f"({window.prefilling:.1f} prefilling on average), {window.waiting:.1f} waiting and KV "
        f"at most {window.kv_peak:.0%}"
    )
    return Setting(value, source)


class Inferences:
    """A target's inferred settings, kept until contradicted (a cap does not move without a
    restart, but one window may lack the evidence)."""

    def __init__(self) -> None:
        self.settings: dict[str, Setting] = {}

    def update(
        self, store: Store, target: str, now: float, capacity_per_engine: float | None
    ) -> dict[str, Setting]:
        """Infer from the window ending at `now`; drop what it contradicts; the current set."""
        windows = engine_windows(store, target, now, WINDOW_S)
        found: dict[str, Setting] = {}
        for window in windows:
            for name, setting in (
                ("max_num_seqs", infer_max_num_seqs(window, capacity_per_engine)),
                ("max_num_batched_tokens", infer_max_num_batched_tokens(window)),
            ):
                if setting is not None and (
                    name not in found or float(setting.value) > float(found[name].value)
                ):
                    found[name] = setting
        self.settings.update(found)
        self.drop_contradicted(windows)
        return dict(self.settings)

    def drop_contradicted(self, windows: list[EngineWindow]) -> None:
        """A sequence cap below the running seen, or a budget below the tokens per step seen
        (beyond OVERSHOOT: the step count's known bias, which the inference allows too; a
        tighter bound here drops on one window what the next infers again)."""
        cap = self.settings.get("max_num_seqs")
        if cap is not None and any(w.running_peak > float(cap.value) for w in windows):
            del self.settings["max_num_seqs"]
        budget = self.settings.get("max_num_batched_tokens")
        steps = [w.tokens_per_step for w in windows if w.tokens_per_step is not None]
        if budget is not None and any(step > OVERSHOOT * float(budget.value) for step in steps):
            del self.settings["max_num_batched_tokens"]

    def clear(self) -> None:
        """Forget everything (the server restarted)."""
        self.settings.clear()


def is_inferred(setting: Setting) -> bool:
    """True for a setting vtop inferred (weaker than any other source)."""
    return setting.source.startswith(INFERRED)
