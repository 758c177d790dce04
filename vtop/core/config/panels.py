"""The dashboard's panels, in one table: the name a setting and `--hide` use, the key that shows
or hides it, and its word in the help. The dashboard's layout (in this order), its key bindings,
its palette commands and its help are derived from this table; the settings check names
against it. Which widget draws a panel is the UI's business (`vtop.ui.panels.widget_for`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Panel:
    """One panel of the dashboard."""

    name: str
    """As written in `hidden_panels`, `--hide` and `VTOP_HIDE`."""
    key: str
    """The key that shows or hides it."""
    label: str
    """Its word in the help and the palette."""
    beside: bool = False
    """Drawn in the side column (beside the findings), not in the chart grid."""


PANELS = (
    Panel("requests", "1", "requests"),
    Panel("kv", "2", "KV"),
    Panel("preemptions", "3", "preempt"),
    Panel("ttft_histogram", "4", "TTFT histogram"),
    Panel("ttft", "5", "TTFT/E2E"),
    Panel("throughput", "6", "tokens/s"),
    Panel("latency", "7", "latency"),
    Panel("prefix_cache", "8", "prefix cache"),
    Panel("gpu", "9", "GPUs", beside=True),
    Panel("finished", "0", "finished by reason"),
)
PANEL_NAMES = tuple(panel.name for panel in PANELS)
PANEL_OF = {panel.name: panel for panel in PANELS}


def widget_id(panel: Panel) -> str:
    """The id of the widget that draws it (charts `chart-NAME`, side panels their name)."""
    return panel.name if panel.beside else f"chart-{panel.name}"


def key_range() -> str:
    """The keys, first and last, as the help writes them: `1 ... 0`."""
    return f"{PANELS[0].key} ... {PANELS[-1].key}"


def help_words(width: int, lead: str) -> list[str]:
    """`LEAD 1 requests  2 KV  ...` wrapped to `width` columns."""
    lines = [lead]
    for item in (f"{panel.key} {panel.label}" for panel in PANELS):
        gap = " " if lines[-1] == lead else "  "
        if len(lines[-1]) + len(gap) + len(item) <= width:
            lines[-1] += gap + item
        else:
            lines.append(item)
    return lines
