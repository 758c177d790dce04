"""The scheduler model: its mechanisms one by one, and the demo recording (a real vLLM storm
and the applied fix) as calibration and as prediction checked against what happened."""

from __future__ import annotations

import math

import pytest

from tests.support.demo import APPLIED, FRAMES
from tests.support.frames import TARGET, frame_from_text
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.config.inference import INFERRED
from vtop.core.config.server_config import ServerConfig, Setting
from vtop.core.frame import Frame
from vtop.core.rules.loader import load_rules
from vtop.core.session.session import Session
from vtop.core.session.window_session import judged_window
from vtop.core.whatif.calibrate import (
    UNBOUNDED_SEQS,
    CannotModelError,
    bucket_of,
    engine_config,
    inferred_settings,
    measure,
    misses,
    queue_held_by,
    refusal,
)
from vtop.core.whatif.predict import whatif
from vtop.core.whatif.scheduler import EngineConfig, StepCost, Workload, simulate
from vtop.text.whatif import json_whatif, text_whatif

COST = StepCost(0.01, 0.0001)
ROOMY = 100_000


def test_running_holds_at_max_num_seqs_and_the_rest_wait() -> None:
    outcome = simulate(EngineConfig(4, 8192, ROOMY, 16), Workload(100, 50, clients=10), COST, 60)
    assert outcome.running == pytest.approx(4, abs=0.05)
    assert outcome.waiting == pytest.approx(6, abs=0.1)
    assert outcome.preemptions_per_s == 0


def test_a_pool_smaller_than_the_admitted_work_preempts_and_fewer_sequences_stop_it() -> None:
    workload = Workload(100, 200, clients=24)
    storm = simulate(EngineConfig(16, 2048, 7, 128), workload, COST, 60)
    fixed = simulate(EngineConfig(2, 2048, 7, 128), workload, COST, 60)
    assert storm.preemptions_per_s > 0.5
    assert fixed.preemptions_per_s == 0
    roomy = simulate(EngineConfig(16, 2048, 64, 128), workload, COST, 60)
    assert roomy.preemptions_per_s == 0 and roomy.running > storm.running


def test_a_small_token_budget_chunks_prefills_and_slows_first_tokens() -> None:
    workload = Workload(2000, 20, clients=8)
    small = simulate(EngineConfig(8, 256, ROOMY, 16), workload, COST, 60)
    large = simulate(EngineConfig(8, 8192, ROOMY, 16), workload, StepCost(0.01, 0.0001), 60)
    small_p50, large_p50 = small.ttft_quantile(0.5), large.ttft_quantile(0.5)
    assert small_p50 is not None and large_p50 is not None and small_p50 > 1.5 * large_p50


def test_admission_reserves_the_whole_prompt() -> None:
    # one prompt needs 8 blocks; with 10 usable only one runs at a time, however many may
    outcome = simulate(
        EngineConfig(4, 8192, 10, 16), Workload(128, 4, spread=0.0, clients=4), COST, 30
    )
    assert outcome.running == pytest.approx(1, abs=0.05) and outcome.preemptions_per_s == 0


def test_an_open_loop_below_capacity_does_not_queue() -> None:
    outcome = simulate(
        EngineConfig(16, 8192, ROOMY, 16), Workload(50, 20, arrivals_per_s=2.0), COST, 120
    )
    assert outcome.waiting < 0.1
    assert outcome.requests_per_s == pytest.approx(2.0, rel=0.25)


def test_the_same_seed_gives_the_same_run() -> None:
    config, workload = EngineConfig(8, 512, 50, 16), Workload(300, 100, clients=12)
    first, again = (
        simulate(config, workload, COST, 30, seed=3),
        simulate(config, workload, COST, 30, seed=3),
    )
    assert first == again


def window(first: int, last: int) -> tuple[Session, str, float, float]:
    frames = FRAMES[first:last]
    session = judged_window(frames, load_rules(), DiagnoseOptions(read_gpus=False))
    target = frames[-1].scrapes[0].target
    now = frames[-1].timestamp
    return session, target, now, now - frames[0].timestamp


