"""A fault banner (unreachable, HTTP error, malformed /metrics); hidden when all is well."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static


class Banner(Static):
    """Says what is wrong with the data and what vtop does about it."""

    DEFAULT_CSS = """
    Banner {
        height: auto; max-height: 3; display: none; padding: 0 1;
        background: $error; color: $text;
    }
    Banner.-shown { display: block; }
    """

    text: reactive[str | None] = reactive(None, layout=True)

    def watch_text(self, text: str | None) -> None:
        self.set_class(text is not None, "-shown")
        self.update((text or "").strip())

    def say(self, text: str | None) -> None:
        """Show `text`, or hide when None."""
        self.text = text
