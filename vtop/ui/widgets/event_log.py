"""Timestamped events: findings appearing and clearing, restarts, bursts, outages."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from vtop.core.frame import EventKind
from vtop.core.session.session import Mark
from vtop.ui.format import clock_time

STYLES = {
    EventKind.FINDING: "bold",
    EventKind.CLEARED: "dim",
    EventKind.RESTART: "reverse",
    EventKind.APPLIED: "reverse",
}


class EventLog(Static):
    """Newest events first."""

    newest: reactive[tuple[Mark, ...]] = reactive((), layout=False)

    def __init__(self) -> None:
        super().__init__(id="events", classes="panel")
        self.border_title = "Events"

    def show(self, marks: Iterable[Mark], limit: int = 50) -> None:
        """Render the newest `limit` marks."""
        self.newest = tuple(list(marks)[-limit:])

    def watch_newest(self, newest: tuple[Mark, ...]) -> None:
        text = Text()
        for mark in newest[::-1]:
            text.append(f"{clock_time(mark.timestamp)} ", style="dim")
            text.append(f"{mark.text}\n", style=STYLES.get(mark.kind, ""))
        self.update(text if text else Text("no events yet", style="dim"), layout=False)