def test_the_demo_storm_is_reproduced_and_the_fix_predicted_as_it_happened() -> None:
    session, target, now, span = window(0, APPLIED - 5)
    config = session.targets[target].config
    prediction = whatif(session.store, target, now, span, config, {"--max-num-seqs": 1})
    assert prediction.misses == [] and prediction.predicted is not None
    predicted = prediction.predicted
    after, after_target, after_now, after_span = window(APPLIED + 25, len(FRAMES))
    measured = measure(after.store, after_target, after_now, after_span)
    assert predicted["preemptions_per_s"] == 0 and measured.preemptions_per_s == 0
    tokens, before = (
        predicted["generation_tokens_per_s"],
        prediction.replay["generation_tokens_per_s"],
    )
    measured_before = prediction.measured["generation_tokens_per_s"]
    assert tokens is not None and before is not None and measured_before is not None
    assert tokens < before and measured.generation_tokens_per_s < measured_before  # both halve
    assert tokens == pytest.approx(measured.generation_tokens_per_s, rel=0.3)


def gauge(frame: Frame, name: str) -> float:
    """One gauge of the frame's first scrape (0 where it is missing)."""
    values = [s.value for s in frame.scrapes[0].samples if s.series.name == name]
    return sum(values)


def loaded(first: int, last: int) -> tuple[int, int]:
    """The frames of [first, last) the load ran in: from the first with a request running to
    the last whose queue is still at four fifths of its height (the drain after it left out)."""
    frames = FRAMES[first:last]
    waiting = [gauge(f, "vllm:num_requests_waiting") for f in frames]
    start = next(i for i, f in enumerate(frames) if gauge(f, "vllm:num_requests_running") > 0)
    end = max(i for i, w in enumerate(waiting) if w >= 0.8 * max(waiting))
    return first + start, first + end + 1


def test_the_first_seconds_after_the_demo_fix_are_predicted_as_they_were_measured() -> None:
    """The window after the demo's restart is shorter than one turnover of the queue at one
    sequence: its requests waited only since the restart, so their TTFT is a fraction of the
    steady state's. The model predicts both, and the first seconds as measured."""
    storm, after = loaded(0, APPLIED), loaded(APPLIED + 1, len(FRAMES))
    session, target, now, span = window(*storm)
    after_session, after_target, after_now, after_span = window(*after)
    measured = measure(after_session.store, after_target, after_now, after_span)
    assert measured.waiting > 5 and measured.ttft_p50_s is not None, measured  # a queue after
    config = session.targets[target].config
    prediction = whatif(
        session.store, target, now, span, config, {"--max-num-seqs": 1}, after_restart_s=after_span
    )
    assert prediction.predicted is not None and prediction.after_restart is not None
    first, steady = prediction.after_restart["ttft_p50_s"], prediction.predicted["ttft_p50_s"]
    assert first is not None and steady is not None
    turnover = prediction.turnover_s
    assert turnover is not None and turnover > after_span, (turnover, after_span)
    assert first < steady / 2, (first, steady)
    assert first == pytest.approx(measured.ttft_p50_s, rel=0.25), (first, measured.ttft_p50_s)
    text = text_whatif(prediction)
    table = text.split("\n\n", 1)[1]
    assert f"first {after_span:.0f} s" in table and "turned over: about" in table
    assert all(len(line) <= 80 for line in table.splitlines()), table
    shown = json_whatif(prediction)["after_restart"]
    assert shown["seconds"] == after_span and shown["ttft_p50_s"] == first


def test_unknown_flags_and_windows_without_traffic_are_refused() -> None:
    session, target, now, span = window(0, APPLIED - 5)
    config = session.targets[target].config
    with pytest.raises(CannotModelError, match="does not know this flag"):
        whatif(session.store, target, now, span, config, {"--enforce-eager": 1})
    quiet, quiet_target, quiet_now, quiet_span = window(0, 3)
    with pytest.raises(CannotModelError):
        whatif(quiet.store, quiet_target, quiet_now, quiet_span, config, {})


