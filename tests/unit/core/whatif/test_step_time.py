"""The step-time fit (what a window's slices identify, what earlier windows add) and the
profile file that keeps those windows."""

from __future__ import annotations

import json
import random
import stat
from pathlib import Path

import pytest

from vtop.core.whatif.profile import KEPT_WINDOWS, ProfileError, StepProfiles
from vtop.core.whatif.scheduler import EngineConfig, StepCost, Workload, simulate
from vtop.core.whatif.step_time import StepPoint, fit_step_cost

TRUE = StepCost(0.0036, 0.0001, 0.0018)
"""A step of a CPU build: 3.6 ms, 0.1 ms per token, 1.8 ms per request."""


def slices(requests: float, tokens: float, count: int = 6, seed: int = 0) -> list[StepPoint]:
    """Slices of one steady load: the true step time within 2% noise."""
    rng = random.Random(seed)
    return [
        StepPoint(requests, tokens, _step(requests, tokens) * rng.uniform(0.98, 1.02))
        for _ in range(count)
    ]


def _step(requests: float, tokens: float) -> float:
    return TRUE.fixed_s + TRUE.per_sequence_s * requests + TRUE.per_token_s * tokens


def test_one_batch_size_identifies_nothing_but_the_constant() -> None:
    fit = fit_step_cost(slices(2, 2.2))
    assert fit.terms == () and fit.cost.per_sequence_s == 0 and fit.cost.per_token_s == 0
    assert fit.cost.fixed_s == pytest.approx(_step(2, 2.2), rel=0.03)
    assert fit.error < 0.02 and fit.earlier_points == 0 and fit.largest_batch == 2


def test_earlier_windows_of_other_batches_identify_the_cost_per_request_and_per_token() -> None:
    earlier = [slices(4.4, 12, seed=1), slices(2.3, 64, seed=2), slices(8, 8.5, seed=3)]
    fit = fit_step_cost(slices(2, 2.2), earlier)
    assert set(fit.terms) == {"per request", "per token"}
    assert fit.cost.per_sequence_s == pytest.approx(TRUE.per_sequence_s, rel=0.15)
    assert fit.cost.per_token_s == pytest.approx(TRUE.per_token_s, rel=0.25)
    assert fit.earlier_points == 18 and fit.largest_batch == 8
    assert fit.error < 0.05


def test_a_part_only_one_window_pins_down_is_not_fitted() -> None:
    """Three windows of three batches determine a fixed part, a cost per request and one per
    token exactly, whatever the step costs: without a fourth, only one part is fitted."""
    earlier = [slices(4.4, 12, seed=1), slices(2.3, 64, seed=2)]
    fit = fit_step_cost(slices(2, 2.2), earlier)
    assert len(fit.terms) <= 1
    noisy = [[StepPoint(p.requests, p.tokens, p.seconds * 1.3) for p in earlier[0]], earlier[1]]
    assert len(fit_step_cost(slices(2, 2.2), noisy).terms) <= 1


def test_earlier_windows_that_disagree_with_the_window_are_left_out() -> None:
    slower_host = [StepPoint(p.requests, p.tokens, 3 * p.seconds) for p in slices(8, 8.5)]
    fit = fit_step_cost(slices(2, 2.2), [slower_host])
    assert fit.earlier_points == 0 and fit.terms == ()
    agreeing = [slices(4.4, 12, seed=1), slices(2.3, 64, seed=2), slices(8, 8.5, seed=3)]
    fit = fit_step_cost(slices(2, 2.2), [*agreeing, slower_host])
    assert fit.earlier_points == 18 and fit.cost.per_token_s > 0


def test_tokens_and_requests_that_move_together_are_not_told_apart() -> None:
    window = slices(2, 2) + slices(4, 4, seed=1) + slices(8, 8, seed=2)
    fit = fit_step_cost(window)
    assert len(fit.terms) == 1 and fit.error < 0.05


