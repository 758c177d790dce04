"""A modal screen that shows a block of text (help, explanation, full diagnosis)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


def framed(title: str, subtitle: str, body: str | Text) -> VerticalScroll:
    """Scrollable text in a titled frame (the body of every modal screen). A string is shown
    as it is, never read as markup: a report's `[CRITICAL]` is text."""
    shown = Text(body) if isinstance(body, str) else body
    scroll = VerticalScroll(Static(shown, classes="modal-body"))
    scroll.border_title = title
    scroll.border_subtitle = subtitle
    return scroll


class TextScreen(ModalScreen[None]):
    """Scrollable text; Esc, q or the key that opened it closes it."""

    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > VerticalScroll {
        width: 90%; height: 90%; border: round $accent; background: $surface; padding: 0 1;
        scrollbar-size-vertical: 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "close"),
        Binding("j,down", "scroll(1)", "down", show=False),
        Binding("k,up", "scroll(-1)", "up", show=False),
    ]

    def __init__(self, title: str, body: str | Text) -> None:
        super().__init__()
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        yield framed(self.title_text, "Esc to close", self.body)

    def action_scroll(self, lines: int) -> None:
        """Scroll the text."""
        scroll = self.query_one(VerticalScroll)
        # from where the last key left it, not from where the screen last drew it: a burst of
        # keys before a refresh scrolls a line per key
        scroll.scroll_to(y=scroll.scroll_target_y + lines, animate=False, immediate=True)
