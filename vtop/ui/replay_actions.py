"""Replay controls: step, jump, speed (the app's key bindings call these)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vtop.core.feeds import ReplayFeed
from vtop.core.session import Session

if TYPE_CHECKING:
    from vtop.ui.app import VtopApp


def replay_feed(app: VtopApp) -> ReplayFeed | None:
    """The replay feed, or None (with a note) on live data."""
    if isinstance(app.feed, ReplayFeed):
        return app.feed
    app.notify("only when replaying a recording", timeout=2)
    return None


def step(app: VtopApp, frames: int) -> None:
    """Pause and move `frames` forward (or back when negative)."""
    feed = replay_feed(app)
    if feed is not None:
        app.paused = feed.paused = True
        seek(app, feed, feed.position + frames)


def jump(app: VtopApp, seconds: float) -> None:
    """Move by `seconds` of recorded time."""
    feed = replay_feed(app)
    if feed is not None and feed.position > 0:
        first = feed.recorded[0].timestamp
        offset = feed.recorded[feed.position - 1].timestamp - first + seconds
        seek(app, feed, feed.index_at(offset))


def seek(app: VtopApp, feed: ReplayFeed, index: int) -> None:
    """Bring the session to frame `index` of the recording."""
    fresh, frames = feed.seek(index)
    if fresh:
        app.session = Session(app.rules, app.options)
    for frame in frames:
        app.session.ingest(frame)
    app.refresh_views(even_paused=True)


def cycle_speed(app: VtopApp) -> None:
    """x1 -> x10 -> as fast as possible -> x1."""
    feed = replay_feed(app)
    if feed is not None:
        feed.speed = {1.0: 10.0, 10.0: 0.0}.get(feed.speed, 1.0)
        app.refresh_views()
