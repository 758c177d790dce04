"""The front door in one line, under the action line while canaries are sent (`--probe`):
what the user's stream did beside what the engine reports."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static


class FrontDoorLine(Static):
    """`front door: first token 3.27 s (engine 0.07 s), 20 tokens in 1 read, HTTP 200`."""

    DEFAULT_CSS = """
    FrontDoorLine { height: 1; display: none; padding: 0 1; text-wrap: nowrap; }
    FrontDoorLine.-shown { display: block; }
    """

    text: reactive[str | None] = reactive(None, layout=True)

    def watch_text(self, text: str | None) -> None:
        self.set_class(text is not None, "-shown")
        self.update(text or "")
