"""The dashboard's actions on findings and on the server vtop manages: explain, bundle, apply
(the core's one apply -> verify -> roll back, measured on the server's own traffic), restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.screen import Screen

from vtop.core.config.settings import Settings
from vtop.core.frame import Event, Frame
from vtop.core.ingest.bundle import BundleContents, write_bundle
from vtop.core.ingest.feeds import Feed
from vtop.core.manage.apply import Applied, apply_and_verify, switch
from vtop.core.manage.audit import audit
from vtop.core.manage.flag_edits import apply_change, argv_diff
from vtop.core.manage.process import ProcessError
from vtop.core.manage.verdict import Measurement, comparison_lines, measure
from vtop.core.ops.rank import PrimaryPredictions, finding_predictions, target_figure
from vtop.core.process_state import ServerState, state_dir
from vtop.core.rules.engine import Finding, ProposedChange
from vtop.core.session.session import Session, TargetState, short_key
from vtop.core.whatif.predict import FLAGS, ChangePrediction, predict_change
from vtop.core.whatif.profile import ProfileError, StepProfiles
from vtop.text.report import json_report
from vtop.text.whatif import text_predictions
from vtop.ui.explain import current_diagnosis, explain
from vtop.ui.screens.confirm import ConfirmScreen
from vtop.ui.screens.text_screen import TextScreen
from vtop.ui.state import Shown
from vtop.ui.widgets.findings import FindingsPanel

MODEL_WINDOW_S = 120.0
"""The most history the scheduler model calibrates on in the dashboard."""
DRAIN_TIMEOUT_S = 30.0


class Actions(App[int]):
    """The dashboard's actions (VtopApp's base, so app.py stays the data spine); the
    attributes are VtopApp's."""

    settings: Settings
    session: Session
    feed: Feed
    server: ServerState | None
    readonly: bool
    vllm_pids: frozenset[int]
    clock: Callable[[], float]
    shown: Shown | None

    @property
    def dashboard(self) -> Screen[object] | None:
        """The screen with the panels (also while a help or explain screen is on top)."""
        return self.screen_stack[0] if self.screen_stack else None

    @property
    def target(self) -> TargetState | None:
        """The endpoint on screen."""
        return self.shown.target if self.shown is not None else None

    def action_explain(self) -> None:
        """The highlighted finding in full."""
        finding = self.query_one(FindingsPanel).selected if self.dashboard is self.screen else None
        if finding is None:
            self.notify("no finding to explain", timeout=2)
            return
        title = f"{short_key(finding)}: {finding.rule.title}"
        body = explain(finding, self.target.config if self.target else None)
        predictions = self.alternatives(finding)
        if predictions is not None:
            body += "\n\n" + text_predictions(predictions)
        self.push_screen(TextScreen(title, body))

    def alternatives(self, finding: Finding) -> PrimaryPredictions | None:
        """The finding's changes ranked by the scheduler model (None: none it knows)."""
        target, now = self.target, self.session.now
        if target is None or now is None or not any(c.flag in FLAGS for c in finding.changes):
            return None
        try:
            profiles = StepProfiles.default()
        except ProfileError as error:
            return PrimaryPredictions(finding.key, target_figure(finding), [], {}, str(error))
        window = self.model_window(now)
        store = self.session.store
        return finding_predictions(
            store, target.target, now, window, target.config, finding, profiles
        )

    def model_window(self, now: float) -> float:
        """The model calibrates on the session's history, up to two minutes of it."""
        store = self.session.store
        seen = now - store.time_of(store.oldest_tick) if store.tick >= 0 else 0.0
        return max(min(seen, MODEL_WINDOW_S), self.settings.window_s)

    def action_bundle(self) -> None:
        """Write an incident bundle of the recent frames (in a thread: it compresses)."""
        target = self.target
        if target is None:
            self.notify("no data to bundle yet", timeout=2)
            return
        events = [m for m in self.session.marks if m.target == target.target]
        diagnosis = current_diagnosis(target, self.settings.window_s, events)
        contents = BundleContents(
            json_report(diagnosis),
            tuple(self.session.startup_log),
            self.settings.vllm_args,
            target.config.facts.version,
        )
        name = time.strftime("vtop-bundle-%Y%m%d-%H%M%S.tar.gz")
        path = Path(self.settings.bundle_dir) / name
        frames = list(self.session.recent_frames)
        self.run_worker(lambda: _write(self, path, frames, contents), thread=True, group="bundle")

    def managed_server(self) -> ServerState | None:
        """The server vtop may act on, or None with the reason shown."""
        if self.server is None:
            self.notify(
                "vtop did not start this server (`vtop serve`): nothing to apply", timeout=4
            )
            return None
        if self.readonly:
            self.notify("read-only: actions are disabled", timeout=3)
            return None
        return self.server

    def chosen_change(self) -> tuple[Finding, ProposedChange] | None:
        """The highlighted finding and its first change with a computable value."""
        finding = self.query_one(FindingsPanel).selected
        changes = [c for c in finding.changes if c.as_flag() is not None] if finding else []
        if finding is None or not changes:
            self.notify("no finding with a computable flag change is highlighted", timeout=3)
            return None
        return finding, changes[0]

    def action_apply(self) -> None:
        """Apply the highlighted finding's change to the managed server, verify, roll back."""
        self.run_worker(self._apply(), group="apply", exclusive=True)

    async def _apply(self) -> None:
        """Confirm the argv diff, then the one apply flow on the server's own traffic."""
        server, chosen = self.managed_server(), self.chosen_change()
        if server is None or chosen is None:
            return
        finding, change = chosen
        diff = argv_diff(server.argv, apply_change(server.argv, change))
        predicted = self.predict(change)
        question = "\n".join(
            [
                *diff,
                "",
                f"why: {change.why}",
                f"expected: {change.effect}",
                f"predicted: {prediction_text(predicted)}",
            ]
        )
        if not await self.push_screen_wait(ConfirmScreen(f"apply {finding.rule.id}?", question)):
            return
        before = self.measure_now()
        await self.drain()
        result = await apply_and_verify(
            server,
            finding,
            change,
            before,
            self.measure_after,
            state_dir(),
            self.tell,
            self.follow,
            predicted=predicted,
        )
        self.push_screen(TextScreen("apply: before / after", "\n".join(result_lines(result))))

    def predict(self, change: ProposedChange) -> ChangePrediction:
        """The scheduler model's prediction for the change, on the session's last window."""
        target = self.target
        if target is None or self.session.now is None:
            return ChangePrediction(None, "no window to calibrate on")
        store, now = self.session.store, self.session.now
        window = self.model_window(now)
        try:
            profiles = StepProfiles.default()
        except ProfileError as error:
            return ChangePrediction(None, str(error))
        return predict_change(store, target.target, now, window, target.config, change, profiles)

    def measure_now(self) -> Measurement:
        """The last window of the session."""
        target, now = self.target, self.session.now or time.time()
        name = target.target if target is not None else ""
        return measure(self.session.store, name, now, self.settings.window_s)

    async def measure_after(self, _state: ServerState) -> Measurement:
        """Let one window of traffic pass on the restarted server, then measure it."""
        interval = self.feed.status(self.clock()).interval_s
        await asyncio.sleep(self.settings.window_s + interval)
        return self.measure_now()

    async def drain(self) -> None:
        """Wait until nothing is running (or the drain timeout passes)."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while time.monotonic() < deadline:
            target = self.target
            summary = target.summary if target is not None else None
            if summary is None or not summary.running:
                return
            await asyncio.sleep(self.feed.status(self.clock()).interval_s)

    def tell(self, event: Event) -> None:
        """An "applied" / "rollback" event: a mark on the charts, and into a recording."""
        self.feed.note(event)
        self.notify(f"{event.kind}: {event.message}", timeout=5)

    def follow(self, state: ServerState) -> None:
        """Watch the restarted server (new pid, same URL and log)."""
        self.server = state
        self.feed.follow(state)
        self.vllm_pids = frozenset({state.pid})

    def action_restart(self) -> None:
        """Restart the managed server with the same flags (after confirmation)."""
        self.run_worker(self._restart(), group="restart", exclusive=True)

    async def _restart(self) -> None:
        server = self.managed_server()
        if server is None:
            return
        if not await self.push_screen_wait(ConfirmScreen("restart vLLM?", " ".join(server.argv))):
            return
        audit(state_dir(), "restart", server=server.name, argv=server.argv)
        try:
            await switch(server, list(server.argv), state_dir(), self.follow)
        except ProcessError as error:
            self.notify(f"restart failed: {error}", timeout=8, severity="error")
            return
        self.notify("vLLM is ready again", timeout=5)


def prediction_text(predicted: ChangePrediction) -> str:
    """One line: the model's figures, or why it gives none."""
    if predicted.figures is None:
        return f"none ({predicted.reason})"
    figures = predicted.figures
    parts = [
        f"{label} {'-' if figures.get(key) is None else form.format(figures[key])}"
        for key, label, form in (
            ("preemptions_per_s", "preemptions/s", "{:.2f}"),
            ("generation_tokens_per_s", "tokens/s", "{:.0f}"),
            ("ttft_p50_s", "TTFT p50", "{:.2f} s"),
        )
    ]
    return ", ".join(parts)


def result_lines(result: Applied) -> list[str]:
    """Before/after side by side, the model's prediction, and what vtop did."""
    lines = [*result.diff, ""]
    if result.predicted is not None:
        lines += [f"predicted: {prediction_text(result.predicted)}", ""]
    if result.after is not None:
        lines += comparison_lines(result.before, result.after)
    else:
        lines.append("no measurement after")
    reason = result.verdict.reason if result.verdict is not None else result.problem
    outcome = "change kept" if result.kept else "rolled back to the previous flags"
    return [*lines, "", reason, outcome]


def _write(app: App[int], path: Path, frames: list[Frame], contents: BundleContents) -> None:
    """Thread worker: write the bundle, then say where it is."""
    write_bundle(path, frames, contents)
    app.call_from_thread(app.notify, f"bundle written: {path}", timeout=8)