@pytest.mark.parametrize(
    "counter",
    [
        'vllm:kv_offload_store_bytes_total{engine="0",model_name="m"}',
        'vllm:kv_offload_total_bytes_total{engine="0",transfer_type="GPU_to_CPU"}',
        'vllm:nixl_xfer_time_seconds_count{engine="0"}',
    ],
)
def test_a_kv_connector_moving_blocks_is_a_refusal_by_the_names_vllm_exports(counter: str) -> None:
    session = Session([], DiagnoseOptions(read_gpus=False))
    name = counter.split("{")[0]
    kind = "histogram" if name.endswith("_count") else "counter"
    family = name.removesuffix("_count").removesuffix("_total")
    for t in range(10):
        text = f"# TYPE {family} {kind}\n{counter} {1e6 * t}\n"
        session.ingest(frame_from_text(float(t), text))
    assert refusal(session.store, TARGET, 9.0, 9.0) == (
        "a KV connector (transfers or offload) is active, and the model does not capture it"
    )
    idle = Session([], DiagnoseOptions(read_gpus=False))
    for t in range(10):
        idle.ingest(frame_from_text(float(t), f"# TYPE {family} {kind}\n{counter} 5\n"))
    assert refusal(idle.store, TARGET, 9.0, 9.0) is None


def test_an_unknown_cap_that_never_held_a_request_back_is_taken_as_not_binding() -> None:
    known = {
        "kv_capacity_tokens": Setting(4096.0, "cache_config_info"),
        "block_size": Setting(16.0, "x"),
    }
    config = engine_config(ServerConfig(dict(known)), 1, waiting=0.0)
    assert config.max_num_seqs == UNBOUNDED_SEQS
    with pytest.raises(CannotModelError, match=r"max_num_seqs \(requests waited"):
        engine_config(ServerConfig(dict(known)), 1, waiting=3.0)
    inferred = ServerConfig({**known, "max_num_seqs": Setting(16.0, f"{INFERRED} (Little's law)")})
    assert engine_config(inferred, 1, waiting=3.0).max_num_seqs == 16
    assert inferred_settings(inferred) == ("max_num_seqs",)


def test_the_storm_known_by_url_alone_says_its_cap_is_inferred_or_why_none_binds() -> None:
    session, target, now, span = window(0, APPLIED - 5)
    config = session.targets[target].config
    settings = dict(config.settings)
    settings["max_num_seqs"] = Setting(settings["max_num_seqs"].value, f"{INFERRED} (test)")
    as_inferred = ServerConfig(settings, config.facts)
    prediction = whatif(session.store, target, now, span, as_inferred, {"--max-num-seqs": 1})
    assert "max-num-seqs 16 (inferred)" in text_whatif(prediction)
    assert json_whatif(prediction)["model"]["inferred"] == ["max_num_seqs"]
    del settings["max_num_seqs"]  # no cap at all: the storm's preemptions held the queue
    unknown = whatif(
        session.store,
        target,
        now,
        span,
        ServerConfig(settings, config.facts),
        {"--max-num-seqs": 1},
    )
    assert unknown.predicted is not None and unknown.predicted["preemptions_per_s"] == 0
    reason = json_whatif(unknown)["model"]["max_num_seqs_unbound_because"]
    assert reason == "requests were preempted, so the KV pool held the queue"
    assert f"max-num-seqs unknown ({reason}: taken as not binding)" in text_whatif(unknown)


def test_an_unknown_cap_is_not_binding_where_another_limit_holds_the_queue() -> None:
    """URL alone: with a queue, an unknown --max-num-seqs is a refusal unless the window shows
    what held the queue (preemptions or a full KV cache, steps at the budget)."""
    known = ServerConfig(
        {"kv_capacity_tokens": Setting(1024, "cache_config_info"), "block_size": Setting(128, "")}
    )
    with pytest.raises(CannotModelError, match="max_num_seqs"):
        engine_config(known, 1, waiting=5.0)
    held = engine_config(known, 1, waiting=5.0, held_by="the KV cache reached 97%")
    assert held.max_num_seqs == UNBOUNDED_SEQS
    session = Session([], DiagnoseOptions(read_gpus=False))
    for t in range(20):
        text = (
            "# TYPE vllm:request_queue_time_seconds histogram\n"
            f"vllm:request_queue_time_seconds_sum {5.0 * t}\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\n"
            f"vllm:kv_cache_usage_perc {0.97 if t % 2 else 0.6}\n"
        )
        session.ingest(frame_from_text(float(t), text))
    figures = measure(session.store, TARGET, 19.0, 19.0)
    reason = queue_held_by(session.store, TARGET, 19.0, 19.0, figures, known)
    assert reason == "the KV cache reached 97%, which held the queue"
    for t in range(20, 40):  # the same queue with the cache at 60%: nothing explains it
        text = (
            "# TYPE vllm:request_queue_time_seconds histogram\n"
            f"vllm:request_queue_time_seconds_sum {5.0 * t}\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 0.6\n"
        )
        session.ingest(frame_from_text(float(t), text))
    figures = measure(session.store, TARGET, 39.0, 19.0)
    assert queue_held_by(session.store, TARGET, 39.0, 19.0, figures, known) == ""


