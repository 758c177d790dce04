"""A line chart of summary fields over the last minutes, x in seconds relative to now."""

from __future__ import annotations

import math
from collections.abc import Sequence

from textual_plotext import PlotextPlot

from vtop.ui.chart_data import ChartSpec
from vtop.ui.widgets import plotting  # noqa: F401  (deterministic plotext)

MIN_TOP = 1.0
"""The y axis reaches at least this high, so an all-zero line sits at the bottom."""
MARKERS = ("braille", "dot", "+", "x")
"""One marker per line, so lines stay apart without colour (NO_COLOR)."""


class TimeChart(PlotextPlot):
    """Plots the lines of one ChartSpec."""

    def __init__(self, spec: ChartSpec) -> None:
        super().__init__(id=f"chart-{spec.panel}", classes="panel chart")
        self.spec = spec
        self.border_title = spec.title

    def show(
        self,
        lines: Sequence[tuple[list[float], list[float]]],
        span: float,
        title: str,
        limit: float | None = None,
        marks: Sequence[float] = (),
    ) -> None:
        """Replace the plotted data and redraw."""
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        self.border_title = title
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
