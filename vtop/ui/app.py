"""The Textual dashboard: a timer asks the feed for frames, one handler ingests and redraws."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable
from typing import ClassVar

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, OptionList
from textual.worker import Worker, WorkerState

from vtop.core.effective_config import DiagnoseOptions
from vtop.core.feeds import Feed, LiveFeed, ReplayFeed
from vtop.core.process import ServerState
from vtop.core.rules import Rule
from vtop.core.session import RULE_BUDGET, Session, TargetView, short_key, store_ticks_for
from vtop.core.settings import PANELS, Settings
from vtop.ui import replay_actions, server_actions, views
from vtop.ui.chart_data import CHARTS
from vtop.ui.explain import HELP, diagnosis_text, explain
from vtop.ui.messages import FramesReady
from vtop.ui.screens.fleet import FleetScreen
from vtop.ui.screens.text_screen import TextScreen
from vtop.ui.widgets.banner import Banner
from vtop.ui.widgets.chart_scroll import ChartScroll
from vtop.ui.widgets.event_log import EventLog
from vtop.ui.widgets.findings import FindingsPanel
from vtop.ui.widgets.gpu_panel import GpuPanel
from vtop.ui.widgets.header import Header
from vtop.ui.widgets.log_panel import LogPanel
from vtop.ui.widgets.time_chart import TimeChart
from vtop.ui.widgets.ttft_histogram import TtftHistogram

NARROW_BELOW = 110
LOW_REDRAW_EVERY = 5
INTERVAL_STEPS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
FLEET_SCREEN = "fleet"
FREEZE_HEAP_AFTER_FRAMES = 5
"""By then the store holds every series: freezing moves its hundreds of thousands of long-lived
objects out of the collector's full passes (each walked them all: ~0.4 s at 100 servers)."""
YOUNG_COLLECTION_EVERY = 20_000
"""Allocations between young collections (default 700): a tick's allocations are mostly
short-lived scrape data that reference counting frees; frequent passes found almost nothing."""


