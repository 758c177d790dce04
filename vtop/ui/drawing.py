"""How the dashboard draws: one `Shown` state per refresh pushed into the widgets."""

from __future__ import annotations

from textual import on
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from vtop.ui import panels
from vtop.ui.actions import Actions
from vtop.ui.screens.fleet import FleetScreen
from vtop.ui.state import Shown, build
from vtop.ui.widgets.action_line import ActionLine
from vtop.ui.widgets.banner import Banner
from vtop.ui.widgets.chart_scroll import ChartScroll
from vtop.ui.widgets.event_log import EventLog
from vtop.ui.widgets.findings import FindingsPanel
from vtop.ui.widgets.gpu_panel import GpuPanel
from vtop.ui.widgets.header import Header
from vtop.ui.widgets.log_panel import LogPanel

LOW_REDRAW_EVERY = 5


class Drawing(Actions):
    """The refresh of VtopApp's widgets from the session (its attributes are VtopApp's)."""

    target_index: int
    refreshes: int

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
