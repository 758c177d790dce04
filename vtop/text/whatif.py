"""The `vtop whatif` report: measured, the replay of the current config, the prediction."""

from __future__ import annotations

import re
import textwrap
from typing import Any

from vtop.core.ops.rank import KEPT_THROUGHPUT, PrimaryPredictions
from vtop.core.whatif.calibrate import UNBOUNDED_BUDGET, UNBOUNDED_SEQS
from vtop.core.whatif.predict import Prediction

ROWS = (
    ("running", "running requests", "{:.1f}"),
    ("waiting", "waiting requests", "{:.1f}"),
    ("preemptions_per_s", "preemptions/s", "{:.2f}"),
    ("generation_tokens_per_s", "generated tokens/s", "{:.1f}"),
    ("ttft_p50_s", "TTFT p50 s", "{:.3f}"),
    ("ttft_p99_s", "TTFT p99 s", "{:.3f}"),
)
SCHEMA = "vtop.whatif/1"


def _cell(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def _direction(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return ""
    if abs(after - before) <= 0.05 * max(abs(before), 1e-9):
        return "="
    return "up" if after > before else "down"


def _budget(tokens: int, inferred: tuple[str, ...]) -> str:
    if tokens >= UNBOUNDED_BUDGET:
        return "token budget unknown (taken as not binding)"
    said = " (inferred)" if "max_num_batched_tokens" in inferred else ""
    return f"budget {tokens} tokens/step{said}"


def _cap(seqs: int, inferred: tuple[str, ...], because: str) -> str:
    if seqs >= UNBOUNDED_SEQS:
        return f"max-num-seqs unknown ({because or 'nothing waited'}: taken as not binding)"
    return f"max-num-seqs {seqs}" + (" (inferred)" if "max_num_seqs" in inferred else "")


def _model_lines(prediction: Prediction) -> list[str]:
    """What the model was fitted to: the engine, the step time, the workload."""
    fit, workload = prediction.fit, prediction.fit.workload
    sent = (
        f"{workload.clients} clients in a closed loop"
        if workload.clients
        else f"{workload.arrivals_per_s:.2f} requests/s arriving"
    )
    cap = _cap(fit.config.max_num_seqs, fit.inferred, fit.cap_unbound_because)
    return [
        f"MODEL  {fit.engines} engine(s), {cap}, "
        f"{_budget(fit.config.max_num_batched_tokens, fit.inferred)}, "
        f"{fit.config.num_blocks} KV blocks of {fit.config.block_size}",
        f"       {_step(prediction)}",
        f"       workload {sent}, {workload.prompt_tokens:.0f} prompt + "
        f"{workload.output_tokens:.0f} output tokens",
    ]


def _step(prediction: Prediction) -> str:
    """The fitted step time, what identified it, and the API server's part of TTFT."""
    step = prediction.fit.step
    cost = step.cost
    parts = [f"step {cost.fixed_s * 1000:.2f} ms"]
    if cost.per_sequence_s:
        parts.append(f"{cost.per_sequence_s * 1000:.2f} ms/request")
    if cost.per_token_s:
        parts.append(f"{cost.per_token_s * 1e6:.1f} us/token")
    if cost.per_context_token_s:
        parts.append(f"{cost.per_context_token_s * 1e6:.2f} us/token of context")
    if not step.terms:
        how = "a constant: no cost per request, token or token of context is identified"
    else:
        how = "fitted " + " and ".join(step.terms)
    if step.earlier_points:
        how += f", with {step.earlier_points} slices of earlier windows of this model here"
    front = prediction.fit.frontend_s
    return (
        " + ".join(parts)
        + f" ({how}; fit error {step.error:.0%}); API server {front * 1000:.0f} ms of TTFT"
    )


def text_whatif(prediction: Prediction) -> str:
    """A table a person reads: each figure measured, replayed and predicted (steady, and over
    the first seconds after the restart)."""
    changes = " ".join(f"{flag} {value:g}" for flag, value in prediction.changes.items())
    first = prediction.after_restart
    first_head = f"first {prediction.after_restart_s:.0f} s" if first is not None else ""
    lines = [
        *_model_lines(prediction),
        "",
        f"{'':22}{'measured':>10}{'replay':>10}{'predicted':>11}     {first_head:>11}".rstrip(),
    ]
    for key, label, form in ROWS:
        predicted = None if prediction.predicted is None else prediction.predicted[key]
        direction = (
            "" if prediction.predicted is None else _direction(prediction.replay[key], predicted)
        )
        after = "" if first is None else _cell(first[key], form)
        lines.append(
            f"{label:22}{_cell(prediction.measured[key], form):>10}"
            f"{_cell(prediction.replay[key], form):>10}{_cell(predicted, form):>11}"
            f"  {direction:4}{after:>10}".rstrip()
        )
    lines.append("")
    if prediction.predicted is None:
        lines.append(
            "NO PREDICTION: the replay of the current config does not reproduce the window:"
        )
        lines += [f"  {miss}" for miss in prediction.misses]
    elif changes:
        lines.append(f"PREDICTED for {changes} (directions: against the replay)")
        lines += _after_restart_lines(prediction)
        lines += _context_lines(prediction)
    else:
        lines.append("CALIBRATED: give --set FLAG=VALUE to predict a change")
    return "\n".join(lines)


def _after_restart_lines(prediction: Prediction) -> list[str]:
    """What the first-seconds column means, and when a measurement shows the steady state."""
    if prediction.after_restart is None:
        return []
    lines = [
        f"first {prediction.after_restart_s:.0f} s: right after the restart, the queue building "
        "from empty"
    ]
    turnover = prediction.turnover_s
    if turnover is not None and turnover > 1:
        lines.append(
            f"  (the steady state holds once the queue has turned over: about {turnover:.0f} s)"
        )
    return lines


def _context_lines(prediction: Prediction) -> list[str]:
    """Where the change moves the tokens held in the KV cache and the fit has no cost for
    them: which way its steps may go, and why."""
    moved = prediction.context_unpriced
    if moved is None:
        return []
    before, after = moved
    text = (
        f"the step's cost per token of context is not identified from these windows: the "
        f"change holds {after:,.0f} tokens in the KV cache against {before:,.0f}, so its "
        f"steps may run {_way(moved)} than predicted"
    )
    return textwrap.wrap(text, width=78, initial_indent="  ", subsequent_indent="  ")


def json_refusal(reason: str, exit_code: int) -> dict[str, Any]:
    """A whatif that could not calibrate or predict, as JSON: why, and the exit code."""
    return {"schema": SCHEMA, "refused": reason, "exit_code": exit_code, "predicted": None}


def json_whatif(prediction: Prediction) -> dict[str, Any]:
    """The same as JSON (figures null when unknown; the prediction null when refused)."""
    fit = prediction.fit
    return {
        "schema": SCHEMA,
        "changes": prediction.changes,
        "model": {
            "engines": fit.engines,
            "max_num_seqs": (
                None if fit.config.max_num_seqs >= UNBOUNDED_SEQS else fit.config.max_num_seqs
            ),
            "inferred": list(fit.inferred),
            "max_num_seqs_unbound_because": fit.cap_unbound_because or None,
            "max_num_batched_tokens": (
                None
                if fit.config.max_num_batched_tokens >= UNBOUNDED_BUDGET
                else fit.config.max_num_batched_tokens
            ),
            "kv_blocks": fit.config.num_blocks,
            "block_size": fit.config.block_size,
            "step_fixed_s": fit.step.cost.fixed_s,
            "step_per_token_s": fit.step.cost.per_token_s,
            "step_per_request_s": fit.step.cost.per_sequence_s,
            "step_per_context_token_s": fit.step.cost.per_context_token_s,
            "step_fitted": list(fit.step.terms),
            "step_fit_error": fit.step.error,
            "step_earlier_slices": fit.step.earlier_points,
            "largest_batch_seen": fit.step.largest_batch,
            "frontend_ttft_s": fit.frontend_s,
            "clients": fit.workload.clients,
            "arrivals_per_s": fit.workload.arrivals_per_s,
            "prompt_tokens": fit.workload.prompt_tokens,
            "output_tokens": fit.workload.output_tokens,
        },
        "measured": prediction.measured,
        "replay": prediction.replay,
        "predicted": prediction.predicted,
        "after_restart": (
            None
            if prediction.after_restart is None
            else {"seconds": prediction.after_restart_s, **prediction.after_restart}
        ),
        "turnover_s": prediction.turnover_s,
        "context_unpriced": _moved_json(prediction.context_unpriced),
        "misses": prediction.misses,
    }


def text_predictions(predictions: PrimaryPredictions) -> str:
    """The PREDICTED section of `vtop diagnose`: each alternative, best first."""
    shown = re.sub(r',?model_name="[^"]*"', "", predictions.finding_key).replace("{}", "")
    lines = [f"PREDICTED (scheduler model, vtop whatif) for {shown}"]
    if predictions.reason is not None:
        return "\n".join([*lines, f"  none: {predictions.reason}"])
    before = predictions.replay
    lines.append(
        f"  now (replay): {figures_summary(before)}; best first by {predictions.figure}, "
        "keeping 90% of the tokens/s"
    )
    for ranked in predictions.ranked:
        flag = ranked.change.as_flag() or ranked.change.flag
        note = "" if ranked.keeps_throughput else "  (loses over 10% of the tokens/s)"
        if ranked.extrapolated:
            note += "  (low confidence: larger batches than any slice showed)"
        if ranked.context_unpriced is not None:
            held_now, held_after = ranked.context_unpriced
            note += (
                f"  (steps may run {_way(ranked.context_unpriced)}: {held_after:,.0f} tokens "
                f"held in the KV cache against {held_now:,.0f}, and no cost per token of "
                "context identified)"
            )
        lines.append(f"  {flag}: {figures_summary(ranked.predicted)}{note}")
    return "\n".join(lines + headline_lines(predictions))


def headline_lines(predictions: PrimaryPredictions) -> list[str]:
    """Whether the headline change (the action line's) is the one the model ranks best, and
    why not when it is not: what it costs, and what the first one lacks. The report never
    leaves a headline and a prediction at odds unexplained."""
    place, headline = predictions.headline_rank, predictions.headline
    if place is None or headline is None:
        return []
    if place == 0:
        return [f"  the headline change, {headline}, is the one the model ranks best"]
    mine, best = predictions.ranked[place], predictions.ranked[0]
    before = predictions.replay
    costs = _moved(before, mine.predicted)
    cost = f": {costs}" if costs else ""
    doubts = []
    if best.extrapolated:
        doubts.append("low confidence (larger batches than any slice showed)")
    if best.context_unpriced is not None:
        doubts.append(f"its steps may run {_way(best.context_unpriced)}")
    if best.change.flag in MEMORY_FLAGS:
        doubts.append("it needs the memory to be there")
    why = (
        f"; the headline leads because {best.change.flag}'s prediction is " + ", ".join(doubts)
        if doubts
        else "; the rule's order, not the model, put the headline first"
    )
    return [
        f"  the headline change, {headline}, ranks {place + 1} of {len(predictions.ranked)}"
        f"{cost}{why}"
    ]


MEMORY_FLAGS = frozenset(
    {"--num-gpu-blocks-override", "--kv-cache-memory-bytes", "--gpu-memory-utilization"}
)


def _moved(before: dict[str, float | None], after: dict[str, float | None]) -> str:
    """`tokens/s 346 -> 127, TTFT p50 9.14 s -> 30.00 s`: the figures a change worsens."""
    worse = []
    tokens_now, tokens_after = (
        before.get("generation_tokens_per_s"),
        after.get("generation_tokens_per_s"),
    )
    known = tokens_now is not None and tokens_after is not None
    if known and tokens_after < KEPT_THROUGHPUT * tokens_now:  # type: ignore[operator]
        worse.append(f"tokens/s {tokens_now:.0f} -> {tokens_after:.0f}")
    ttft_now, ttft_after = before.get("ttft_p50_s"), after.get("ttft_p50_s")
    if ttft_now is not None and ttft_after is not None and ttft_after > ttft_now:
        worse.append(f"TTFT p50 {ttft_now:.2f} s -> {ttft_after:.2f} s")
    return ", ".join(worse)


def figures_summary(figures: dict[str, float | None]) -> str:
    """preemptions, tokens/s, waiting, TTFT p50 in one line."""
    parts = []
    for key, label, form in (
        ("preemptions_per_s", "preemptions/s", "{:.2f}"),
        ("generation_tokens_per_s", "tokens/s", "{:.0f}"),
        ("waiting", "waiting", "{:.1f}"),
        ("ttft_p50_s", "TTFT p50", "{:.2f} s"),
    ):
        parts.append(f"{label} {_cell(figures.get(key), form)}")
    return ", ".join(parts)


def json_predictions(predictions: PrimaryPredictions) -> dict[str, Any]:
    """The same as JSON."""
    return {
        "finding": predictions.finding_key,
        "figure": predictions.figure,
        "reason": predictions.reason,
        "headline": predictions.headline,
        "headline_rank": predictions.headline_rank,
        "replay": predictions.replay,
        "alternatives": [
            {
                "flag": ranked.change.flag,
                "proposed": ranked.change.proposed,
                "predicted": ranked.predicted,
                "keeps_throughput": ranked.keeps_throughput,
                "extrapolated": ranked.extrapolated,
                "context_unpriced": _moved_json(ranked.context_unpriced),
            }
            for ranked in predictions.ranked
        ],
    }


def _way(moved: tuple[float, float]) -> str:
    """Which way steps go when the tokens held in the KV cache move from the first to the
    second of `moved` and nothing charges for them."""
    return "faster" if moved[1] < moved[0] else "slower"


def _moved_json(moved: tuple[float, float] | None) -> dict[str, float] | None:
    """The KV cache's held tokens in the replay and after the change, where the change moves
    them and the fit charges nothing for them; null otherwise."""
    if moved is None:
        return None
    return {"kv_tokens_replay": moved[0], "kv_tokens_predicted": moved[1]}
