"""The Textual dashboard: a timer asks the feed for frames, one handler ingests and redraws.

Data flows one way: feed -> session (in `ingest`) -> one `Shown` state per refresh -> widgets.
Widgets never fetch; the feed's state and controls are one value and one method, whatever it
reads (live endpoints, a recording, Prometheus).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.timer import Timer
from textual.widgets import Footer

from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.config.settings import Settings
from vtop.core.ingest.feed_status import Control, Moved
from vtop.core.ingest.feeds import Feed
from vtop.core.process_state import ServerState
from vtop.core.rules.rule import Rule
from vtop.core.session.session import RULE_BUDGET, Session, store_ticks_for
from vtop.ui.chart_data import CHARTS
from vtop.ui.keys import Keys
from vtop.ui.messages import FramesReady
from vtop.ui.state import Shown
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
FREEZE_HEAP_AFTER_FRAMES = 5
"""By then the store holds every series: freezing moves its hundreds of thousands of long-lived
objects out of the collector's full passes (each walked them all: ~0.4 s at 100 servers)."""
YOUNG_COLLECTION_EVERY = 20_000
"""Allocations between young collections (default 700): a tick's allocations are mostly
short-lived scrape data that reference counting frees; frequent passes found almost nothing."""


class VtopApp(Keys):
    """top for vLLM."""

    CSS_PATH = "vtop.tcss"
    TITLE = "vtop"
    HORIZONTAL_BREAKPOINTS: list[tuple[int, str]] | None = [  # noqa: RUF012 (typed as in App)
        (0, "-narrow"),
        (NARROW_BELOW, "-wide"),
    ]

    def __init__(
        self,
        settings: Settings,
        feed: Feed,
        rules: list[Rule],
        options: DiagnoseOptions | None = None,
        *,
        clock: Callable[[], float] = time.time,
        server: ServerState | None = None,
        readonly: bool = False,
        fleet: bool | None = None,
    ) -> None:
        super().__init__()
        self.tune_gc = False
        """Tune the collector for a long run (the process owns it: not in tests)."""
        self.frames_ingested = 0
        self.settings, self.feed, self.clock, self.rules = settings, feed, clock, rules
        self.options = options or DiagnoseOptions.from_settings(settings)
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
        return Session(
            self.rules,
            self.options,
            rule_budget=budget,
            store_capacity=capacity,
            alerts=self.settings.prometheus_alerts,
        )

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
