"""One-line header: endpoint, model, version, engines, uptime, state, sample age."""

from __future__ import annotations

from textual.widgets import Static


class Header(Static):
    """Shows what vtop is watching and how fresh the data is."""

    DEFAULT_CSS = """
    Header { height: 1; background: $primary-background; }
    """
