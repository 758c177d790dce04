"""Driving the real dashboard in tests."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable

from textual.pilot import Pilot

from vtop.core.config.settings import Settings
from vtop.core.frame import Frame
from vtop.core.ingest.feeds import ReplayFeed
from vtop.core.rules.loader import load_rules
from vtop.ui.app import VtopApp
from vtop.ui.widgets.banner import Banner
from vtop.ui.widgets.header import Header


def replay_app(frames: list[Frame], settings: Settings | None = None) -> VtopApp:
    """The dashboard on frames given at once."""
    clock = frames[-1].timestamp
    feed = ReplayFeed(frames, speed=0)
    return VtopApp(settings or Settings(), feed, load_rules(), clock=lambda: clock)


async def wait_for(
    pilot: Pilot[int],
    condition: Callable[[], bool],
    timeout: float = 15,
    seen: Callable[[], object] = lambda: "",
) -> None:
    """Let the app run until `condition` holds; on timeout fail with what `seen` gives."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"condition not reached {seen()}"
        await pilot.pause(0.05)


def header(app: VtopApp) -> str:
    return str(app.query_one(Header).render())


def banner(app: VtopApp) -> str | None:
    widget = app.query_one(Banner)
    return str(widget.render()) if widget.has_class("-shown") else None


def screen_text(app: VtopApp) -> str:
    """What the terminal shows now, as text (rows from the SVG screenshot)."""
    svg = app.export_screenshot()
    rows: dict[float, list[tuple[float, str]]] = {}
    for match in re.finditer(
        r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg
    ):
        rows.setdefault(float(match[2]), []).append((float(match[1]), html.unescape(match[3])))
    lines = ("".join(part for _, part in sorted(rows[y])) for y in sorted(rows))
    return "\n".join(lines).replace("\xa0", " ")


def on_screen(needle: str, text: str) -> bool:
    """True when `needle` is shown, even wrapped over lines (spacing compared loosely)."""
    return " ".join(needle.split()) in " ".join(text.split())
