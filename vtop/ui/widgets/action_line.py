"""The primary finding's action in one line, always on screen (80x24 included): fitted to the
width so the title gives way and the flag diff is never broken across lines."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static

from vtop.ui.shown import ActionParts, fit_action


class ActionLine(Static):
    """`CRITICAL M1 preemption storm  --max-num-seqs 16 -> 1  e: why`."""

    DEFAULT_CSS = """
    ActionLine { height: 1; text-style: bold; text-wrap: nowrap; }
    """

    shown: reactive[tuple[str, ActionParts | None]] = reactive(("", None), layout=False)

    def show(self, text: str, parts: ActionParts | None) -> None:
        """The action (in parts when it has them, to be fitted)."""
        self.shown = (text, parts)

    @property
    def text(self) -> str:
        """The action as drawn at the current width."""
        text, parts = self.shown
        width = max((self.size.width or 80) - 2, 20)  # the line's padding
        return fit_action(parts, width) if parts is not None else text

    def watch_shown(self) -> None:
        self.update(self.text, layout=False)

    def on_resize(self) -> None:
        self.watch_shown()
