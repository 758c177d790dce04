"""The dashboard's actions on findings and on the server vtop manages: explain, bundle, apply
(the core's one apply -> verify -> roll back, measured on the server's own traffic), restart.

An object given what it acts on (the settings, the feed, the managed server, the session of the
moment) and the app's means to ask and tell (confirm, show, notify); the app's keys call it.
Every long action runs in a worker whose failure the app turns into a banner. The scheduler
model and the apply flow are imported by the actions that use them: a dashboard that only
watches never loads them (a megabyte of resident memory).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vtop.core.config.settings import Settings
from vtop.core.forensics.look import look_at
from vtop.core.frame import Event, EventKind, Frame
from vtop.core.ingest.bundle import BundleContents, write_bundle
from vtop.core.ingest.feeds import Feed
from vtop.core.ingest.open_feed import scrape_options
from vtop.core.ingest.sources.prometheus import PrometheusError
from vtop.core.manage.audit import audit
from vtop.core.manage.flag_edits import apply_change, argv_diff
from vtop.core.manage.process import ProcessError
from vtop.core.managed_server import ManagedServer, state_dir
from vtop.core.ops.drill_down import DRILL_WINDOW_S, evidence_for, evidence_of
from vtop.core.ops.process_evidence import stack_collectors
from vtop.core.rules.engine import Finding, ProposedChange
from vtop.core.session.diagnose import Diagnosis, diagnosis
from vtop.core.session.recent import expand
from vtop.core.session.session import READ_WHEN_ASKED_S, Session, TargetView, short_key
from vtop.text.report import json_report, text_report
from vtop.text.stacks import whereabouts_lines
from vtop.ui.explain import explain

if TYPE_CHECKING:
    from vtop.core.manage.apply import Applied
    from vtop.core.manage.verdict import Measurement
    from vtop.core.ops.rank import PrimaryPredictions
    from vtop.core.whatif.predict import ChangePrediction

MODEL_WINDOW_S = READ_WHEN_ASKED_S
"""The most history the scheduler model calibrates on in the dashboard (what the session's
store holds of every series it keeps long)."""
DRAIN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Ui:
    """How the actions talk to the person at the terminal (the app's own means)."""

    confirm: Callable[[str, str], Awaitable[bool]]
    """Ask a yes/no question (title, body)."""
    show: Callable[[str, str], None]
    """Show a block of text (title, body)."""
    notify: Callable[[str], None]
    """A short message that goes away."""
    in_thread: Callable[[Callable[[], None], str], None]
    """Run blocking work off the event loop (the app's worker, its failure a banner)."""


class DashboardActions:
    """What `e`, `d`, `b`, `w`, `a` and `r` do, for the target on screen, and the evidence a
    firing finding collects (`collect: [stacks]`)."""

    def __init__(
        self,
        settings: Settings,
        feed: Feed,
        server: ManagedServer | None,
        readonly: bool,
        ui: Ui,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.feed = feed
        self.server = server
        """The vLLM server vtop manages here (None when it only watches)."""
        self.readonly = readonly
        self.ui = ui
        self.clock = clock
        self.whereabouts: dict[str, list[str]] = {}
        """The last stacks read per server, as report lines (the stall's explanation shows them)."""
        self._collected: set[tuple[str, str, float]] = set()
        """(server, rule, since) of each firing whose stacks were taken: once per firing."""

    @property
    def vllm_pids(self) -> frozenset[int]:
        """The managed server's pid (its GPU users are marked in the GPU panel)."""
        return frozenset({self.server.pid}) if self.server is not None else frozenset()

    def explanation(self, session: Session, target: TargetView, finding: Finding) -> str:
        """The finding in full, with its changes ranked by the scheduler model."""
        from vtop.text.whatif import text_predictions

        body = explain(finding, target.config)
        if "stacks" in finding.rule.collect:
            seen = self.whereabouts.get(target.target, ["(stacks not read: press w)"])
            body = "\n".join([body, "", *seen])
        predictions = self.alternatives(session, target, finding)
        return body if predictions is None else f"{body}\n\n{text_predictions(predictions)}"

    def explain(self, session: Session, target: TargetView | None, finding: Finding | None) -> None:
        """`e`, Enter: the highlighted (else the primary) finding in full."""
        if finding is None or target is None:
            self.ui.notify("no finding to explain")
            return
        title = f"{short_key(finding)}: {finding.rule.title}"
        self.ui.show(title, self.explanation(session, target, finding))

    def diagnosis(self, session: Session, target: TargetView | None) -> None:
        """`d`: the `vtop diagnose` report of the target on screen, from the same function;
        judged in Prometheus, of its raw series pulled for the last minutes (off the event
        loop), so its findings come with their evidence and flag changes."""
        if target is None:
            self.ui.notify("no data yet")
            return
        name = target.target
        if self.settings.prometheus is None or not self.settings.findings_from_prometheus:
            self.ui.show(f"diagnosis of {name}", text_report(diagnosis(session, name)))
            return
        self.ui.notify(f"reading {name}'s raw series from Prometheus for its evidence")
        judged = diagnosis(session, name)
        self.ui.in_thread(lambda: self._drilled(session, name, judged), "diagnosis")

    def _drilled(self, session: Session, name: str, judged: Diagnosis) -> None:
        """The target judged here on its raw series; the judged report when it has none."""
        assert self.settings.prometheus is not None
        window = (DRILL_WINDOW_S, max(self.settings.interval_s, 1.0), self.clock())
        scraping = scrape_options(self.settings)
        rules, options = session.engine.rules, session.options
        try:
            fleet = asyncio.run(
                evidence_of(self.settings.prometheus, [name], window, scraping, rules, options)
            )
        except PrometheusError as error:
            self.ui.show(f"diagnosis of {name}", f"{text_report(judged)}\n\n(no evidence: {error})")
            return
        found = evidence_for(fleet, name)
        shown = text_report(found if found is not None else judged)
        self.ui.show(f"diagnosis of {name}", shown)

    def alternatives(
        self, session: Session, target: TargetView, finding: Finding
    ) -> PrimaryPredictions | None:
        """The finding's changes ranked by the scheduler model (None: none it knows)."""
        from vtop.core.ops.rank import PrimaryPredictions, finding_predictions, target_figure
        from vtop.core.whatif.predict import FLAGS
        from vtop.core.whatif.profile import ProfileError, StepProfiles

        now = session.now
        if now is None or not any(c.flag in FLAGS for c in finding.changes):
            return None
        try:
            profiles = StepProfiles.default()
        except ProfileError as error:
            return PrimaryPredictions(finding.key, target_figure(finding), [], {}, str(error))
        window = self.model_window(session, now)
        return finding_predictions(
            session.store, target.target, now, window, target.config, finding, profiles
        )

    def model_window(self, session: Session, now: float) -> float:
        """The model calibrates on the session's history, up to two minutes of it."""
        held_since = session.store.held_since()
        seen = now - held_since if held_since is not None else 0.0
        return max(min(seen, MODEL_WINDOW_S), self.settings.window_s)

    def bundle(self, session: Session, target: TargetView | None) -> None:
        """`b`: an incident bundle of the recent frames, written off the event loop."""
        if target is None:
            self.ui.notify("no data to bundle yet")
            return
        found = diagnosis(session, target.target)
        contents = BundleContents(
            json_report(found),
            tuple(session.startup_log),
            self.settings.vllm_args,
            target.config.facts.version,
        )
        name = time.strftime("vtop-bundle-%Y%m%d-%H%M%S.tar.gz")
        path = Path(self.settings.bundle_dir) / name
        held = session.recent_frames.snapshot()
        self.ui.in_thread(lambda: self._write(path, expand(held), contents), "bundle")

    def stacks(self, target: TargetView | None) -> None:
        """`w`: where the engine is, from its processes' Python stacks (py-spy, about two
        seconds, off the event loop); shown, and kept as an event the recording holds."""
        if target is None:
            self.ui.notify("no server yet")
            return
        url = target.target
        self.ui.notify(f"reading the stacks of {url}'s processes (py-spy, read-only)")
        self.ui.in_thread(lambda: self._stacks(url, shown=True), "stacks")

    def collect(self, target: TargetView | None) -> None:
        """A live server's stacks, once per firing of a finding that collects them (the
        stall): read off the event loop, kept for its explanation and as an event."""
        if target is None or target.triage is None:
            return
        url = target.target
        firing = {(url, f.rule.id, f.since) for f in stack_collectors(target.triage)}
        if firing - self._collected:
            self._collected |= firing
            self.ui.in_thread(lambda: self._stacks(url, shown=False), "stacks")

    def _stacks(self, url: str, shown: bool) -> None:
        lines = whereabouts_lines(look_at(url))
        self.whereabouts[url] = lines
        if shown:
            self.ui.show(f"where the engine is: {url}", "\n".join(lines))
        said = " ".join(line.strip() for line in lines[:4])
        self.feed.note(Event(self.clock(), EventKind.STACKS, url, said))

    def _write(self, path: Path, frames: list[Frame], contents: BundleContents) -> None:
        """Write the bundle, then say where it is (a failure is the worker's banner)."""
        write_bundle(path, frames, contents)
        self.ui.notify(f"bundle written: {path}")

    def managed_server(self) -> ManagedServer | None:
        """The server vtop may act on, or None with the reason told."""
        if self.server is None:
            self.ui.notify("vtop did not start this server (`vtop serve`): nothing to apply")
            return None
        if self.readonly:
            self.ui.notify("read-only: actions are disabled")
            return None
        return self.server

    async def apply(
        self, session: Callable[[], Session], target: TargetView | None, finding: Finding | None
    ) -> None:
        """`a`: confirm the argv diff, then the one apply flow on the server's own traffic."""
        from vtop.core.manage.apply import apply_and_verify

        server = self.managed_server()
        changes = [c for c in finding.changes if c.argument() is not None] if finding else []
        if server is None:
            return
        if finding is None or not changes or target is None:
            self.ui.notify("no finding with a computable flag change is highlighted")
            return
        change = changes[0]
        diff = argv_diff(server.argv, apply_change(server.argv, change))
        predicted = self.predict(session(), target, change)
        question = "\n".join(
            [
                *diff,
                "",
                f"why: {change.why}",
                f"expected: {change.effect}",
                f"predicted: {prediction_text(predicted)}",
            ]
        )
        if not await self.ui.confirm(f"apply {finding.rule.id}?", question):
            return
        before = self.measure_now(session(), target.target)
        await self.drain(session, target.target)

        async def after(_state: ManagedServer) -> Measurement:
            await asyncio.sleep(self.settings.window_s + self.feed.status(self.clock()).interval_s)
            return self.measure_now(session(), target.target)

        result = await apply_and_verify(
            server,
            finding,
            change,
            before,
            after,
            state_dir(),
            self.tell,
            self.follow,
            predicted=predicted,
        )
        self.ui.show("apply: before / after", "\n".join(result_lines(result)))

    def predict(
        self, session: Session, target: TargetView, change: ProposedChange
    ) -> ChangePrediction:
        """The scheduler model's prediction for the change, on the session's last window."""
        from vtop.core.whatif.predict import ChangePrediction, predict_change
        from vtop.core.whatif.profile import ProfileError, StepProfiles

        if session.now is None:
            return ChangePrediction(None, "no window to calibrate on")
        now = session.now
        try:
            profiles = StepProfiles.default()
        except ProfileError as error:
            return ChangePrediction(None, str(error))
        window = self.model_window(session, now)
        return predict_change(
            session.store, target.target, now, window, target.config, change, profiles
        )

    def measure_now(self, session: Session, target: str) -> Measurement:
        """The last window of the session."""
        from vtop.core.manage.verdict import measure

        return measure(session.store, target, session.now or self.clock(), self.settings.window_s)

    async def drain(self, session: Callable[[], Session], target: str) -> None:
        """Wait until nothing is running (or the drain timeout passes)."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while time.monotonic() < deadline:
            view = session().targets.get(target)
            summary = view.summary if view is not None else None
            if summary is None or not summary.running:
                return
            await asyncio.sleep(self.feed.status(self.clock()).interval_s)

    def tell(self, event: Event) -> None:
        """An "applied" / "rollback" event: a mark on the charts, and into a recording."""
        self.feed.note(event)
        self.ui.notify(f"{event.kind}: {event.message}")

    def follow(self, state: ManagedServer) -> None:
        """Watch the restarted server (new pid, same URL and log)."""
        self.server = state
        self.feed.follow(state)

    async def restart(self) -> None:
        """`r`: restart the managed server with the same flags (after confirmation)."""
        from vtop.core.manage.apply import switch

        server = self.managed_server()
        if server is None:
            return
        if not await self.ui.confirm("restart vLLM?", " ".join(server.argv)):
            return
        audit(state_dir(), "restart", server=server.name, argv=server.argv)
        try:
            await switch(server, list(server.argv), state_dir(), self.follow)
        except ProcessError as error:
            self.ui.notify(f"restart failed: {error}")
            return
        self.ui.notify("vLLM is ready again")


def prediction_text(predicted: ChangePrediction) -> str:
    """The model's figures (steady, then right after the restart), or why it gives none."""
    from vtop.text.whatif import figures_summary

    if predicted.figures is None:
        return f"none ({predicted.reason})"
    said = figures_summary(predicted.figures)
    if predicted.after_restart is not None:
        first = figures_summary(predicted.after_restart)
        said += f"; first {predicted.after_restart_s:.0f} s after the restart: {first}"
    return said


def result_lines(result: Applied) -> list[str]:
    """Before/after side by side, the model's prediction, and what vtop did."""
    from vtop.core.manage.verdict import comparison_lines

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
