"""The fleet table: one row per server (engines of data-parallel servers below it), sortable and
filterable; Enter opens that server's dashboard, Esc there comes back."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.widgets.data_table import ColumnKey

from vtop.core.session.fleet import SORT_KEYS, FleetRow
from vtop.core.session.fleet_groups import GROUP_KEYS
from vtop.core.status import Status
from vtop.core.store.summary import TargetSummary
from vtop.text.fold import cut
from vtop.ui.fleet_shown import FleetShown, TableChoice
from vtop.ui.format import number, percent, seconds

COLUMNS = ("server", "state", "finding", "run", "wait", "KV", "pre/s", "TTFT99", "gen/s", "model")
COLUMN_OF_SORT = {
    "target": 0,
    "state": 1,
    "finding": 2,
    "running": 3,
    "waiting": 4,
    "kv": 5,
    "preempt": 6,
    "ttft": 7,
    "gen": 8,
}
"""The column each sort key sorts by (it carries the sort marker)."""
FINDING_WIDTH = 26
SERVER_WIDTH = 21
SEVERITY_STYLE = {Status.CRITICAL: "bold reverse", Status.WARNING: "bold"}
SEVERITY_WORD = {Status.CRITICAL: "CRIT", Status.WARNING: "WARN", Status.INFO: "info"}


class FleetTable(DataTable[str | Text]):
    """A DataTable whose header and rows are drawn with the widths it last measured.

    DataTable measures column widths on an idle event but keys its line caches on a count that
    measuring does not advance, so a header or row drawn before the measure keeps its old
    widths until some later edit: the header and the cells then disagree, by how busy the host
    was. Advancing the count after a measure is the smallest fix Textual 8 allows."""

    async def _on_idle(self, event: events.Idle) -> None:
        measures = self._require_update_dimensions or bool(self._updated_cells)
        await super()._on_idle(event)
        if measures:
            self._update_count += 1
            self.refresh()


def figures(summary: TargetSummary | None) -> list[str]:
    """The figure cells of a row: running, waiting, KV, preemptions/s, TTFT p99, gen tok/s."""
    if summary is None:
        return ["-"] * 6
    return [
        number(summary.running),
        number(summary.waiting),
        percent(summary.kv_usage),
        number(summary.preemptions_per_s, "{:.2f}"),
        seconds(summary.ttft_p99_s),
        number(summary.generation_tokens_per_s),
    ]


def row_cells(row: FleetRow) -> list[str | Text]:
    """The cells of one server's row (the primary finding early, to fit 80 columns)."""
    judged = row.summary is not None and row.state in ("live", "restarted", "stale")
    text = row.finding or ("ok" if judged else "-")
    if row.finding and row.severity in SEVERITY_WORD:
        text = f"{SEVERITY_WORD[row.severity]} {text}"
    finding = Text(cut(text, FINDING_WIDTH), style=SEVERITY_STYLE.get(row.severity, ""))
    server = cut(row.target.removeprefix("http://"), SERVER_WIDTH)
    return [server, row.state, finding, *figures(row.summary), row.model]


def column_labels(sort_key: str, descending: bool, group_key: str = GROUP_KEYS[0]) -> list[str]:
    """Column headers, the sorted one marked with the order (the first names the grouping)."""
    marked = COLUMN_OF_SORT[sort_key]
    arrow = "▼" if descending else "▲"
    names = (group_key, *COLUMNS[1:])
    return [f"{name} {arrow}" if index == marked else name for index, name in enumerate(names)]


def engine_cells(engine: str, summary: TargetSummary) -> list[str | Text]:
    """The cells of one data-parallel engine's row, under its server."""
    return [f"  engine {engine}", "", "", *figures(summary), ""]


def table_lines(
    rows: list[FleetRow], engines: dict[str, dict[str, TargetSummary]]
) -> list[tuple[str, list[str | Text]]]:
    """(row key, cells) for every server and, under it, its data-parallel engines."""
    lines: list[tuple[str, list[str | Text]]] = []
    for row in rows:
        lines.append((row.target, row_cells(row)))
        for engine, summary in engines.get(row.target, {}).items():
            lines.append((f"{row.target}#{engine}", engine_cells(engine, summary)))
    return lines


def _plain(cell: str | Text) -> Text:
    """A cell as text, never markup: a server named `[fe80::1]:8000` keeps its brackets, and
    the table does not parse markup in every visible cell at every redraw."""
    return Text(cell, no_wrap=True, end="") if isinstance(cell, str) else cell


