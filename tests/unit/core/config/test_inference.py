"""Settings inferred from the engine's behaviour (a sequence cap, a token budget)."""

from __future__ import annotations

import dataclasses

from vtop.core.config.inference import (
    EngineWindow,
    Inferences,
    infer_max_num_batched_tokens,
    infer_max_num_seqs,
)
from vtop.core.config.server_config import Setting


def cap_window(peak: float, share: float, little: float) -> EngineWindow:
    """A queued engine with KV free whose running gauge and Little's law say what they say."""
    return EngineWindow(
        labels=(("engine", "0"),),
        span_s=14.9,
        scrapes=11,
        running_peak=peak,
        running_share_at_peak=share,
        running_little=little,
        waiting=35.0,
        kv_peak=0.001,
        preemptions=0.0,
        generated=11974.0,
        tokens_per_step=24.4,
        prefilling=0.39,
        prompt_p99=497.0,
    )


def test_a_cap_the_gauge_misses_between_steps_is_inferred_from_littles_law() -> None:
    # figures of a real sequence cap of 2 on a busy 2-core host: the gauge read 2 at 9% of scrapes
    missed = cap_window(peak=2, share=0.09, little=1.88)
    assert missed.pinned
    inferred = infer_max_num_seqs(missed, None)
    assert inferred is not None and inferred.value == 2, inferred
    assert inferred.source.startswith("inferred: running held at 2"), inferred
    # and one whose gauge read 1 at every scrape while the counters say 2.00 ran throughout
    under_read = cap_window(peak=1, share=1.0, little=2.0004)
    inferred = infer_max_num_seqs(under_read, None)
    assert inferred is not None and inferred.value == 2, inferred
    # a mean between whole numbers above the peak says nothing about a cap
    assert infer_max_num_seqs(cap_window(peak=1, share=1.0, little=1.5), None) is None
    # a batch wandering near a large peak implies nothing: Little's mean 11 of a peak of 12
    wandering = cap_window(peak=12, share=0.05, little=11.0)
    assert not wandering.pinned and infer_max_num_seqs(wandering, None) is None


def test_slow_prefills_under_a_cap_are_no_budget_and_a_budget_s_steps_are() -> None:
    # a real max-num-seqs 2 on a busy 2-core host, the URL alone: 256-token prompts prefill
    # slowly, so a prompt is mid-prefill 83% of the time; but 10.5 tokens a step is no budget's
    # mean (a saturated budget's lies within -25%/+15% of a power of two)
    capped = dataclasses.replace(
        cap_window(peak=2, share=0.27, little=2.0079),
        waiting=13.6,
        tokens_per_step=10.56,
        prefilling=0.833,
    )
    inferred = infer_max_num_seqs(capped, 524288)
    assert inferred is not None and inferred.value == 2, capped
    assert infer_max_num_batched_tokens(capped) is None
    # a real 64-token budget on the same host (800-token prompts): its steps read 68.7 tokens,
    # a little high (the steps are counted by the mean ITL, which misses some), and running
    # sat at 2 for stretches of the window too: a budget, never a cap
    budgeted = dataclasses.replace(
        cap_window(peak=2, share=0.47, little=1.99), tokens_per_step=68.7, prefilling=1.1
    )
    assert infer_max_num_seqs(budgeted, 524288) is None
    budget = infer_max_num_batched_tokens(budgeted)
    assert budget is not None and budget.value == 64, budget


def test_an_inferred_budget_survives_the_step_count_s_bias_and_not_a_larger_step() -> None:
    # a real 64-token budget on a slow 2-core host read 64.3 and 70.9 tokens a step in two
    # windows: the inference reads both as 64, so neither may drop what the other inferred
    budgeted = dataclasses.replace(
        cap_window(peak=2, share=0.47, little=1.99), tokens_per_step=70.9, prefilling=1.16
    )
    budget = infer_max_num_batched_tokens(budgeted)
    assert budget is not None and budget.value == 64, budget
    inferences = Inferences()
    inferences.settings["max_num_batched_tokens"] = Setting(64, budget.source)
    inferences.drop_contradicted([budgeted])
    assert "max_num_batched_tokens" in inferences.settings
    # steps of 80 tokens cannot be a 64-token budget's
    inferences.drop_contradicted([dataclasses.replace(budgeted, tokens_per_step=80.0)])
    assert "max_num_batched_tokens" not in inferences.settings
