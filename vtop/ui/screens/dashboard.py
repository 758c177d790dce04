"""The dashboard screen: it owns the panels and shows what it is given.

The app sets `shown` once per refresh (attributes down); the screen pushes it into its widgets
and never reads the session or the feed. A chart is redrawn when its data has moved by a dot
(or the refresh says so); panels are hidden and shown here.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer

from vtop.core.config.panels import PANEL_OF, PANELS, widget_id
from vtop.core.rules.engine import Finding
from vtop.ui import panels
from vtop.ui.shown import Shown
from vtop.ui.widgets.action_line import ActionLine
from vtop.ui.widgets.banner import Banner
from vtop.ui.widgets.chart_scroll import ChartScroll
from vtop.ui.widgets.event_log import EventLog
from vtop.ui.widgets.findings import FindingsPanel
from vtop.ui.widgets.front_door import FrontDoorLine
from vtop.ui.widgets.gpu_panel import GpuPanel
from vtop.ui.widgets.header import Header
from vtop.ui.widgets.log_panel import LogPanel

LOW_REDRAW_EVERY = 5
"""With --low-redraw, charts are redrawn every this many refreshes."""


class DashboardScreen(Screen[None]):
    """Header, action line, banner, charts, findings, GPUs, events and log."""

    shown: reactive[Shown | None] = reactive(None, always_update=True, init=False)

    def __init__(self, history_s: float, low_redraw: bool = False) -> None:
        super().__init__()
        self.history_s = history_s
        self.low_redraw = low_redraw
        self.refreshes = 0

    def compose(self) -> ComposeResult:
        yield Header(id="header")
        yield ActionLine(id="action")
        yield FrontDoorLine(id="front-door")
        yield Banner(id="banner")
        with Horizontal(id="body"):
            with ChartScroll(id="charts"), Grid(id="chart-grid"):
                yield from (panels.widget_for(panel) for panel in PANELS if not panel.beside)
            with Vertical(id="side"):
                yield FindingsPanel()
                yield from (panels.widget_for(panel) for panel in PANELS if panel.beside)
                yield EventLog()
                yield LogPanel()
        yield Footer(compact=True)

    @property
    def selected(self) -> Finding | None:
        """The highlighted finding (the primary one until the user moves)."""
        return self.query_one(FindingsPanel).selected

    def watch_shown(self, shown: Shown | None) -> None:
        """Every panel from one refresh's state (only the header while the display is held)."""
        if shown is None or not self.is_mounted:
            return
        self.query_one(Header).parts = shown.header
        if shown.held:
            return
        self.query_one(ActionLine).show(shown.action, shown.action_parts)
        self.query_one(FrontDoorLine).text = shown.front_door
        self.query_one(Banner).say(shown.banner)
        self.refreshes += 1
        full = not self.low_redraw or self.refreshes % LOW_REDRAW_EVERY == 1
        if shown.facts is not None and (full or shown.redraw):
            self.draw_charts(shown, shown.redraw)
        self.query_one(FindingsPanel).show(shown.triage, shown.no_finding, shown.stale_note)
        self.query_one(GpuPanel).show(shown.gpu, shown.vllm_pids)
        self.query_one(EventLog).show(shown.marks)
        self.query_one(LogPanel).show(shown.log_lines, shown.exited)

    def draw_charts(self, shown: Shown, force: bool = False) -> None:
        """The charts in view, redrawn where due (or `force`)."""
        panels.draw_charts(self, shown, self.history_s, force)

    @on(ChartScroll.Scrolled)
    def redraw_charts(self) -> None:
        """Charts that scrolled into view get the current data."""
        if self.shown is not None and self.shown.facts is not None:
            self.draw_charts(self.shown, force=True)

    def toggle_panel(self, panel: str) -> None:
        """Show or hide a panel (by its name in the panel table); the findings take the rows
        freed."""
        widget = self.query_one(f"#{widget_id(PANEL_OF[panel])}")
        widget.display = not widget.display
        charts = [w for w in self.query("#chart-grid > *") if w.display]
        self.set_class(not charts, "-no-charts")
