"""A finding's alternative fixes ranked by what the model predicts each does: the best first by
the finding's target figure, among those that keep at least 90% of the throughput."""

from __future__ import annotations

from dataclasses import dataclass

from vtop.core.config.server_config import ServerConfig
from vtop.core.rules.engine import Finding, ProposedChange
from vtop.core.session.diagnose import Diagnosis
from vtop.core.session.session import Session
from vtop.core.store.store import Store
from vtop.core.whatif.calibrate import CannotModelError
from vtop.core.whatif.predict import FLAGS, Calibration, calibrate, context_unpriced, predict
from vtop.core.whatif.profile import StepProfiles

TARGET_FIGURE = {"memory": "preemptions_per_s", "queue": "waiting", "latency": "ttft_p50_s"}
"""What a finding of each phase wants down; others aim at TTFT p50."""
KEPT_THROUGHPUT = 0.9
EXTRAPOLATED = 1.5


@dataclass(frozen=True)
class RankedChange:
    """One alternative with its predicted figures."""

    change: ProposedChange
    predicted: dict[str, float | None]
    keeps_throughput: bool
    extrapolated: bool = False
    """It runs batches half again larger than any the fitted slices showed: the step time
    there is the model's extrapolation, not a measurement."""
    context_unpriced: tuple[float, float] | None = None
    """The tokens held in the KV cache in the replay and after the change, where the change
    moves them and no cost per token of context was identified (predict.context_unpriced)."""


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
        per_engine = (figures.get("running") or 0.0) / max(calibration.fit.engines, 1)
        beyond = per_engine > EXTRAPOLATED * max(calibration.fit.step.largest_batch, 1.0)
        kept = tokens >= KEPT_THROUGHPUT * before
        moved = context_unpriced(calibration.fit, calibration.replay, figures)
        ranked.append(RankedChange(change, figures, kept, beyond, moved))
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
    headline: str | None = None
    """The finding's first change, as the action line and the report's PRIMARY show it."""

    @property
    def headline_rank(self) -> int | None:
        """Where the headline change ranks (0: best), None when the model did not rank it."""
        flags = [ranked.change.as_flag() for ranked in self.ranked]
        return flags.index(self.headline) if self.headline in flags else None


def primary_predictions(
    session: Session, diagnosis: Diagnosis, profiles: StepProfiles | None = None
) -> PrimaryPredictions | None:
    """Predictions for the primary finding's changes on the window the session judged (None
    when there is no primary finding with a change the model knows)."""
    triage = diagnosis.triage
    primary = None if triage is None else triage.primary
    if primary is None or not any(c.flag in FLAGS for c in primary.changes):
        return None
    state = session.targets.get(diagnosis.target)
    if state is None or session.now is None or diagnosis.window_s <= 0:
        return PrimaryPredictions(
            primary.key, target_figure(primary), [], {}, "no window to calibrate on"
        )
    window = max(diagnosis.window_s, 1.0)
    store, target, config = session.store, diagnosis.target, state.config
    return finding_predictions(store, target, session.now, window, config, primary, profiles)


def finding_predictions(
    store: Store,
    target: str,
    now: float,
    window_s: float,
    server: ServerConfig,
    finding: Finding,
    profiles: StepProfiles | None = None,
) -> PrimaryPredictions:
    """A finding's alternatives ranked on the store's window, or why the model gives none."""
    figure = target_figure(finding)
    headline = next((text for c in finding.changes if (text := c.as_flag()) is not None), None)
    try:
        calibration = calibrate(store, target, now, window_s, server, profiles=profiles)
    except CannotModelError as error:
        return PrimaryPredictions(finding.key, figure, [], {}, str(error), headline)
    if calibration.misses:
        reason = "the replay of the current config misses " + "; ".join(calibration.misses)
        return PrimaryPredictions(finding.key, figure, [], calibration.replay, reason, headline)
    ranked = rank(finding, calibration)
    return PrimaryPredictions(finding.key, figure, ranked, calibration.replay, None, headline)
