"""The Textual dashboard: a timer asks the feed for frames, one handler ingests and redraws.

Data flows one way: feed -> session (in `ingest`) -> one `Shown` state per refresh -> the
dashboard screen, which owns the panels (attributes down; the panels post messages up). The
keys route to the actions object; every worker's failure becomes a banner, never the end of the
app. Widgets never fetch; the feed's state and controls are one value and one method, whatever
it reads (live endpoints, a recording, Prometheus).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import ClassVar

from textual import on
from textual.app import App, SystemCommand
from textual.binding import BindingType
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import OptionList
from textual.worker import Worker, WorkerState

from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.config.settings import Settings
from vtop.core.ingest.feed_status import Control, Mode, Moved
from vtop.core.ingest.feeds import Feed
from vtop.core.ingest.sources.probe import ProbeOptions
from vtop.core.managed_server import ManagedServer
from vtop.core.rules.rule import Rule
from vtop.core.session.session import Session, TargetView, watching_session
from vtop.ui.actions import DashboardActions, Ui
from vtop.ui.fleet_shown import build_fleet
from vtop.ui.keys import (
    BINDINGS,
    LIVE_ONLY,
    REPLAY_ONLY,
    SERVER_ONLY,
    UNAVAILABLE,
    system_commands,
)
from vtop.ui.messages import FramesReady
from vtop.ui.requests_shown import build_requests
from vtop.ui.screens.confirm import ConfirmScreen
from vtop.ui.screens.dashboard import DashboardScreen
from vtop.ui.screens.fleet import FleetScreen
from vtop.ui.screens.requests import RequestsScreen
from vtop.ui.screens.text_screen import TextScreen
from vtop.ui.shown import Shown, Surroundings, build, mode_words
from vtop.ui.widgets.banner import Banner

NARROW_BELOW = 110
PROBE_TOKENS = ProbeOptions().max_tokens
FLEET_SCREEN = "fleet"
FREEZE_HEAP_AFTER_FRAMES = 5
"""By then the store holds every series: freezing moves its hundreds of thousands of long-lived
objects out of the collector's full passes (each walked them all: ~0.4 s at 100 servers)."""
YOUNG_COLLECTION_EVERY = 20_000
"""Allocations between young collections (default 700): a tick's allocations are mostly
short-lived scrape data that reference counting frees; frequent passes found almost nothing."""


class Dashboard(DashboardScreen):
    """The dashboard screen at vtop's breakpoints (one column below 110 columns)."""

    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012 (typed as in Screen)
        (0, "-narrow"),
        (NARROW_BELOW, "-wide"),
    ]


