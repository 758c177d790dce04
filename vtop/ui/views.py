"""From session state to what each widget shows."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vtop.core.engine import Triage
from vtop.core.feeds import LiveFeed, ReplayFeed
from vtop.core.fleet import (
    LIVE,
    FleetRow,
    engine_summaries,
    filter_rows,
    fleet_rows,
    fleet_summary,
    label_values,
    last_restart,
    sort_rows,
    target_state,
)
from vtop.core.histogram import quantile
from vtop.core.session import Session, TargetView
from vtop.core.summary import TTFT
from vtop.ui.chart_data import bucket_counts, line_points, mark_offsets
from vtop.ui.format import clock_time, duration, number, seconds
from vtop.ui.widgets.time_chart import TimeChart
from vtop.ui.widgets.ttft_histogram import TtftHistogram

if TYPE_CHECKING:
    from textual.screen import Screen

    from vtop.ui.app import VtopApp
    from vtop.ui.screens.fleet import FleetScreen


def uptime(session: Session, view: TargetView, now: float) -> float | None:
    """Seconds since the vLLM process started."""
    started = session.store.latest_by("process_start_time_seconds", now, {"instance": view.target})
    values = list(started.values())
    return now - values[0] if values else None


def header_text(app: VtopApp, now: float) -> str:
    """Endpoint, model, version, engines, uptime, state, sample age, mode."""
    session, view = app.session, app.view
    mode = _mode(app, now)
    if view is None:
        return f" vtop  {', '.join(app.settings.urls)}  connecting  {mode}"
    models = (
        ",".join(Path(m).name or m for m in label_values(session, view.target, "model_name")) or "?"
    )
    engines = len(label_values(session, view.target, "engine")) or 1
    version = view.config.facts.version or "?"
    state = target_state(view, now, last_restart(session, view.target))
    age = app.clock() - view.last_timestamp if view.last_timestamp is not None else None
    position = ""
    if len(session.targets) > 1:
        position = f" [{app.target_index % len(session.targets) + 1}/{len(session.targets)}]"
    tail = mode if isinstance(app.feed, ReplayFeed) else f"age {seconds(age)}  {mode}"
    return (
        f" {view.target}{position}  {models}  vLLM {version}  engines {engines}"
        f"  up {duration(uptime(session, view, now))}  {state.upper()}  {tail}"
    )


def _mode(app: VtopApp, now: float) -> str:
    """Interval and pause for live data; position and speed for a replay."""
    paused = "  PAUSED" if app.paused else ""
    if isinstance(app.feed, ReplayFeed):
        speed = "max" if app.feed.speed <= 0 else f"x{app.feed.speed:g}"
        end = "  END" if app.feed.finished else ""
        return f"replay {clock_time(now)} {speed}{paused}{end}"
    return f"every {app.interval:g}s{paused}"


def banner_text(app: VtopApp, now: float) -> str | None:
    """What is wrong with the data, or None."""
    view = app.view
    if view is None or view.last_scrape is None:
        return None
    scrape = view.last_scrape
    exited = app.session.exited.get(view.target)
    if exited is not None:
        return f" {exited.text}"
    if not scrape.ok:
        last_ok = app.session.store.target_last_ok(view.target)
        since = f"last data {duration(now - last_ok)} ago" if last_ok else "no data yet"
        retry = ""
        if isinstance(app.feed, LiveFeed):
            retry = f"; retrying in {app.feed.backoff.waiting(app.clock()):.0f}s"
        return f" {view.target} {scrape.status.value}: {scrape.error} ({since}{retry})"
    if scrape.parse_errors:
        first = scrape.parse_errors[0]
        return f" {len(scrape.parse_errors)} malformed /metrics line(s) skipped, e.g. {first}"
    return None


def no_finding(view: TargetView | None) -> str:
    """What the findings panel says when it is empty."""
    if view is None or view.triage is None:
        return "No data yet."
    unchecked = len(view.triage.unchecked)
    extra = f" ({unchecked} rules not checked: press d)" if unchecked else ""
    return f"No finding: nothing to act on.{extra}"


def draw_charts(
    app: VtopApp, screen: Screen[object], view: TargetView, now: float, force: bool = False
) -> None:
    """Redraw the charts on screen that moved by a dot (scrolling into view forces a redraw).

    A chart changes only when time has moved by one braille dot (span / dots across): between
    those moments only its title is updated.
    """
    first = view.history[0][0] if view.history else now
    span = chart_span(now - first, app.settings.history_s)
    marks = mark_offsets(app.session.marks, view.target, now, span)
    visible = screen.query_one("#charts").region
    for chart in screen.query(TimeChart):
        if chart.display and chart.region.overlaps(visible):
            spec = chart.spec
            chart.set_title(chart_title(spec.title, view))
            if force or chart.due(now, span, view.target):
                lines = [line_points(view.history, line, now, span) for line in spec.lines]
                limit = view.config.number(spec.limit) if spec.limit else None
                chart.show(lines, span, (now, view.target), limit, marks)
    histogram = screen.query_one(TtftHistogram)
    if histogram.display and histogram.region.overlaps(visible):
        draw_histogram(histogram, app.session, view, now, app.settings.window_s)


SPAN_STEPS_S = (30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


def chart_span(seen_s: float, history_s: float) -> float:
    """The x-axis span: the first step that holds what has been seen, at most the history.

    Steps keep the axis labels still while data arrives, and fill the width early on.
    """
    step = next((s for s in SPAN_STEPS_S if s >= seen_s), history_s)
    return min(step, history_s)


def chart_title(title: str, view: TargetView) -> str:
    """Chart title with the current figure(s) and context."""
    summary = view.summary
    if summary is None:
        return title
    if title.startswith("Requests"):
        limit = view.config.number("max_num_seqs")
        cap = f" of max {limit:.0f}" if limit is not None else ""
        return (
            f"Requests: {number(summary.running)} running{cap}, {number(summary.waiting)} waiting"
        )
    if title.startswith("KV"):
        tokens = view.config.number("kv_capacity_tokens")
        capacity = f" of {tokens:,.0f} tokens" if tokens is not None else ""
        usage = number(None if summary.kv_usage is None else summary.kv_usage * 100)
        return f"KV cache: {usage}%{capacity}"
    if title.startswith("Preemptions"):
        return f"Preemptions/s: {number(summary.preemptions_per_s, '{:.2f}')}"
    return title


def draw_histogram(
    histogram: TtftHistogram, session: Session, view: TargetView, now: float, window: float
) -> None:
    """TTFT buckets filled during the window, p50/p90/p99 marked."""
    buckets = session.store.histogram_buckets(TTFT, now, window, {"instance": view.target})
    cumulative = buckets.get((), [])
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


def triage_with_fleet(session: Session, view: TargetView | None) -> Triage | None:
    """A server's own findings, then fleet findings that name it (e.g. B1 on this replica)."""
    if view is None or view.triage is None:
        return None
    fleet = session.fleet.triage
    about = (
        [f for f in fleet.findings if dict(f.labels).get("instance") == view.target]
        if fleet
        else []
    )
    if not about:
        return view.triage
    own = view.triage
    return Triage(own.findings + tuple(about), own.unchecked, own.errors)


