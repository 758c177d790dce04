"""Ask before acting: shows what will change; y / Enter confirms, n / Esc cancels."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen

from vtop.ui.screens.text_screen import framed


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question with the details above it."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > VerticalScroll {
        width: 80%; height: auto; max-height: 80%; border: round $warning; background: $surface;
        padding: 0 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    def __init__(self, title: str, body: str) -> None:
        super().__init__()
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        yield framed(self.title_text, "y / Enter: do it   n / Esc: cancel", self.body)

    def action_answer(self, yes: bool) -> None:
        """Close with the answer."""
        self.dismiss(yes)
