"""TTFT distribution of the current window from bucket increases, quantiles in the title."""

from __future__ import annotations

import math

from textual_plotext import PlotextPlot

from vtop.ui.widgets import plotting  # noqa: F401  (deterministic plotext)


class TtftHistogram(PlotextPlot):
    """Bars per TTFT bucket; the buckets holding p50/p90/p99 are marked."""

    def __init__(self) -> None:
        super().__init__(id="chart-ttft_histogram", classes="panel chart")
        self.border_title = "TTFT histogram"
        self._bars: tuple[list[str], list[float], list[int]] = ([], [], [])

    def show(self, labels: list[str], counts: list[float], marked: list[int], title: str) -> None:
        """Replace the bars and redraw."""
        self.border_title = title
        self._bars = (labels, counts, marked)
        self._draw()

    def on_resize(self) -> None:
        """Pick the tick labels again for the new width."""
        self._draw()

    def _draw(self) -> None:
        """Bars at 1..n with as many bucket labels as fit (chosen here, not by plotext)."""
        labels, counts, marked = self._bars
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if counts and sum(counts) > 0:
            positions = [float(i) for i in range(1, len(counts) + 1)]
            plt.bar(positions, counts, marker="sd")
            every = _label_step(labels, self.size.width)
            plt.xticks(positions[::every], labels[::every])
            for index in marked:
                plt.vline(index + 1, "red")
        self.refresh()


def _label_step(labels: list[str], width: int) -> int:
    """Show every n-th label so that they fit in the width."""
    if not labels or width <= 10:
        return max(1, len(labels))
    widest = max(len(label) for label in labels) + 1
    return max(1, math.ceil(len(labels) * widest / (width - 8)))
