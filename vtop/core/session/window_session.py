"""The window judge: a one-shot triage's session. Every frame of the window goes in first; then
each point is judged in time order, knowing from its first point what the whole window lets
vtop infer (live, an inference arrives only once the window behind it has been seen)."""

from __future__ import annotations

from collections import deque

from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.config.server_config import ServerConfig
from vtop.core.frame import Frame
from vtop.core.rules.rule import Rule
from vtop.core.session.session import FLEET_TARGET, MARKS_KEPT, JudgePoint, Session, TargetView
from vtop.core.session.unjudged import LENGTHEN_MARGIN_S
from vtop.core.store.store import DEFAULT_CAPACITY


class WindowSession(Session):
    """Ingests a window's frames, keeping each point to judge; `judge_window` judges them."""

    def __init__(
        self,
        rules: list[Rule],
        options: DiagnoseOptions,
        store_capacity: int = DEFAULT_CAPACITY,
        alerts: bool = False,
    ) -> None:
        super().__init__(rules, options, store_capacity=store_capacity, alerts=alerts)
        self.points: list[JudgePoint] = []

    def point_reached(self, view: TargetView, point: JudgePoint) -> None:
        """Kept for `judge_window`; what the window shows so far feeds the inferences."""
        if not point.alternating:
            self.with_inferences(view, point.timestamp, point.base_config)
        self.points.append(point)

    def fleet_point_reached(self, now: float) -> None:
        """Kept for `judge_window`."""
        self.points.append(JudgePoint(now, FLEET_TARGET, ServerConfig()))

    def judge_window(self) -> None:
        """Judge the points in time order, each target knowing from its first point the
        settings its whole window let vtop infer. The store holds every frame already; each
        point reads it as of its own time."""
        seeds = {name: dict(view.inferences.settings) for name, view in self.targets.items()}
        for name, view in self.targets.items():
            view.inferences.clear()
            view.inferences.settings.update(seeds[name])
        for point in self.points:
            if point.target == FLEET_TARGET:
                self.judge_fleet(point.timestamp)
                continue
            view = self.targets[point.target]
            if point.restarted:
                view.inferences.clear()
            self.judge(view, point)
        self.points.clear()
        self.marks = deque(sorted(self.marks, key=lambda m: m.timestamp), maxlen=MARKS_KEPT)


def judged_window(
    frames: list[Frame], rules: list[Rule], options: DiagnoseOptions, alerts: bool = False
) -> WindowSession:
    """A session that ingested the frames once and then judged them in order, each point
    knowing what the whole window lets vtop infer (a one-shot triage judges the window as a
    whole). The store keeps every frame: each point is judged on the store as of its time.
    With `alerts`, the findings are the frames' ALERTS (judged in Prometheus)."""
    session = WindowSession(rules, options, max(DEFAULT_CAPACITY, len(frames)), alerts)
    if len(frames) >= 2:
        hold_cap_s = one_shot_hold_s(frames[-1].timestamp - frames[0].timestamp)
        session.engine.hold_cap_s = hold_cap_s
        if session.vtop_made is not None:
            session.vtop_made.hold_cap_s = hold_cap_s
    for frame in frames:
        session.ingest(frame)
    session.judge_window()
    return session


def one_shot_hold_s(span_s: float) -> float:
    """The longest hold a one-shot window of `span_s` seconds asks of a rule: its `for:`
    where the window leaves room for it (a 15 s window judges a 10 s hold as live), else the
    larger of half the window and the window less the margin, so a condition that held through
    most of a short window (`--window 3` on a storm) is judged rather than left pending. Never
    under MIN_HOLD_S: one changed delta is not a condition that holds."""
    return max(span_s / 2, span_s - LENGTHEN_MARGIN_S, MIN_HOLD_S)


MIN_HOLD_S = 2.0
"""The shortest hold a one-shot window accepts (two scrapes' deltas at the default 1 s)."""
