"""`vtop whatif`: replay the current config in the model, and only if that reproduces the
measured window, predict the same figures for changed flags."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from vtop.core.config.server_config import ServerConfig
from vtop.core.rules.engine import ProposedChange
from vtop.core.rules.promql.functions import bucket_quantile
from vtop.core.store.store import Store
from vtop.core.whatif.calibrate import (
    BUCKETED,
    CannotModelError,
    Fit,
    engine_config,
    figures,
    inferred_settings,
    kv_tokens_per_engine,
    measure,
    measured_figures,
    misses,
    queue_held_by,
    refusal,
    step_points,
    workload_of,
)
from vtop.core.whatif.profile import StepProfiles, profile_key
from vtop.core.whatif.scheduler import EngineConfig, Outcome, quantile, simulate
from vtop.core.whatif.step_time import fit_step_cost

FLAGS = (
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--num-gpu-blocks-override",
    "--block-size",
    "--kv-cache-memory-bytes",
)
"""The flags the model can change."""
SIMULATED_S = 120.0
TTFT = "vllm:time_to_first_token_seconds_bucket"


CONTEXT_MOVE = 2.0
"""A change that holds this many times more or fewer tokens in the KV cache than the replay
moves the step's cost of context (attention) by as much."""


@dataclass
class Prediction:
    """The measured window, the replay of the current config, and the prediction (None when
    the replay does not reproduce the measurement, with the reasons in `misses`)."""

    measured: dict[str, float | None]
    replay: dict[str, float | None]
    predicted: dict[str, float | None] | None
    misses: list[str]
    fit: Fit
    changes: dict[str, float] = field(default_factory=dict)
    after_restart: dict[str, float | None] | None = None
    """The changed flags' figures over the first `after_restart_s` after the restart (the queue
    building from empty), beside the steady state of `predicted`."""
    after_restart_s: float = 0.0

    @property
    def turnover_s(self) -> float | None:
        """How long the predicted queue takes to turn over once (waiting over completions per
        second): a window measured after the restart shows the steady state only past it."""
        if self.predicted is None:
            return None
        waiting, tokens = self.predicted["waiting"], self.predicted["generation_tokens_per_s"]
        output = self.fit.workload.output_tokens
        if not waiting or not tokens or output <= 0:
            return None
        return waiting / (tokens / output)

    @property
    def context_unpriced(self) -> tuple[float, float] | None:
        """See `context_unpriced`, for this prediction."""
        if self.predicted is None:
            return None
        return context_unpriced(self.fit, self.replay, self.predicted)


def context_unpriced(
    fit: Fit, replay: Mapping[str, float | None], predicted: Mapping[str, float | None]
) -> tuple[float, float] | None:
    """The tokens held in the KV cache in the replay and after the change, where the change
    moves them by CONTEXT_MOVE or more and the fit charges nothing for them (the windows did
    not identify a cost per token of context): the changed engine's steps may then be faster
    (less held) or slower (more) than predicted. None otherwise."""
    if "per token of context" in fit.step.terms:
        return None
    before, after = replay.get("kv_tokens"), predicted.get("kv_tokens")
    if not before or not after or max(before, after) < CONTEXT_MOVE * min(before, after):
        return None
    return before, after