def test_a_cost_per_request_makes_more_sequences_less_than_proportionally_faster() -> None:
    workload = Workload(256, 32, clients=16)
    two = simulate(EngineConfig(2, 8192, 100_000, 16), workload, TRUE, 60)
    eight = simulate(EngineConfig(8, 8192, 100_000, 16), workload, TRUE, 60)
    ratio = eight.generation_tokens_per_s / two.generation_tokens_per_s
    constant = StepCost(two.seconds / max(two.steps, 1), 0.0)
    flat = simulate(EngineConfig(8, 8192, 100_000, 16), workload, constant, 60)
    assert 1.3 < ratio < 2.5 < flat.generation_tokens_per_s / two.generation_tokens_per_s


def test_the_profile_keeps_windows_privately_and_drops_overlaps(tmp_path: Path) -> None:
    path = tmp_path / "state" / "step-profiles.json"
    profiles = StepProfiles.read(path)
    profiles.add("127.0.0.1 tiny tp=1", 100.0, 30.0, slices(2, 2.2))
    profiles.add("127.0.0.1 tiny tp=1", 110.0, 30.0, slices(2, 2.2))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = StepProfiles.read(path)
    assert [len(w) for w in again.earlier("127.0.0.1 tiny tp=1", 150.0, 30.0)] == [6]
    assert again.earlier("127.0.0.1 tiny tp=1", 120.0, 30.0) == []  # the window itself
    assert again.earlier("127.0.0.1 tiny tp=1", 100.0 + 31 * 86400, 30.0) == []
    for index in range(KEPT_WINDOWS + 5):
        again.add("127.0.0.1 tiny tp=1", 1000.0 + 100 * index, 30.0, slices(2, 2.2))
    assert len(StepProfiles.read(path).profiles["127.0.0.1 tiny tp=1"]) == KEPT_WINDOWS


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ('{"a": [\n  {"time": 1,\n  "points": [[1, 2, }', ":3:"),
        ("[1, 2]", ":1:"),
        ('{"k": [{"time": 1, "points": [[1, 2, -3]]}]}', "'k'"),
        ('{"k": [{"time": 1, "points": [[1, NaN, 3]]}]}', "'k'"),
    ],
)
def test_a_damaged_profile_is_an_error_naming_the_file_and_line(
    tmp_path: Path, content: str, where: str
) -> None:
    path = tmp_path / "step-profiles.json"
    path.write_text(content)
    with pytest.raises(ProfileError) as raised:
        StepProfiles.read(path)
    assert str(path) in str(raised.value) and where in str(raised.value)


