"""The Textual dashboard: a timer asks the feed for frames, one handler ingests and redraws.

Data flows one way: feed -> session (in `ingest`) -> one `Shown` state per refresh -> widgets.
Widgets never fetch; the feed's state and controls are one value and one method, whatever it
reads (live endpoints, a recording, Prometheus).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, OptionList
from textual.worker import Worker, WorkerState

from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.config.settings import PANELS, Settings
from vtop.core.ingest.feed_status import Control, Mode, Moved
from vtop.core.ingest.feeds import Feed
from vtop.core.manage.process import ServerState
from vtop.core.rules.loader import Rule
from vtop.core.session.session import RULE_BUDGET, Session, store_ticks_for
from vtop.ui import panels
from vtop.ui.actions import Actions
from vtop.ui.chart_data import CHARTS
from vtop.ui.explain import HELP, diagnosis_text
from vtop.ui.messages import FramesReady
from vtop.ui.screens.fleet import FleetScreen
from vtop.ui.screens.text_screen import TextScreen
from vtop.ui.state import Shown, build
from vtop.ui.widgets.action_line import ActionLine
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
FLEET_SCREEN = "fleet"
FREEZE_HEAP_AFTER_FRAMES = 5
"""By then the store holds every series: freezing moves its hundreds of thousands of long-lived
objects out of the collector's full passes (each walked them all: ~0.4 s at 100 servers)."""
YOUNG_COLLECTION_EVERY = 20_000
"""Allocations between young collections (default 700): a tick's allocations are mostly
short-lived scrape data that reference counting frees; frequent passes found almost nothing."""
REPLAY_ONLY = frozenset({"step", "jump", "speed"})
SERVER_ONLY = frozenset({"apply", "restart"})


