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


def test_a_cap_held_exactly_is_a_cap_even_while_slow_prefills_fill_the_steps() -> None:
    # a real max-num-seqs 2 on a busy 2-core host, the URL alone: 256-token prompts prefill
    # slowly, so a prompt is mid-prefill 83% of the time and steps average 10.5 tokens, which
    # alone reads like an 11-token budget; but Little's law says 2.008 ran all along
    capped = dataclasses.replace(
        cap_window(peak=2, share=0.27, little=2.0079),
        waiting=13.6,
        tokens_per_step=10.56,
        prefilling=0.833,
    )
    assert capped.held_exactly
    inferred = infer_max_num_seqs(capped, 524288)
    assert inferred is not None and inferred.value == 2, capped
    assert infer_max_num_batched_tokens(capped) is None
    # a budget's running count moves (Little's mean between whole numbers): a budget
    budgeted = dataclasses.replace(capped, running_peak=3, running_little=2.4, tokens_per_step=60)
    assert not budgeted.held_exactly
    assert infer_max_num_seqs(budgeted, 524288) is None
    budget = infer_max_num_batched_tokens(budgeted)
    assert budget is not None and budget.value == 64, budget


def test_a_budget_a_short_window_read_is_dropped_once_the_cap_holds_running_exactly() -> None:
    inferences = Inferences()
    inferences.settings["max_num_batched_tokens"] = Setting(11, "inferred: steps carried 10")
    capped = dataclasses.replace(
        cap_window(peak=2, share=0.27, little=2.0079), tokens_per_step=10.56, prefilling=0.833
    )
    inferences._drop_contradicted([capped])
    assert "max_num_batched_tokens" not in inferences.settings
    moving = dataclasses.replace(capped, running_little=1.69)  # a budget's count moves
    inferences.settings["max_num_batched_tokens"] = Setting(64, "inferred: steps carried 64")
    inferences._drop_contradicted([moving])
    assert "max_num_batched_tokens" in inferences.settings


def test_a_budget_s_mean_step_measured_a_little_high_is_read_as_its_power_of_two() -> None:
    # a real 64-token budget on a busy 2-core host: steps counted by the mean ITL read 68.7
    window = dataclasses.replace(
        cap_window(peak=2, share=0.67, little=1.69), tokens_per_step=68.7, prefilling=1.1
    )
    budget = infer_max_num_batched_tokens(window)
    assert budget is not None and budget.value == 64, budget