def changed(
    config: EngineConfig, changes: Mapping[str, float], server: ServerConfig, engines: int
) -> EngineConfig:
    """The engine config with `vllm serve` flags changed (sizes per engine, as vLLM's)."""
    capacity = (config.num_blocks + 1) * config.block_size
    for flag, value in changes.items():
        if flag == "--max-num-seqs":
            config = dataclasses.replace(config, max_num_seqs=int(value))
        elif flag == "--max-num-batched-tokens":
            config = dataclasses.replace(config, max_num_batched_tokens=int(value))
        elif flag == "--num-gpu-blocks-override":
            config = dataclasses.replace(config, num_blocks=max(int(value) - 1, 1))
            capacity = int(value) * config.block_size
        elif flag == "--block-size":
            blocks = max(capacity // int(value) - 1, 1)
            config = dataclasses.replace(config, block_size=int(value), num_blocks=blocks)
        elif flag == "--kv-cache-memory-bytes":
            per_token = server.number("kv_bytes_per_token")
            if per_token is None:
                raise CannotModelError(
                    "--kv-cache-memory-bytes needs the KV bytes per token (the model)"
                )
            capacity = int(value / per_token / max(engines, 1))
            config = dataclasses.replace(
                config, num_blocks=max(capacity // config.block_size - 1, 1)
            )
        else:
            raise CannotModelError(
                f"{flag}: the model does not know this flag ({', '.join(FLAGS)})"
            )
    return config


def _engines(store: Store, target: str, server: ServerConfig) -> int:
    """Data-parallel engines: the config's count, else the engine labels seen."""
    known = server.number("num_engines")
    if known:
        return int(known)
    labels = {
        s.label("engine") for s in store.select("vllm:num_requests_running", {"instance": target})
    }
    return max(len(labels), 1)


def _ttft_bounds(store: Store, target: str) -> list[float]:
    """The TTFT histogram's bucket bounds on this server."""
    bounds = set()
    for series in store.select(TTFT, {"instance": target}):
        le = series.label("le")
        if le is not None:
            bounds.add(float(le))
    return sorted(bounds)


def _bucketed(ttft_s: list[float], bounds: list[float], q: float) -> float | None:
    """A simulated TTFT quantile read through the server's buckets, as the measured one is."""
    if not ttft_s or not bounds:
        return quantile(ttft_s, q)
    counts = [float(sum(1 for t in ttft_s if t <= bound)) for bound in bounds]
    return bucket_quantile(q, list(zip(bounds, counts, strict=True)))


def _figures(outcome: Outcome, fit: Fit, bounds: list[float]) -> dict[str, float | None]:
    """The simulated figures, first tokens seen as the API server sees them."""
    found = figures(outcome, fit.engines)
    ttft_s = [t + fit.frontend_s for t in outcome.ttft_s]
    found["ttft_p50_s"] = _bucketed(ttft_s, bounds, 0.5)
    found["ttft_p99_s"] = _bucketed(ttft_s, bounds, 0.99)
    return found


@dataclass(frozen=True)
class Calibration:
    """The model fitted to a window and its replay of the current config."""

    fit: Fit
    measured: dict[str, float | None]
    replay: dict[str, float | None]
    misses: list[str]
    server: ServerConfig
    bounds: tuple[float, ...]
    seed: int = 0


def calibrate(
    store: Store,
    target: str,
    now: float,
    window_s: float,
    server: ServerConfig,
    seed: int = 0,
    profiles: StepProfiles | None = None,
) -> Calibration:
    """Fit the model to the window (with the step times of earlier windows of this model on
    this host, and keeping this one's, when `profiles` is given) and replay the current config;
    CannotModelError says why the model cannot speak for this server."""
    reason = refusal(store, target, now, window_s)
    if reason is not None:
        raise CannotModelError(reason)
    engines = _engines(store, target, server)
    measured = measure(store, target, now, window_s)
    kv_tokens = kv_tokens_per_engine(server, engines)
    busy = step_points(store, target, now, window_s, engines, kv_tokens)
    key = profile_key(store, target, server)
    earlier = [] if profiles is None else profiles.earlier(key, now, window_s)
    cap_known = server.number("max_num_seqs") is not None
    held_by = "" if cap_known else queue_held_by(store, target, now, window_s, measured, server)
    config = engine_config(server, engines, measured.waiting, held_by)
    workload = workload_of(measured, engines, config.max_num_seqs)
    step = fit_step_cost(busy, earlier)
    unbound = "" if cap_known else held_by or "nothing waited"
    fit = Fit(
        config, workload, step, engines, measured.frontend_s, inferred_settings(server), unbound
    )
    if profiles is not None:
        profiles.add(key, now, window_s, busy)
    bounds = _ttft_bounds(store, target)
    outcome = simulate(config, workload, fit.step.cost, SIMULATED_S, seed)
    replay = _figures(outcome, fit, bounds)
    real = measured_figures(measured)
    unbucketed = _figures(outcome, fit, [])
    exact = {name: unbucketed[name] for name in BUCKETED}
    found = misses(real, replay, exact, [b for b in bounds if b != float("inf")])
    return Calibration(fit, real, replay, found, server, tuple(bounds), seed)


def remember_steps(
    profiles: StepProfiles,
    store: Store,
    target: str,
    now: float,
    window_s: float,
    server: ServerConfig,
) -> None:
    """Keep a window's step times without calibrating on it (the window after an
    applied change shows the model the step time of the new batch)."""
    try:
        engines = _engines(store, target, server)
        kv_tokens = kv_tokens_per_engine(server, engines)
        busy = step_points(store, target, now, window_s, engines, kv_tokens)
    except CannotModelError:
        return
    profiles.add(profile_key(store, target, server), now, window_s, busy)


def predict(calibration: Calibration, changes: Mapping[str, float]) -> dict[str, float | None]:
    """The figures for the changed flags (only meaningful when the calibration has no misses)."""
    fit = calibration.fit
    new = changed(fit.config, changes, calibration.server, fit.engines)
    outcome = simulate(new, fit.workload, fit.step.cost, SIMULATED_S, calibration.seed)
    return _figures(outcome, fit, list(calibration.bounds))


def predict_after_restart(
    calibration: Calibration, changes: Mapping[str, float], seconds: float
) -> dict[str, float | None]:
    """The changed flags' figures over the first `seconds` after the restart: the clients come
    back at once to an empty engine, so the queue builds from nothing and the first tokens come
    sooner than once it has turned over (a window measured right after a restart sees this)."""
    fit = calibration.fit
    new = changed(fit.config, changes, calibration.server, fit.engines)
    outcome = simulate(new, fit.workload, fit.step.cost, seconds, calibration.seed, warmup_s=0.0)
    return _figures(outcome, fit, list(calibration.bounds))


def whatif(
    store: Store,
    target: str,
    now: float,
    window_s: float,
    server: ServerConfig,
    changes: Mapping[str, float],
    seed: int = 0,
    profiles: StepProfiles | None = None,
    after_restart_s: float | None = None,
) -> Prediction:
    """Calibrate on the window, then predict the changed flags, in the steady state and over
    the first `after_restart_s` after the restart (the window's length unless given);
    CannotModelError says why not."""
    calibration = calibrate(store, target, now, window_s, server, seed, profiles)
    first_s = window_s if after_restart_s is None else after_restart_s
    predicted = after = None
    if not calibration.misses:
        predicted = predict(calibration, changes)
        after = predict_after_restart(calibration, changes, first_s) if changes else None
    return Prediction(
        calibration.measured,
        calibration.replay,
        predicted,
        calibration.misses,
        calibration.fit,
        dict(changes),
        after,
        first_s,
    )


@dataclass(frozen=True)
class ChangePrediction:
    """What the model predicts one proposed change does, or why it says nothing."""

    figures: dict[str, float | None] | None
    reason: str | None = None
    after_restart: dict[str, float | None] | None = None
    """Over the first `after_restart_s` after the restart: what a window of the same length,
    measured right after it (as apply and tune verify), should read."""
    after_restart_s: float = 0.0


def predict_change(
    store: Store,
    target: str,
    now: float,
    window_s: float,
    server: ServerConfig,
    change: ProposedChange,
    profiles: StepProfiles | None = None,
) -> ChangePrediction:
    """The prediction recorded next to the measurement when a change is applied."""
    if change.flag not in FLAGS or not isinstance(change.proposed, float | int):
        return ChangePrediction(None, f"the model does not change {change.flag}")
    try:
        calibration = calibrate(store, target, now, window_s, server, profiles=profiles)
    except CannotModelError as error:
        return ChangePrediction(None, str(error))
    if calibration.misses:
        return ChangePrediction(None, "the replay misses " + "; ".join(calibration.misses))
    changes = {change.flag: float(change.proposed)}
    first = predict_after_restart(calibration, changes, window_s)
    return ChangePrediction(predict(calibration, changes), None, first, window_s)