class VtopApp(Actions):
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
        Binding("left_square_bracket", "step(-1)", "back", key_display="["),
        Binding("right_square_bracket", "step(1)", "step", key_display="]"),
        Binding("left_curly_bracket", "jump(-60)", "-60s", show=False),
        Binding("right_curly_bracket", "jump(60)", "+60s", show=False),
        Binding("s", "speed", "speed", show=False),
        Binding("e", "explain", "why"),
        Binding("d", "diagnosis", "diagnosis"),
        Binding("f", "fleet", "fleet", show=False),
        Binding("escape", "fleet(True)", "fleet", show=False),
        Binding("t", "next_target", "endpoint", show=False),
        Binding("b", "bundle", "bundle", show=False),
        Binding("a", "apply", "apply"),
        Binding("r", "restart", "restart", show=False),
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
        log_text: str | None = None,
        server: ServerState | None = None,
        readonly: bool = False,
        fleet: bool | None = None,
    ) -> None:
        super().__init__()
        self.tune_gc = False
        """Tune the collector for a long run (the process owns it: not in tests)."""
        self.frames_ingested = 0
        self.settings, self.feed, self.clock, self.rules = settings, feed, clock, rules
        self.options = DiagnoseOptions(
            window_s=settings.window_s, vllm_args=settings.vllm_args, vllm_log=log_text
        )
        self.server = server
        """The vLLM server vtop manages here (None when it only watches)."""
        self.vllm_pids = frozenset({server.pid}) if server is not None else frozenset()
        self.readonly = readonly
        servers = len(settings.urls)
        self.fleet_mode = servers > 1 or settings.prometheus is not None if fleet is None else fleet
        """Several servers: open on the fleet table, limit rule runs per tick, bound history."""
        self.session = self.new_session()
        self.target_index = 0
        self.refreshes = 0
        self.shown: Shown | None = None
        self._polling = False
        self._timer: Timer | None = None
        self._interval = settings.interval_s

    def new_session(self) -> Session:
        """A session as this dashboard needs it (rule budget and history sized to the fleet)."""
        budget = RULE_BUDGET if self.fleet_mode else None
        capacity = store_ticks_for(len(self.settings.urls))
        return Session(self.rules, self.options, rule_budget=budget, store_capacity=capacity)

    def compose(self) -> ComposeResult:
        yield Header(id="header")
        yield ActionLine(id="action")
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

    @on(ChartScroll.Scrolled)
    def redraw_charts(self) -> None:
        """Charts that scrolled into view get the current data."""
        if self.shown is not None and self.shown.target is not None:
            self._draw_charts(self.shown, force=True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A failed worker (a poll, a restart, a bundle) becomes a banner, never an exit."""
        screen = self.dashboard
        if event.state is WorkerState.ERROR and screen is not None and screen.is_mounted:
            what = {"poll": "polling"}.get(event.worker.group, event.worker.group or "a task")
            screen.query_one(Banner).say(f" {what} failed: {event.worker.error}")

    def refresh_views(self, even_paused: bool = False) -> None:
        """Build this refresh's state and push it into the widgets (only the header while
        paused; an action while paused, like a replay step, redraws everything)."""
        screen = self.dashboard
        if screen is None or not screen.is_mounted or not self.is_running:
            return  # not built yet, or shutting down (frames may still arrive while it closes)
        now = self.session.now if self.session.now is not None else self.clock()
        status = self.feed.status(self.clock())
        shown = build(
            self.session, status, self.target_index, self.settings.urls, now, self.clock()
        )
        self.shown = shown
        if shown.target is not None:
            self.session.focus = shown.target.target
        if isinstance(self.screen, FleetScreen):
            if not status.paused or even_paused:
                panels.show_fleet(self.session, self.screen, now, " ".join(shown.header[1:3]))
            return
        screen.query_one(Header).parts = shown.header
        if status.paused and not even_paused:
            return
        self._push(screen, shown, force=even_paused)

    def _push(self, screen: Screen[object], shown: Shown, force: bool) -> None:
        """Every panel of the dashboard from one state (charts redrawn when `force`)."""
        screen.query_one(ActionLine).text = shown.action
        screen.query_one(Banner).say(shown.banner)
        self.refreshes += 1
        full = not self.settings.low_redraw or self.refreshes % LOW_REDRAW_EVERY == 1
        if shown.target is not None and full:
            self._draw_charts(shown, force)
        screen.query_one(FindingsPanel).show(shown.triage, shown.no_finding, shown.stale_note)
        screen.query_one(GpuPanel).show(self.session.gpu, self.vllm_pids)
        screen.query_one(EventLog).show(self.session.marks)
        exited = shown.target is not None and shown.target.target in self.session.exited
        screen.query_one(LogPanel).show(self.session.log_lines, exited)

    def _draw_charts(self, shown: Shown, force: bool = False) -> None:
        screen = self.dashboard
        if screen is not None and shown.target is not None:
            panels.draw_charts(
                screen,
                self.session,
                shown.target,
                shown.now,
                self.settings,
                shown.stale_note,
                force,
            )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys in the footer only during a replay; server keys only for a server vtop
        started."""
        replaying = self.feed.status(self.clock()).mode is Mode.REPLAY
        if action in REPLAY_ONLY and not replaying:
            return False
        return not (action in SERVER_ONLY and self.server is None)

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
        """Show or hide a panel; the findings take the rows freed."""
        widget = self.query_one("#gpu" if panel == "gpu" else f"#chart-{panel}")
        widget.display = not widget.display
        charts = [w for w in self.query("#chart-grid > *") if w.display]
        self.screen.set_class(not charts, "-no-charts")

    def action_help(self) -> None:
        """Keys and what the screen shows."""
        self.push_screen(TextScreen("vtop help", HELP))

    def action_diagnosis(self) -> None:
        """The full `vtop diagnose` report for the endpoint on screen."""
        target = self.target
        if target is None:
            self.notify("no data yet", timeout=2)
            return
        events = [f"{m.kind}: {m.text}" for m in self.session.marks if m.target == target.target]
        text = diagnosis_text(target, self.settings.window_s, events)
        self.push_screen(TextScreen(f"diagnosis of {target.target}", text))

    @on(OptionList.OptionSelected, "#findings")
    def explain_selected(self) -> None:
        """Enter on a finding explains it."""
        self.action_explain()

    def action_fleet(self, back: bool = False) -> None:
        """The fleet table; `f` there (or Esc here, with several servers) toggles back."""
        if isinstance(self.screen, FleetScreen):
            if not back:
                self.pop_screen()
                self.refresh_views(even_paused=True)
            return
        if back and not (self.fleet_mode or len(self.session.targets) > 1):
            return
        if not self.is_screen_installed(FLEET_SCREEN):
            self.install_screen(FleetScreen(), name=FLEET_SCREEN)
        if len(self.screen_stack) == 1:
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

    @on(FleetScreen.Changed)
    def fleet_changed(self) -> None:
        """The fleet table's sort or filter changed."""
        self.refresh_views(even_paused=True)

    def action_next_target(self) -> None:
        """Show the next endpoint."""
        self.target_index += 1
        self.refresh_views()

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """A screenshot in the bundle directory (default: here), never a Downloads folder."""
        where = self.deliver_screenshot(filename, path or str(Path(self.settings.bundle_dir)))
        self.notify(f"screenshot: {where or 'not written'}", timeout=4)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Pause / resume", "p: freeze the display or the replay", self.action_pause
        )
        yield SystemCommand("Diagnosis", "d: the full triage report", self.action_diagnosis)
        yield SystemCommand("Explain finding", "e: the highlighted finding", self.action_explain)
        yield SystemCommand(
            "Incident bundle", "b: recording, findings, log tail", self.action_bundle
        )
        yield SystemCommand("Fleet table", "f: every server at a glance", self.action_fleet)
        if self.feed.status(self.clock()).mode is Mode.REPLAY:
            yield SystemCommand(
                "Replay speed", "s: x1, x10, as fast as possible", self.action_speed
            )
            yield SystemCommand("Step forward", "]: one frame", lambda: self.action_step(1))
            yield SystemCommand("Step back", "[: one frame", lambda: self.action_step(-1))
        for index, panel in enumerate(PANELS):
            yield SystemCommand(f"Toggle {panel} panel", f"key {index + 1}", _toggler(self, panel))


def _toggler(app: VtopApp, panel: str) -> Callable[[], None]:
    """A callback that toggles one panel."""
    return lambda: app.action_toggle_panel(panel)
