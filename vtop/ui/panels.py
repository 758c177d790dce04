"""The widget that draws each panel of the panel table, and the charts and the TTFT histogram
drawn from one refresh's state (the fleet table's value is `fleet_shown.py`'s)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vtop.core.config.panels import Panel
from vtop.core.config.server_config import ServerConfig
from vtop.core.histogram import quantile
from vtop.core.store.summary import TargetSummary
from vtop.ui.chart_data import CHARTS, bucket_counts, line_points, mark_offsets
from vtop.ui.format import number, seconds
from vtop.ui.shown import Shown
from vtop.ui.widgets.gpu_panel import GpuPanel
from vtop.ui.widgets.time_chart import TimeChart
from vtop.ui.widgets.ttft_histogram import TtftHistogram

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.widget import Widget


CHART_OF = {spec.panel: spec for spec in CHARTS}
DRAWN_BY: dict[str, type[GpuPanel | TtftHistogram]] = {
    "ttft_histogram": TtftHistogram,
    "gpu": GpuPanel,
}
"""The panels that are not a time chart, by the widget that draws each."""


def widget_for(panel: Panel) -> Widget:
    """The widget that draws `panel` (every other panel is a time chart of its name)."""
    drawn_by = DRAWN_BY.get(panel.name)
    return drawn_by() if drawn_by is not None else TimeChart(CHART_OF[panel.name])


def draw_charts(screen: Screen[None], shown: Shown, history_s: float, force: bool) -> None:
    """Redraw the charts on screen that moved by a dot (scrolling into view forces a redraw).

    A chart changes only when time has moved by one braille dot (span / dots across): between
    those moments only its title is updated.
    """
    history = shown.history
    if shown.facts is None or history is None:
        return
    now, target, stale = shown.now, shown.facts.target, shown.stale_note
    first = history.first_time
    span = chart_span(0.0 if first is None else now - first, history_s)
    marks = mark_offsets(shown.marks, target, now, span)
    visible = screen.query_one("#charts").region
    for chart in screen.query(TimeChart):
        if chart.display and chart.region.overlaps(visible):
            spec = chart.spec
            title = chart_title(spec.title, shown.summary, shown.config)
            chart.set_title(f"{title} [{stale}]" if stale else title)
            if force or chart.due(now, span, target):
                lines = [line_points(history, line, now, span) for line in spec.lines]
                limit = shown.config.number(spec.limit) if spec.limit else None
                chart.show(lines, span, (now, target), limit, marks)
    histogram = screen.query_one(TtftHistogram)
    if histogram.display and histogram.region.overlaps(visible):
        draw_histogram(histogram, list(shown.ttft_buckets), shown.window_s)


SPAN_STEPS_S = (30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


def chart_span(seen_s: float, history_s: float) -> float:
    """The x-axis span: the first step that holds what has been seen, at most the history.

    Steps keep the axis labels still while data arrives, and fill the width early on.
    """
    step = next((s for s in SPAN_STEPS_S if s >= seen_s), history_s)
    return min(step, history_s)


def chart_title(title: str, summary: TargetSummary | None, config: ServerConfig) -> str:
    """Chart title with the current figure(s) and context (the queue first: a narrow title
    is cut from its end)."""
    if summary is None:
        return title
    if title.startswith("Requests"):
        limit = config.number("max_num_seqs")
        cap = f" of max {limit:.0f}" if limit is not None else ""
        return (
            f"Requests: {number(summary.waiting)} waiting, {number(summary.running)} running{cap}"
        )
    if title.startswith("KV"):
        tokens = config.number("kv_capacity_tokens")
        capacity = f" of {tokens:,.0f} tokens" if tokens is not None else ""
        usage = number(None if summary.kv_usage is None else summary.kv_usage * 100)
        return f"KV cache: {usage}%{capacity}"
    if title.startswith("Preemptions"):
        return f"Preemptions/s: {number(summary.preemptions_per_s, '{:.2f}')}"
    return title


def draw_histogram(
    histogram: TtftHistogram, cumulative: list[tuple[float, float]], window: float
) -> None:
    """TTFT buckets filled during the window, p50/p90/p99 marked."""
    labels, counts = bucket_counts(cumulative)
    marked: list[int] = []
    figures = []
    for q in (0.5, 0.9, 0.99):
        value = quantile(q, cumulative) if cumulative else None
        figures.append(f"p{q * 100:g} {seconds(value)}")
        if value is not None:
            marked.append(_bucket_index(cumulative, value, len(labels)))
    title = f"TTFT {window:g}s: {' '.join(figures)}"
    histogram.show(labels, counts, marked, title)


def _bucket_index(cumulative: list[tuple[float, float]], value: float, count: int) -> int:
    """Index of the bucket that holds `value`."""
    for index, (upper, _) in enumerate(cumulative):
        if value <= upper:
            return min(index, count - 1)
    return count - 1
