"""The primary finding's action in one line, always on screen (80x24 included)."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static


class ActionLine(Static):
    """`CRITICAL M1 preemption storm  --max-num-seqs 16 -> 1  e: why`."""

    DEFAULT_CSS = """
    ActionLine { height: auto; max-height: 2; text-style: bold; }
    """

    text: reactive[str] = reactive("", layout=True)

    def watch_text(self, text: str) -> None:
        self.update(text)
