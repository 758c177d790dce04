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


def test_earlier_windows_that_disagree_with_the_window_are_left_out() -> None:
    slower_host = [StepPoint(p.requests, p.tokens, 3 * p.seconds) for p in slices(8, 8.5)]
    fit = fit_step_cost(slices(2, 2.2), [slower_host])
    assert fit.earlier_points == 0 and fit.terms == ()
    agreeing = [slices(4.4, 12, seed=1), slices(2.3, 64, seed=2)]
    fit = fit_step_cost(slices(2, 2.2), [*agreeing, slower_host])
    assert fit.earlier_points == 12 and fit.cost.per_token_s > 0


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
