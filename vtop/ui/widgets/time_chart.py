"""A line chart of summary fields over the last minutes, x in seconds relative to now."""

from __future__ import annotations

import math
from collections.abc import Sequence

from textual.app import RenderResult
from textual.geometry import Size
from textual_plotext import PlotextPlot

from vtop.ui.chart_data import ChartSpec
from vtop.ui.widgets import plotting  # noqa: F401  (deterministic plotext)

MIN_TOP = 1.0
"""The y axis reaches at least this high, so an all-zero line sits at the bottom."""
MIN_PERIOD_S = 2.0
"""Charts are rebuilt at most this often (titles and every figure follow each tick): plotext's
canvas is most of the dashboard's CPU, and chart cells most of what a redraw sends over SSH."""
MARKERS = ("braille", "dot", "+", "x")
"""One marker per line, so lines stay apart without colour (NO_COLOR)."""


class TimeChart(PlotextPlot):
    """Plots the lines of one ChartSpec."""

    def __init__(self, spec: ChartSpec) -> None:
        super().__init__(id=f"chart-{spec.panel}", classes="panel chart")
        self.spec = spec
        self.border_title = spec.title
        self._drawn: tuple[float, Size, str] | None = None
        self._rendered: tuple[object, RenderResult] | None = None

    def set_title(self, title: str) -> None:
        """Change the border title (setting it repaints the widget, so only when it differs)."""
        if title != self.border_title:
            self.border_title = title

    def render(self) -> RenderResult:
        """The plot, built again only when the data, size or theme changed since the last build.

        A widget repaint (a new border title, a scroll) would otherwise rebuild the whole plot.
        """
        key = (self._drawn, self.size, self.app.theme)
        if self._rendered is None or self._rendered[0] != key:
            self._rendered = key, super().render()
        return self._rendered[1]

    def due(self, now: float, span: float, target: str) -> bool:
        """True when the data has moved by a dot, and at least MIN_PERIOD_S, since the last
        drawing of this target at this size (or time went back, as in a replay seek)."""
        if self._drawn is None or self._drawn[1:] != (self.size, target):
            return True
        period = max(span / self._dots(), MIN_PERIOD_S) * 0.9  # 0.9: scrape times jitter
        return not 0 <= now - self._drawn[0] < period

    def show(
        self,
        lines: Sequence[tuple[list[float], list[float]]],
        span: float,
        drawn: tuple[float, str],
        limit: float | None = None,
        marks: Sequence[float] = (),
    ) -> None:
        """Replace the plotted data (of target `drawn[1]` at time `drawn[0]`) and redraw."""
        self._drawn = drawn[0], self.size, drawn[1]
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        for offset in marks:
            plt.vline(offset, "red")
        if limit is not None:
            plt.hline(limit, "yellow")
        step = max(1, math.ceil(max((len(xs) for xs, _ in lines), default=0) / self._dots()))
        for (xs, ys), spec, marker in zip(lines, self.spec.lines, MARKERS, strict=False):
            if xs:
                plt.plot(xs[::-step][::-1], ys[::-step][::-1], label=spec.label, marker=marker)
        plt.xlim(-span, 0)
        known = [y for _, ys in lines for y in ys] + ([limit] if limit is not None else [])
        top = self.spec.y_max or max([*known, MIN_TOP]) * 1.15
        plt.ylim(0, top)
        plt.xlabel("s")
        self.refresh()

    def _dots(self) -> int:
        """Points the plot area can show across (braille: two per column)."""
        return max(20, 2 * (self.size.width - 10))
