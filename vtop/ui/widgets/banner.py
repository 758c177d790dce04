"""A fault banner (unreachable, HTTP error, malformed /metrics); hidden when all is well."""

from __future__ import annotations

from textual.widgets import Static

from vtop.ui.widgets.quiet import changed


class Banner(Static):
    """Says what is wrong with the data and what vtop does about it."""

    DEFAULT_CSS = """
    Banner { height: auto; display: none; background: $error; color: $text; }
    Banner.-shown { display: block; }
    """

    def say(self, text: str | None) -> None:
        """Show `text`, or hide when None."""
        if changed(self, text):
            self.set_class(text is not None, "-shown")
            self.update(text or "")