class VtopApp(App[int]):
    """top for vLLM."""

    CSS_PATH = "vtop.tcss"
    TITLE = "vtop"
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [  # noqa: RUF012 (typed as in App)
        (0, "-narrow"),
        (NARROW_BELOW, "-wide"),
    ]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("p", "pause", "pause"),
        Binding("plus,equals_sign", "faster", "faster", key_display="+"),
        Binding("minus", "slower", "slower", key_display="-"),
        Binding("d", "diagnosis", "diagnosis"),
        Binding("e", "explain", "explain"),
        Binding("t", "next_target", "endpoint", show=False),
        Binding("f", "fleet", "fleet", show=False),
        Binding("escape", "fleet(True)", "fleet", show=False),
        Binding("right_square_bracket", "step(1)", "step", show=False),
        Binding("left_square_bracket", "step(-1)", "back", show=False),
        Binding("right_curly_bracket", "jump(60)", "+60s", show=False),
        Binding("left_curly_bracket", "jump(-60)", "-60s", show=False),
        Binding("s", "speed", "speed", show=False),
        Binding("b", "bundle", "bundle", show=False),
        Binding("a", "apply", "apply", show=False),
        Binding("r", "restart", "restart", show=False),
        Binding("slash", "command_palette", "commands", show=False),
        Binding("question_mark", "help", "help", key_display="?"),
        *[
            Binding(str(i + 1), f"toggle_panel('{panel}')", panel, show=False)
            for i, panel in enumerate(PANELS)
        ],
    ]

    def __init__(
        self,
        settings: Settings,
        feed: Feed,
        rules: list[Rule],
        clock: Callable[[], float] = time.time,
        vllm_pids: frozenset[int] = frozenset(),
        log_text: str | None = None,
        server: ServerState | None = None,
        readonly: bool = False,
        fleet: bool | None = None,
        tune_gc: bool = False,
    ) -> None:
        super().__init__()
        self.tune_gc = tune_gc
        """Tune the collector for a long run (the process owns it: not in tests)."""
        self.frames_ingested = 0
        self.settings = settings
        self.feed = feed
        self.clock = clock
        self.vllm_pids = vllm_pids
        options = DiagnoseOptions(
            window_s=settings.window_s, vllm_args=settings.vllm_args, vllm_log=log_text
        )
        self.rules, self.options = rules, options
        self.server = server
        """The vLLM server vtop manages here (None when it only watches)."""
        self.readonly = readonly
        servers = len(settings.urls)
        self.fleet_mode = servers > 1 or settings.prometheus is not None if fleet is None else fleet
        """Several servers: open on the fleet table, limit rule runs per tick, bound history."""
        budget = RULE_BUDGET if self.fleet_mode else None
        capacity = store_ticks_for(servers)
        self.session = Session(rules, options, rule_budget=budget, store_capacity=capacity)
        self.interval = settings.interval_s
        self.paused = False
        self.target_index = 0
        self.refreshes = 0
        self._polling = False
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Header(id="header")
        yield Banner(id="banner")
        with Horizontal(id="body"):
            with ChartScroll(id="charts"), Grid(id="chart-grid"):
                yield TimeChart(CHARTS[0])
                yield TimeChart(CHARTS[1])
                yield TimeChart(CHARTS[2])
                yield TtftHistogram()
                yield from (TimeChart(spec) for spec in CHARTS[3:])
            with Vertical(id="side"):
                yield FindingsPanel()
                yield GpuPanel()
                yield EventLog()
                yield LogPanel()
        yield Footer()

    def on_mount(self) -> None:
        for panel in self.settings.hidden_panels:
            self.action_toggle_panel(panel)

    def on_ready(self) -> None:
        """Start polling once the dashboard is on screen (a replay may start part-way)."""
        if isinstance(self.feed, ReplayFeed) and self.feed.start_index > 0:
            replay_actions.seek(self, self.feed, self.feed.start_index)
        self._timer = self.set_interval(self.interval, self.tick)
        if self.fleet_mode:
            self.action_fleet()
        self.tick()
        self.refresh_views()

    def tick(self) -> None:
        """Ask the feed for frames unless a poll is still running."""
        if not self._polling:
            self._polling = True
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
        for frame in message.frames:
            self.session.ingest(frame)
        self.frames_ingested += len(message.frames)
        if self.tune_gc and self.frames_ingested >= FREEZE_HEAP_AFTER_FRAMES:
            self.tune_gc = False
            gc.freeze()
            gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
        self.refresh_views()

    @on(ChartScroll.Scrolled)
    def redraw_charts(self) -> None:
        """Charts that scrolled into view get the current data."""
        screen, view = self.dashboard, self.view
        if screen is not None and view is not None:
            views.draw_charts(self, screen, view, self.session.now or self.clock(), force=True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A failed poll becomes a banner, never a traceback."""
        screen = self.dashboard
        if event.state is WorkerState.ERROR and screen is not None and screen.is_mounted:
            screen.query_one(Banner).say(f"polling failed: {event.worker.error!r}; retrying")

    @property
    def view(self) -> TargetView | None:
        """The endpoint on screen."""
        targets = list(self.session.targets.values())
        return targets[self.target_index % len(targets)] if targets else None

    @property
    def dashboard(self) -> Screen[object] | None:
        """The screen with the panels (also while a help or explain screen is on top)."""
        return self.screen_stack[0] if self.screen_stack else None

    def refresh_views(self, even_paused: bool = False) -> None:
        """Push the session's state into the widgets (only the header while paused; a user's
        action while paused, like a replay step, redraws everything)."""
        screen = self.dashboard
        if screen is None or not screen.is_mounted or not self.is_running:
            return  # not built yet, or shutting down (frames may still arrive while it closes)
        now = self.session.now if self.session.now is not None else self.clock()
        if self.view is not None:
            self.session.focus = self.view.target
        if isinstance(self.screen, FleetScreen):
            if not self.paused or even_paused:
                views.show_fleet(self, self.screen, now)
            return
        screen.query_one(Header).show(views.header_text(self, now))
        if self.paused and not even_paused:
            return
        screen.query_one(Banner).say(views.banner_text(self, now))
        self.refreshes += 1
        view = self.view
        full = not self.settings.low_redraw or self.refreshes % LOW_REDRAW_EVERY == 1
        if view is not None and full:
            views.draw_charts(self, screen, view, now, force=even_paused)
        findings = screen.query_one(FindingsPanel)
        findings.show(views.triage_with_fleet(self.session, view), views.no_finding(view))
        screen.query_one(GpuPanel).show(self.session.gpu, self.vllm_pids)
        screen.query_one(EventLog).show(self.session.marks)
        exited = view is not None and view.target in self.session.exited
        screen.query_one(LogPanel).show(self.session.log_lines, exited)

    def action_pause(self) -> None:
        """Freeze the display (live) or the playback (replay)."""
        self.paused = not self.paused
        if isinstance(self.feed, ReplayFeed):
            self.feed.paused = self.paused
        self.refresh_views()

    def action_faster(self) -> None:
        """Poll more often."""
        self._set_interval(max((s for s in INTERVAL_STEPS if s < self.interval), default=0.25))

    def action_slower(self) -> None:
        """Poll less often."""
        self._set_interval(min((s for s in INTERVAL_STEPS if s > self.interval), default=30.0))

    def _set_interval(self, interval: float) -> None:
        """Restart the timer at a new interval."""
        self.interval = interval
        if isinstance(self.feed, LiveFeed):
            self.feed.interval = interval
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_interval(interval, self.tick)
        self.notify(f"polling every {interval:g} s", timeout=2)
        self.refresh_views()

    def action_toggle_panel(self, panel: str) -> None:
        """Show or hide a panel."""
        widget = self.query_one("#gpu" if panel == "gpu" else f"#chart-{panel}")
        widget.display = not widget.display

    def action_help(self) -> None:
        """Keys and what the screen shows."""
        self.push_screen(TextScreen("vtop help", HELP))

    def action_explain(self) -> None:
        """The highlighted finding in full."""
        finding = self.query_one(FindingsPanel).selected if self.dashboard is self.screen else None
        if finding is None:
            self.notify("no finding to explain", timeout=2)
            return
        self.push_screen(
            TextScreen(f"{short_key(finding)}: {finding.rule.title}", explain(finding))
        )

    @on(OptionList.OptionSelected, "#findings")
    def explain_selected(self) -> None:
        """Enter on a finding explains it."""
        self.action_explain()

    def action_diagnosis(self) -> None:
        """The full `vtop diagnose` report for the endpoint on screen."""
        view = self.view
        if view is None:
            self.notify("no data yet", timeout=2)
            return
        text = diagnosis_text(view, self.settings.window_s, self._events(view))
        self.push_screen(TextScreen(f"diagnosis of {view.target}", text))

    def _events(self, view: TargetView) -> list[str]:
        """The event log of one target as report lines."""
        return [f"{m.kind}: {m.text}" for m in self.session.marks if m.target == view.target]

    def action_bundle(self) -> None:
        """Write an incident bundle of the recent frames."""
        server_actions.bundle(self)

    def action_apply(self) -> None:
        """Apply the highlighted finding's change to the managed server, verify, roll back."""
        self.run_worker(server_actions.apply(self), group="apply", exclusive=True)

    def action_restart(self) -> None:
        """Restart the managed server with the same flags."""
        self.run_worker(server_actions.restart_same(self), group="apply", exclusive=True)

    def action_step(self, frames: int) -> None:
        """Replay: pause and move one frame forward or back."""
        replay_actions.step(self, frames)

    def action_jump(self, seconds: float) -> None:
        """Replay: move by `seconds` of recorded time."""
        replay_actions.jump(self, seconds)

    def action_speed(self) -> None:
        """Replay speed: x1, x10, as fast as possible."""
        replay_actions.cycle_speed(self)

    def action_fleet(self, back: bool = False) -> None:
        """The fleet table (from the dashboard); Esc goes back to it only with several servers."""
        if back and not (self.fleet_mode or len(self.session.targets) > 1):
            return
        if not self.is_screen_installed(FLEET_SCREEN):
            self.install_screen(FleetScreen(), name=FLEET_SCREEN)
        if not isinstance(self.screen, FleetScreen) and len(self.screen_stack) == 1:
            self.push_screen(FLEET_SCREEN)
            self.refresh_views(even_paused=True)

    @on(FleetScreen.Open)
    def open_server(self, message: FleetScreen.Open) -> None:
        """Drill from the fleet table into one server's dashboard."""
        names = list(self.session.targets)
        if message.target in names:
            self.target_index = names.index(message.target)
        self.pop_screen()
        self.refresh_views(even_paused=True)

    def action_next_target(self) -> None:
        """Show the next endpoint."""
        self.target_index += 1
        self.refresh_views()

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Pause / resume", "Freeze the display", self.action_pause)
        yield SystemCommand("Diagnosis", "Full triage report", self.action_diagnosis)
        yield SystemCommand("Explain finding", "The highlighted finding", self.action_explain)
        for index, panel in enumerate(PANELS):
            toggle = _toggler(self, panel)
            yield SystemCommand(f"Toggle {panel} panel", f"key {index + 1}", toggle)


def _toggler(app: VtopApp, panel: str) -> Callable[[], None]:
    """A callback that toggles one panel."""
    return lambda: app.action_toggle_panel(panel)
