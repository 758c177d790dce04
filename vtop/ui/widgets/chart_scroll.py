"""The scrolling column of charts: charts off screen are not redrawn, so scrolling asks for it."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.message import Message


class ChartScroll(VerticalScroll):
    """Posts Scrolled when charts may have come into view."""

    class Scrolled(Message):
        """The visible charts changed."""

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(self.Scrolled())
