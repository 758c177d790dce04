"""Timestamped events: findings appearing and clearing, restarts, bursts, outages."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.widgets import Static

from vtop.core.session import Mark
from vtop.ui.format import clock_time
from vtop.ui.widgets.quiet import changed

STYLES = {"finding": "bold", "cleared": "dim", "restart": "reverse", "applied": "reverse"}


class EventLog(Static):
    """Newest events first."""

    def __init__(self) -> None:
        super().__init__(id="events", classes="panel")
        self.border_title = "Events"

    def show(self, marks: Iterable[Mark], limit: int = 50) -> None:
        """Render the newest `limit` marks."""
        newest = tuple(list(marks)[-limit:])
        if not changed(self, newest):
            return
        text = Text()
        for mark in newest[::-1]:
            text.append(f"{clock_time(mark.timestamp)} ", style="dim")
            text.append(f"{mark.text}\n", style=STYLES.get(mark.kind, ""))
        self.update(text if text else Text("no events yet", style="dim"), layout=False)
