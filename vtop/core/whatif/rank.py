"""A finding's alternative fixes ranked by what the model predicts each does: the best first by
the finding's target figure, among those that keep at least 90% of the throughput."""

from __future__ import annotations

from dataclasses import dataclass

from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.frame import Frame
from vtop.core.rules.engine import Finding, ProposedChange
from vtop.core.rules.rule import Rule
from vtop.core.session.diagnose import Diagnosis, judged_window
from vtop.core.whatif.calibrate import CannotModelError
from vtop.core.whatif.predict import FLAGS, Calibration, calibrate, predict

TARGET_FIGURE = {"memory": "preemptions_per_s", "queue": "waiting", "latency": "ttft_p50_s"}
"""What a finding of each phase wants down; others aim at TTFT p50."""
KEPT_THROUGHPUT = 0.9


@dataclass(frozen=True)
class RankedChange:
    """One alternative with its predicted figures."""

    change: ProposedChange
    predicted: dict[str, float | None]
    keeps_throughput: bool


def target_figure(finding: Finding) -> str:
    """The figure the finding's fixes are judged by."""
    return TARGET_FIGURE.get(finding.rule.phase, "ttft_p50_s")


def rank(finding: Finding, calibration: Calibration) -> list[RankedChange]:
    """The finding's numeric changes the model knows, predicted and ordered best first (none
    when the replay did not reproduce the window)."""
    if calibration.misses:
        return []
    figure = target_figure(finding)
    before = calibration.replay.get("generation_tokens_per_s") or 0.0
    ranked = []
    for change in finding.changes:
        if change.flag not in FLAGS or not isinstance(change.proposed, float | int):
            continue
        figures = predict(calibration, {change.flag: float(change.proposed)})
        tokens = figures.get("generation_tokens_per_s") or 0.0
        ranked.append(RankedChange(change, figures, tokens >= KEPT_THROUGHPUT * before))
    return sorted(
        ranked,
        key=lambda r: (not r.keeps_throughput, _or_inf(r.predicted.get(figure))),
    )


def _or_inf(value: float | None) -> float:
    return float("inf") if value is None else value


@dataclass(frozen=True)
class PrimaryPredictions:
    """The primary finding's alternatives ranked, or why the model gave none."""

    finding_key: str
    figure: str
    ranked: list[RankedChange]
    replay: dict[str, float | None]
    reason: str | None = None


def primary_predictions(
    frames: list[Frame], rules: list[Rule], options: DiagnoseOptions, diagnosis: Diagnosis
) -> PrimaryPredictions | None:
    """Predictions for the primary finding's changes on the diagnosed window (None when there
    is no primary finding with a change the model knows)."""
    triage = diagnosis.triage
    primary = None if triage is None else triage.primary
    if primary is None or not any(c.flag in FLAGS for c in primary.changes):
        return None
    session = judged_window(frames, rules, options)
    state = session.targets.get(diagnosis.target)
    figure = target_figure(primary)
    if state is None or len(frames) < 2:
        return PrimaryPredictions(primary.key, figure, [], {}, "no window to calibrate on")
    now = frames[-1].timestamp
    window = max(now - frames[0].timestamp, 1.0)
    try:
        calibration = calibrate(session.store, diagnosis.target, now, window, state.config)
    except CannotModelError as error:
        return PrimaryPredictions(primary.key, figure, [], {}, str(error))
    if calibration.misses:
        reason = "the replay of the current config misses " + "; ".join(calibration.misses)
        return PrimaryPredictions(primary.key, figure, [], calibration.replay, reason)
    return PrimaryPredictions(primary.key, figure, rank(primary, calibration), calibration.replay)
