"""The requests view (`R`): the requests in flight (when vtop's middleware in vLLM lists
them), then the requests that finished lately, from vLLM's spans, as a table
sortable by any of its figures; Enter opens one request's timeline with the requests it waited
behind; under the table, the requests that held up others. The app gives it the spans and the
findings (widgets never fetch)."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from vtop.core.frame import RequestSpan
from vtop.core.session.request_view import SORTS, ranked
from vtop.text.requests import row_cells, timeline_lines
from vtop.ui.requests_shown import RequestsShown
from vtop.ui.screens.text_screen import TextScreen

COLUMNS = ("request", "e2e", "TTFT", "#queue=prefill-decode", "in", "out", "max")
LISTED = 200
"""Rows the table holds (the slowest by the sort key)."""


class RequestsScreen(Screen[None]):
    """The requests table; `s` sorts by the next figure, Enter shows a request's timeline."""

    DEFAULT_CSS = """
    RequestsScreen #requests-title { height: auto; color: $text-muted; }
    RequestsScreen #requests-in-flight { height: auto; max-height: 8; }
    RequestsScreen #requests-table { height: 1fr; }
    RequestsScreen #requests-held-up { height: auto; max-height: 12; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "timeline"),
        Binding("s", "sort", "sort"),
        Binding("escape,q,R", "app.pop_screen", "back"),
    ]

    def __init__(self, shown: RequestsShown) -> None:
        super().__init__()
        self.shown = shown
        self.sort_key = "e2e"
        self._by_key: dict[str, RequestSpan] = {}

    def compose(self) -> ComposeResult:
        if self.shown.in_flight:
            in_flight = "\n".join(self.shown.in_flight)
            yield Static(in_flight, id="requests-in-flight", markup=False)
        yield Static(id="requests-title", markup=False)
        table: DataTable[str] = DataTable(id="requests-table", cursor_type="row")
        table.add_columns(*COLUMNS)
        yield table
        yield Static("\n".join(self.shown.held_up), id="requests-held-up", markup=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._fill()
        self.query_one(DataTable).focus()

    def _fill(self) -> None:
        """The rows, largest `sort_key` first; the sorted column marked."""
        table: DataTable[str] = self.query_one(DataTable)
        table.clear()
        self._by_key = {}
        for index, span in enumerate(ranked(list(self.shown.spans), self.sort_key, LISTED)):
            key = f"{index}"
            self._by_key[key] = span
            table.add_row(*row_cells(span), key=key)
        self.query_one("#requests-title", Static).update(
            f"{self.shown.title}; sorted by {self.sort_key} (s: the next)"
        )

    def action_sort(self) -> None:
        """Sort by the next figure (largest first)."""
        keys = list(SORTS)
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)]
        self._fill()
        self.notify(f"sorted by {self.sort_key}, largest first", timeout=2)

    def action_open(self) -> None:
        """The request under the cursor, its moments and the requests it waited behind."""
        table: DataTable[str] = self.query_one(DataTable)
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        span = self._by_key.get(key or "")
        if span is not None:
            text = "\n".join(timeline_lines(span, self.shown.spans))
            self.app.push_screen(TextScreen(f"request {span.request_id}", text))

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open()