BOUNDS = [0.25, 0.5, 0.75, 1.0, 2.5, 5.0]
"""vLLM's TTFT buckets around a second."""


@pytest.mark.parametrize(
    ("exact", "missed"),
    [(1.05, False), (0.6, False), (1.24, False), (1.3, True), (0.5, True), (2.0, True)],
)
def test_a_ttft_replay_is_judged_against_the_bucket_the_server_measured_it_in(
    exact: float, missed: bool
) -> None:
    """A median of 0.875 s read from the buckets says only that it lies in 0.75-1 s. A replay
    at 1.05 s, read through the same buckets, reads 1.75 s (the middle of 1-2.5 s): judged on
    that it would be a miss of 2x where the model is 5% past what the server can tell."""
    measured = {"ttft_p50_s": 0.875}
    through_buckets = {"ttft_p50_s": 1.75 if exact > 1.0 else 0.875}
    found = misses(measured, through_buckets, {"ttft_p50_s": exact}, BOUNDS)
    assert bool(found) == missed, found
    if missed:
        assert "its bucket 0.75-1 s" in found[0]
    assert misses(measured, {"ttft_p50_s": 1.75}) != []  # read through the buckets alone


def test_figures_not_read_through_buckets_keep_their_tolerance() -> None:
    measured = {"generation_tokens_per_s": 84.8}
    exact = {"generation_tokens_per_s": 62.0}
    found = misses(measured, exact, exact, [40.0, 80.0, 160.0])
    assert found == ["generation_tokens_per_s 62 vs measured 84.8"]


def test_a_quantile_in_the_last_bucket_is_known_only_from_below() -> None:
    assert bucket_of(5.0, BOUNDS) == (2.5, math.inf)
    assert bucket_of(0.1, BOUNDS) == (0.0, 0.25)
    assert bucket_of(0.5, BOUNDS) == (0.25, 0.5)
    assert misses({"ttft_p50_s": 5.0}, {"ttft_p50_s": 5.0}, {"ttft_p50_s": 40.0}, BOUNDS) == []


def test_a_change_that_moves_the_context_held_says_so_where_no_cost_of_it_was_fitted() -> None:
    """The storm window identifies no cost per token of context; one sequence holds a third of
    its KV cache, so the report says its steps may run faster than predicted (they did)."""
    session, target, now, span = window(*loaded(0, APPLIED))
    config = session.targets[target].config
    prediction = whatif(session.store, target, now, span, config, {"--max-num-seqs": 1})
    assert "per token of context" not in prediction.fit.step.terms
    moved = prediction.context_unpriced
    assert moved is not None and moved[1] < moved[0] / 2, moved
    text = text_whatif(prediction)
    assert "may run faster than predicted" in " ".join(text.split())
    assert all(len(line) <= 80 for line in text.split("\n\n", 1)[1].splitlines())
    assert json_whatif(prediction)["context_unpriced"]["kv_tokens_predicted"] == moved[1]
    same = whatif(session.store, target, now, span, config, {"--max-num-seqs": 16})
    assert same.context_unpriced is None and "may run" not in text_whatif(same)
    whole, whole_target, whole_now, whole_span = window(0, len(FRAMES))
    fitted = whatif(
        whole.store,
        whole_target,
        whole_now,
        whole_span,
        whole.targets[whole_target].config,
        {"--max-num-seqs": 16},
    )
    assert "per token of context" in fitted.fit.step.terms and fitted.context_unpriced is None