class VtopApp(App[int]):
    """top for vLLM."""

    CSS_PATH = "vtop.tcss"
    TITLE = "vtop"
    BINDINGS: ClassVar[list[BindingType]] = BINDINGS

    def __init__(
        self,
        settings: Settings,
        feed: Feed,
        rules: list[Rule],
        options: DiagnoseOptions | None = None,
        *,
        clock: Callable[[], float] = time.time,
        server: ManagedServer | None = None,
        readonly: bool = False,
        fleet: bool | None = None,
    ) -> None:
        super().__init__()
        self._ui_thread = threading.get_ident()
        """The thread that runs the app (set again on mount): `show` from any other is
        handed over to it."""
        self.tune_gc = False
        """Tune the collector for a long run (the process owns it: not in tests)."""
        self.frames_ingested = 0
        self.settings, self.feed, self.clock, self.rules = settings, feed, clock, rules
        self.options = options or DiagnoseOptions.from_settings(settings)
        self.actions = DashboardActions(settings, feed, server, readonly, self._ui(), clock)
        servers = len(settings.urls)
        self.fleet_mode = servers > 1 or settings.prometheus is not None if fleet is None else fleet
        """Several servers: open on the fleet table, limit rule runs per tick, bound history."""
        self.session = self.new_session()
        self.target_index = 0
        self.shown: Shown | None = None
        self.dashboard = Dashboard(settings.history_s, settings.low_redraw)
        self._polling = False
        self._timer: Timer | None = None
        self._interval = settings.interval_s

    @property
    def server(self) -> ManagedServer | None:
        """The vLLM server vtop manages here (None when it only watches)."""
        return self.actions.server

    @property
    def target(self) -> TargetView | None:
        """The endpoint on screen."""
        facts = self.shown.facts if self.shown is not None else None
        return self.session.targets.get(facts.target) if facts is not None else None

    def new_session(self) -> Session:
        """A watching session as this dashboard needs it (a fleet: several servers)."""
        servers = max(len(self.settings.urls), 2 if self.fleet_mode else 1)
        return watching_session(
            self.rules, self.options, servers, alerts=self.settings.findings_from_prometheus
        )

    def _ui(self) -> Ui:
        """The app's means for the actions to ask and tell."""

        async def confirm(title: str, body: str) -> bool:
            return await self.push_screen_wait(ConfirmScreen(title, body))

        def show(title: str, body: str) -> None:  # from the app's thread or a worker's
            if threading.get_ident() == self._ui_thread:
                self.call_later(self.push_screen, TextScreen(title, body))
            else:
                self.call_from_thread(self.push_screen, TextScreen(title, body))

        def tell(message: str) -> None:
            self.notify(message, timeout=5)  # thread-safe

        def in_thread(work: Callable[[], None], group: str) -> None:
            self.run_worker(work, thread=True, group=group, exit_on_error=False)

        return Ui(confirm, show, tell, in_thread)

    def get_default_screen(self) -> Screen[None]:
        """The dashboard is the bottom of the screen stack."""
        return self.dashboard

    def on_mount(self) -> None:
        self._ui_thread = threading.get_ident()
        for panel in self.settings.hidden_panels:
            self.dashboard.toggle_panel(panel)

    def on_ready(self) -> None:
        """Start polling once the dashboard is on screen."""
        self._timer = self.set_interval(self._interval, self.tick)
        if self.fleet_mode:
            self.action_fleet()
        self.tick()
        self.refresh_views()

    def tick(self) -> None:
        """Ask the feed for frames unless a poll is still running."""
        if not self._polling:
            self._polling = True
            self.feed.focus(self.target.target if self.target is not None else None)
            self.run_worker(self._poll(), group="poll", exit_on_error=False)

    async def _poll(self) -> None:
        """Worker: get frames and hand them to the app (never touches widgets)."""
        try:
            frames = await self.feed.frames(self.clock())
        finally:
            self._polling = False
        if frames:
            self.post_message(FramesReady(frames))

    @on(FramesReady)
    def ingest(self, message: FramesReady) -> None:
        """The one place where data enters the session."""
        focus = self.target.target if self.target is not None else None
        for frame in message.frames:
            self.session.ingest(frame, focus)
        if self.feed.status(self.clock()).mode is not Mode.REPLAY:
            self.actions.collect(self.target)
        self.frames_ingested += len(message.frames)
        if self.tune_gc and self.frames_ingested >= FREEZE_HEAP_AFTER_FRAMES:
            self.tune_gc = False
            gc.freeze()
            gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
        self.refresh_views()

    def refresh_views(self, even_paused: bool = False) -> None:
        """Build this refresh's state and hand it to the screen on show (only the header while
        paused; an action while paused, like a replay step, redraws everything)."""
        if not self.dashboard.is_mounted or not self.is_running:
            return  # not built yet, or shutting down (frames may still arrive while it closes)
        now = self.session.now if self.session.now is not None else self.clock()
        status = self.feed.status(self.clock())
        held = status.paused and not even_paused
        probing = self.settings.probe_url
        note = (
            f"canary {PROBE_TOKENS} tok / {self.settings.probe_interval_s:g} s" if probing else None
        )
        around = Surroundings(
            self.settings.window_s, self.actions.vllm_pids, held, even_paused, note
        )
        shown = build(
            self.session, status, self.target_index, self.settings.urls, now, self.clock(), around
        )
        self.shown = shown
        if isinstance(self.screen, FleetScreen):
            if not held:
                age = [part for part in shown.header[1:2] if part.startswith("age ")]
                mode = " ".join((*age, *mode_words(status, now)))
                self.screen.show(build_fleet(self.session, now, mode, self.screen.choice))
            return
        self.dashboard.shown = shown

    def moved(self, result: Moved) -> None:
        """Apply what a feed control did: a fresh session, frames to ingest, a redraw."""
        if result.fresh:
            self.session = self.new_session()
        for frame in result.frames:
            self.session.ingest(frame)
        self.refresh_views(even_paused=True)

    def control(self, action: Control, amount: float = 0.0) -> None:
        """One feed control; the poll timer follows the feed's interval."""
        result = self.feed.control(action, amount)
        interval = self.feed.status(self.clock()).interval_s
        if interval != self._interval and self._timer is not None:
            self._interval = interval
            self._timer.stop()
            self._timer = self.set_interval(interval, self.tick)
        if action is not Control.PAUSE or not result.changed:
            self.notify(result.message, timeout=2)
        self.moved(result)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A failed worker (a poll, an apply, a restart, a bundle) becomes a banner, never an
        exit."""
        if event.state is WorkerState.ERROR and self.dashboard.is_mounted:
            what = {"poll": "polling"}.get(event.worker.group, event.worker.group or "a task")
            for banner in self.dashboard.query(Banner):  # none while the app shuts down
                banner.say(f" {what} failed: {event.worker.error}")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys in the footer only during a replay; server keys only for a server vtop
        started."""
        replaying = self.feed.status(self.clock()).mode is Mode.REPLAY
        if action in REPLAY_ONLY and not replaying:
            return False
        if action in LIVE_ONLY and replaying:
            return False
        return not (action in SERVER_ONLY and self.server is None)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from system_commands(self, self.feed.status(self.clock()).mode is Mode.REPLAY)

    def _worker(self, work: Awaitable[None], group: str) -> None:
        """An action's worker: one at a time per group, its failure a banner."""
        self.run_worker(work, group=group, exclusive=True, exit_on_error=False)

    def action_pause(self) -> None:
        """Freeze the display (live) or the playback (replay)."""
        self.control(Control.PAUSE)

    def action_faster(self) -> None:
        """Poll more often (live) or play faster (replay)."""
        self.control(Control.FASTER)

    def action_slower(self) -> None:
        """Poll less often (live) or play slower (replay)."""
        self.control(Control.SLOWER)

    def action_step(self, frames: int) -> None:
        """Replay: pause and move frames forward or back."""
        self.control(Control.STEP, frames)

    def action_jump(self, seconds: float) -> None:
        """Replay: move by seconds of recorded time."""
        self.control(Control.JUMP, seconds)

    def action_speed(self) -> None:
        """Replay speed: x1, x10, as fast as possible."""
        self.control(Control.SPEED)

    def action_toggle_panel(self, panel: str) -> None:
        """Show or hide a panel."""
        self.dashboard.toggle_panel(panel)

    def action_help(self) -> None:
        """Keys and what the screen shows."""
        from vtop.ui.explain import HELP

        self.push_screen(TextScreen("vtop help", HELP))

    def action_explain(self) -> None:
        """The highlighted finding (the primary one until the user moves) in full."""
        finding = self.dashboard.selected if self.screen is self.dashboard else None
        self.actions.explain(self.session, self.target, finding)

    @on(OptionList.OptionSelected, "#findings")
    def explain_selected(self) -> None:
        """Enter on a finding explains it."""
        self.action_explain()

    def action_diagnosis(self) -> None:
        """The full `vtop diagnose` report for the endpoint on screen."""
        self.actions.diagnosis(self.session, self.target)

    def action_bundle(self) -> None:
        """An incident bundle of the recent frames."""
        self.actions.bundle(self.session, self.target)

    def action_requests(self) -> None:
        """The requests that finished lately and those that held up others, from vLLM's
        spans (live, received on the settings' `otlp` addresses; in a replay, the recording's)."""
        target = self.target
        if target is None:
            self.notify("no data yet", timeout=5)
            return
        replaying = self.feed.status(self.clock()).mode is Mode.REPLAY
        listening = ("the recording",) if replaying else self.settings.otlp
        now = self.session.now or self.clock()
        scrape = target.last_ok_scrape
        in_flight = None if scrape is None else scrape.in_flight
        spans = list(self.session.spans)
        shown = build_requests(spans, target.config, listening, now, target.target, in_flight)
        if isinstance(shown, str):
            self.push_screen(TextScreen(f"requests of {target.target}", shown))
        else:
            self.push_screen(RequestsScreen(shown))

    def action_stacks(self) -> None:
        """Where the engine is, from its processes' Python stacks."""
        self.actions.stacks(self.target)

    def action_apply(self) -> None:
        """Apply the highlighted finding's change to the managed server, verify, roll back."""
        finding = self.dashboard.selected
        self._worker(self.actions.apply(lambda: self.session, self.target, finding), "apply")

    def action_restart(self) -> None:
        """Restart the managed server with the same flags (after confirmation)."""
        self._worker(self.actions.restart(), "restart")

    def action_fleet(self, back: bool = False) -> None:
        """The fleet table; `f` there (or Esc here, with several servers) toggles back."""
        several = self.fleet_mode or len(self.session.targets) > 1
        if isinstance(self.screen, FleetScreen):
            if not back or not several:  # Esc leaves a one-server table too
                self.pop_screen()
                self.refresh_views(even_paused=True)
            return
        if back and not several:
            return
        if not self.is_screen_installed(FLEET_SCREEN):
            self.install_screen(FleetScreen(), name=FLEET_SCREEN)
        if self.screen is self.dashboard:
            self.push_screen(FLEET_SCREEN)
            # drawn once the table is mounted: paused, no tick would fill it
            self.call_after_refresh(self.refresh_views, True)

    @on(FleetScreen.Open)
    def open_server(self, message: FleetScreen.Open) -> None:
        """Drill from the fleet table into one server's dashboard."""
        names = list(self.session.targets)
        if message.target in names:
            self.target_index = names.index(message.target)
        self.pop_screen()
        self.refresh_views(even_paused=True)

    @on(FleetScreen.Changed)
    def fleet_changed(self) -> None:
        """The fleet table's sort or filter changed."""
        self.refresh_views(even_paused=True)

    def action_next_target(self) -> None:
        """Show the next endpoint (said so when there is only one)."""
        if len(self.session.targets) <= 1:
            self.notify(UNAVAILABLE["t"], timeout=4)
            return
        self.target_index += 1
        self.refresh_views(even_paused=True)

    def action_unavailable(self, key: str) -> None:
        """A key whose action does not apply here: say why, rather than nothing."""
        self.notify(UNAVAILABLE.get(key, f"{key}: not available here"), timeout=4)

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """A screenshot in the bundle directory (default: here), never a Downloads folder."""
        where = self.deliver_screenshot(filename, path or self.settings.bundle_dir)
        self.notify(f"screenshot: {where or 'not written'}", timeout=4)
