"""TTFT distribution of the current window from bucket increases, quantiles in the title."""

from __future__ import annotations

from textual_plotext import PlotextPlot


class TtftHistogram(PlotextPlot):
    """Bars per TTFT bucket; the buckets holding p50/p90/p99 are marked."""

    def __init__(self) -> None:
        super().__init__(id="chart-ttft_histogram", classes="panel chart")
        self.border_title = "TTFT histogram"

    def show(self, labels: list[str], counts: list[float], marked: list[int], title: str) -> None:
        """Replace the bars and redraw."""
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        self.border_title = title
        if counts and sum(counts) > 0:
            plt.bar(labels, counts, marker="sd")
            for index in marked:
                plt.vline(index + 1, "red")
        self.refresh()