def test_the_profile_file_is_json_a_person_can_read(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    StepProfiles.read(path).add("h m tp=1", 5.0, 5.0, [StepPoint(2, 3, 0.01)])
    assert json.loads(path.read_text()) == {"h m tp=1": [{"time": 5.0, "points": [[2, 3, 0.01]]}]}


def test_a_profile_that_cannot_be_written_is_said_and_does_not_stop_the_fit(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the state directory should be\n")
    with pytest.raises(ProfileError, match="cannot read"):
        StepProfiles.read(blocker / "step-profiles.json")
    profiles = StepProfiles(blocker / "step-profiles.json")
    profiles.add("h m tp=1", 5.0, 5.0, [StepPoint(2, 3, 0.01)])
    assert profiles.write_error is not None and str(blocker) in profiles.write_error
    assert [len(w) for w in profiles.earlier("h m tp=1", 50.0, 5.0)] == [1]


CONTEXT = StepCost(0.004, 0.0001, 0.0005, 0.000004)
"""A step whose attention reads every held token: 4 us per token of context."""


def context_slices(
    requests: float, tokens: float, context: float, count: int = 6, seed: int = 0
) -> list[StepPoint]:
    """Slices of one steady load that holds `context` tokens in the KV cache (2% noise)."""
    rng = random.Random(seed)
    return [
        StepPoint(
            requests,
            tokens,
            _context_step(requests, tokens, context) * rng.uniform(0.98, 1.02),
            context,
        )
        for _ in range(count)
    ]


def _context_step(requests: float, tokens: float, context: float) -> float:
    return (
        CONTEXT.fixed_s
        + CONTEXT.per_sequence_s * requests
        + CONTEXT.per_token_s * tokens
        + CONTEXT.per_context_token_s * context
    )


LONG_CONTEXTS = [
    context_slices(2, 2.4, 1600, seed=1),
    context_slices(2.2, 64, 1700, seed=2),
    context_slices(8, 9, 900, seed=3),
    context_slices(4, 5, 500, seed=5),
    context_slices(2, 30, 600, seed=6),
]
"""Earlier windows: two at 800-token contexts (one at a 64-token budget), three of shorter
requests."""


def test_windows_at_other_contexts_identify_the_cost_per_token_of_context() -> None:
    window = context_slices(1.2, 1.5, 150)
    assert fit_step_cost(window).terms == ()
    fit = fit_step_cost(window, LONG_CONTEXTS)
    assert "per token of context" in fit.terms and fit.earlier_points == 30
    assert fit.cost.per_context_token_s == pytest.approx(CONTEXT.per_context_token_s, rel=0.25)
    assert fit.error < 0.05


def test_without_the_context_long_contexts_inflate_the_cost_per_token() -> None:
    """Windows that do not say their context charge a long request's attention to its tokens:
    a short prompt's prefill is then simulated far too slow (a light load's TTFT too high)."""
    short = context_slices(1.2, 1.5, 150, seed=4)
    seeing = fit_step_cost(short, LONG_CONTEXTS)
    blind = fit_step_cost(
        [StepPoint(p.requests, p.tokens, p.seconds) for p in short],
        [[StepPoint(p.requests, p.tokens, p.seconds) for p in w] for w in LONG_CONTEXTS],
    )
    assert blind.cost.per_token_s > 1.5 * CONTEXT.per_token_s
    assert seeing.cost.per_token_s == pytest.approx(CONTEXT.per_token_s, rel=0.25)
    prefill = _context_step(1, 512, 512)
    assert seeing.cost.seconds(512, 1, 512) == pytest.approx(prefill, rel=0.15)
    assert blind.cost.seconds(512, 1) > 1.5 * prefill


def test_a_context_cost_makes_long_requests_step_slower_in_the_simulation() -> None:
    cost = StepCost(0.002, 0.0, 0.0, 0.000002)
    config = EngineConfig(1, 8192, 1000, 16)
    short = simulate(config, Workload(100, 100, clients=1, spread=0.0), cost, 60)
    long = simulate(config, Workload(1000, 100, clients=1, spread=0.0), cost, 60)
    # a decode at about 1,150 held tokens against 250: (2 + 2.3) ms against (2 + 0.5) ms
    ratio = long.generation_tokens_per_s / short.generation_tokens_per_s
    assert 2.5 / 4.3 * 0.85 < ratio < 2.5 / 4.3 * 1.1
    flat = StepCost(0.002, 0.0)
    same = simulate(config, Workload(1000, 100, clients=1, spread=0.0), flat, 60)
    assert same.generation_tokens_per_s == pytest.approx(
        simulate(
            config, Workload(100, 100, clients=1, spread=0.0), flat, 60
        ).generation_tokens_per_s,
        rel=0.05,
    )


def test_the_profile_keeps_each_slice_context_and_reads_windows_kept_without_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "p.json"
    StepProfiles.read(path).add("h m tp=1", 5.0, 5.0, [StepPoint(2, 3, 0.01, 700.0)])
    assert json.loads(path.read_text())["h m tp=1"][0]["points"] == [[2, 3, 0.01, 700.0]]
    path.write_text('{"h m tp=1": [{"time": 5, "points": [[2, 3, 0.01]]}]}')
    (kept,) = StepProfiles.read(path).earlier("h m tp=1", 50.0, 5.0)
    assert kept == (StepPoint(2, 3, 0.01, None),)