def fleet_line(app: VtopApp, now: float, rows: list[FleetRow]) -> str:
    """Fleet-wide figures (histograms merged by bucket) and the findings across servers."""
    session = app.session
    total = fleet_summary(session, rows)
    live = sum(1 for row in rows if row.state in LIVE)
    triage = session.fleet.triage
    across = ", ".join(short_key_of(f.rule.id, f.labels) for f in triage.findings) if triage else ""
    return (
        f" {len(session.targets)} servers, {live} live  run {number(total.running)}"
        f"  wait {number(total.waiting)}  gen {number(total.generation_tokens_per_s)} tok/s"
        f"  TTFT p50/p99 {seconds(total.ttft_p50_s)}/{seconds(total.ttft_p99_s)}"
        f"\n across servers: {across or 'no imbalance'}  {_mode(app, now).strip()}"
    )


def short_key_of(rule_id: str, labels: tuple[tuple[str, str], ...]) -> str:
    """B1@host:port - the rule and the instance it names."""
    instance = dict(labels).get("instance")
    return f"{rule_id}@{instance}" if instance else rule_id


def show_fleet(app: VtopApp, screen: FleetScreen, now: float) -> None:
    """Fill the fleet table: sorted, filtered, engines of data-parallel servers below theirs."""
    session = app.session
    every = fleet_rows(session, now)
    rows = sort_rows(filter_rows(every, screen.filter_text), screen.sort_key, screen.descending)
    engines = {r.target: engine_summaries(session, r.target, now) for r in rows if r.engines > 1}
    screen.show(fleet_line(app, now, every), rows, engines)
