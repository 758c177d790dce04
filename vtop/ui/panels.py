"""The widget that draws each panel of the panel table, drawing the charts and the TTFT
histogram from one refresh's state, and the fleet table's contents from the session (the app
computes those; the fleet screen only shows them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vtop.core.config.panels import Panel
from vtop.core.config.server_config import ServerConfig
from vtop.core.histogram import quantile
from vtop.core.session.facts import LIVE
from vtop.core.session.fleet import (
    FleetRow,
    engine_summaries,
    filter_rows,
    fleet_rows,
    fleet_summary,
    sort_rows,
)
from vtop.core.session.fleet_groups import GROUP_KEYS, group_rows
from vtop.core.session.session import Session
from vtop.core.store.summary import TargetSummary
from vtop.ui.chart_data import CHARTS, bucket_counts, line_points, mark_offsets
from vtop.ui.format import number, seconds
from vtop.ui.shown import Shown, prometheus_down
from vtop.ui.widgets.gpu_panel import GpuPanel
from vtop.ui.widgets.time_chart import TimeChart
from vtop.ui.widgets.ttft_histogram import TtftHistogram

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.widget import Widget

    from vtop.ui.screens.fleet import FleetScreen


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
    if shown.target is None or history is None:
        return
    now, target, stale = shown.now, shown.target.target, shown.stale_note
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


def fleet_line(session: Session, mode: str, rows: list[FleetRow], now: float) -> str:
    """Fleet-wide figures and the findings across servers; the TTFT is the rows' own (their
    histograms merged by bucket), so the line agrees with the table."""
    total = fleet_summary(session, rows)
    live = sum(1 for row in rows if row.state in LIVE)
    triage = session.fleet.triage
    across = ", ".join(short_key_of(f.rule.id, f.labels) for f in triage.findings) if triage else ""
    down = prometheus_down(session, now)
    second = (
        f"{down}; figures are the last read"
        if down
        else f"across servers: {across or 'no imbalance'}"
    )
    return (
        f" {len(session.targets)} servers, {live} live  run {number(total.running)}"
        f"  wait {number(total.waiting)}  gen {number(total.generation_tokens_per_s)} tok/s"
        f"  TTFT p50/p99 {seconds(total.ttft_p50_s)}/{seconds(total.ttft_p99_s)}"
        f"\n {second}  {mode}"
    )


def short_key_of(rule_id: str, labels: tuple[tuple[str, str], ...]) -> str:
    """B1@host:port - the rule and the instance it names."""
    instance = dict(labels).get("instance")
    return f"{rule_id}@{instance}" if instance else rule_id


def show_fleet(session: Session, screen: FleetScreen, now: float, mode: str) -> None:
    """Fill the fleet table: sorted, filtered, engines of data-parallel servers below theirs."""
    every = fleet_rows(session, now)
    listed = group_rows(session, every, screen.group_key)
    rows = sort_rows(filter_rows(listed, screen.filter_text), screen.sort_key, screen.descending)
    engines = (
        {r.target: engine_summaries(session, r.target, now) for r in rows if r.engines > 1}
        if screen.group_key == GROUP_KEYS[0]
        else {}
    )
    screen.show(fleet_line(session, mode, every, now), rows, engines)
