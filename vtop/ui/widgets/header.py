"""One-line header by priority: state, sample age and mode first; the server, shortened, last."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static

from vtop.ui.shown import fit


class Header(Static):
    """Shows what vtop is watching and how fresh the data is; cut from the end, never the state."""

    DEFAULT_CSS = """
    Header { height: 1; background: $primary-background; }
    """

    parts: reactive[tuple[str, ...]] = reactive((), layout=False)

    def watch_parts(self) -> None:
        self.update(fit(self.parts, self.size.width or 80), layout=False)

    def on_resize(self) -> None:
        self.watch_parts()
