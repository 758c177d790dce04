"""One-line header: endpoint, model, version, engines, uptime, state, sample age."""

from __future__ import annotations

from textual.widgets import Static

from vtop.ui.widgets.quiet import changed


class Header(Static):
    """Shows what vtop is watching and how fresh the data is."""

    DEFAULT_CSS = """
    Header { height: 1; background: $primary-background; }
    """

    def show(self, text: str) -> None:
        """Replace the line if it changed."""
        if changed(self, text):
            self.update(text, layout=False)  # one row whatever the text: repaint only