class FleetScreen(Screen[None]):
    """Every server at a glance; the app fills it (widgets never fetch)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "open"),
        Binding("s", "sort", "sort"),
        Binding("g", "group", "group"),
        Binding("S", "reverse", "reverse", show=False),
        Binding("slash", "filter", "filter"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        Binding("q", "app.quit", "quit"),
    ]

    class Open(Message):
        """The user picked a server."""

        def __init__(self, target: str) -> None:
            super().__init__()
            self.target = target

    class Changed(Message):
        """Sort or filter changed: the app redraws the table."""

    def __init__(self) -> None:
        super().__init__()
        self.sort_key = SORT_KEYS[0]
        self.descending = False
        self.group_key = GROUP_KEYS[0]
        self._opens: dict[str, str] = {}
        self.filter_text = ""
        self.ready = False
        self._summary = ""
        self._lines: list[tuple[str, list[str | Text]]] = []
        self._columns: list[ColumnKey] = []

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-summary", markup=False)
        table = FleetTable(id="fleet-table", cursor_type="row")
        self._columns = table.add_columns(*column_labels(self.sort_key, self.descending))
        yield table
        yield Input(placeholder="filter: server, model, state or finding", id="fleet-filter")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(Input).display = False
        self.query_one(DataTable).focus()
        self.ready = True

    @property
    def choice(self) -> TableChoice:
        """How the user asked for the table (the app builds it so)."""
        return TableChoice(self.sort_key, self.descending, self.group_key, self.filter_text)

    def show(self, shown: FleetShown) -> None:
        """Redraw the table with rows already sorted and filtered; the cursor stays put."""
        if not self.ready:
            return
        if shown.line != self._summary:
            self._summary = shown.line
            self._show_summary(shown.line)
        rows = list(shown.rows)
        self._opens = {row.target: row.opens for row in rows if row.opens is not None}
        lines = table_lines(rows, shown.engines)
        if [key for key, _ in lines] == [key for key, _ in self._lines]:
            self._update_cells(lines)
        else:
            self._rebuild(lines)
        self._lines = lines

    def _show_summary(self, summary: str) -> None:
        """The fleet line. The screen is laid out again only when the line's height changes:
        its figures change every tick, and a layout of the whole screen each time was a tenth
        of the fleet dashboard's CPU at 100 servers."""
        line = self.query_one("#fleet-summary", Static)
        line.update(summary, layout=False)
        width, height = line.content_region.width, line.content_region.height
        line.clear_cached_dimensions()
        if not width or line.get_content_height(self.size, self.size, width) != height:
            line.refresh(layout=True)

    def _update_cells(self, lines: list[tuple[str, list[str | Text]]]) -> None:
        """Same rows in the same order: change only the cells that differ (cheap per tick)."""
        table: DataTable[str | Text] = self.query_one(DataTable)
        for (key, cells), (_, before) in zip(lines, self._lines, strict=True):
            for column, (cell, old) in enumerate(zip(cells, before, strict=True)):
                if cell != old:
                    table.update_cell(key, self._columns[column], _plain(cell))

    def _rebuild(self, lines: list[tuple[str, list[str | Text]]]) -> None:
        """New rows or order: rebuild the table, keeping the cursor on its server."""
        table: DataTable[str | Text] = self.query_one(DataTable)
        selected = self.selected
        table.clear()
        for key, cells in lines:
            table.add_row(*map(_plain, cells), key=key)
        if selected is not None and selected in {key for key, _ in lines}:
            table.move_cursor(row=table.get_row_index(selected), animate=False)

    @property
    def selected(self) -> str | None:
        """The server under the cursor (an engine row selects its server)."""
        table: DataTable[str | Text] = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return None if key is None else key.split("#")[0]

    def action_open(self) -> None:
        """Drill into the selected server (from a group's row: its worst replica)."""
        if self.selected is not None:
            self.post_message(self.Open(self._opens.get(self.selected, self.selected)))

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open()

    def action_sort(self) -> None:
        """Sort by the next column (figures largest first)."""
        self.sort_key = SORT_KEYS[(SORT_KEYS.index(self.sort_key) + 1) % len(SORT_KEYS)]
        self.descending = self.sort_key not in ("target", "state", "finding")
        self._changed()

    def action_group(self) -> None:
        """List each server, or a row per namespace or model (each opens its worst replica)."""
        self.group_key = GROUP_KEYS[(GROUP_KEYS.index(self.group_key) + 1) % len(GROUP_KEYS)]
        self._changed()

    def action_reverse(self) -> None:
        """Flip the sort order."""
        self.descending = not self.descending
        self._changed()

    def action_filter(self) -> None:
        """Show the filter box."""
        box = self.query_one(Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        """Drop the filter and hide its box; with no filter, Esc goes on to the app (which
        leaves a one-server table)."""
        box = self.query_one(Input)
        if not box.display and not self.filter_text:
            raise SkipAction()
        box.value, box.display, self.filter_text = "", False, ""
        self.query_one(DataTable).focus()
        self._changed()

    @on(Input.Changed, "#fleet-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self._changed()

    def _changed(self) -> None:
        """Mark the sorted column and ask the app for a redraw."""
        table: DataTable[str | Text] = self.query_one(DataTable)
        labels = column_labels(self.sort_key, self.descending, self.group_key)
        for key, label in zip(self._columns, labels, strict=True):
            table.columns[key].label = Text(label)
        table.refresh()
        self.post_message(self.Changed())

    @on(Input.Submitted, "#fleet-filter")
    def _filter_done(self) -> None:
        self.query_one(DataTable).focus()
