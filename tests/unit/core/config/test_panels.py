"""The panel table: one name and one key per panel, and the help written from it."""

from __future__ import annotations

from vtop.core.config.panels import PANEL_NAMES, PANELS, help_words, key_range, widget_id


def test_every_panel_has_its_own_name_key_and_widget_id() -> None:
    keys = [panel.key for panel in PANELS]
    ids = [widget_id(panel) for panel in PANELS]
    assert len(set(PANEL_NAMES)) == len(PANELS) == len(set(keys)) == len(set(ids))
    assert all(len(key) == 1 for key in keys)


def test_the_help_lists_every_key_in_order_within_its_width() -> None:
    lines = help_words(52, "show or hide a panel:")
    text = "  ".join(lines)
    assert lines[0].startswith("show or hide a panel: 1 requests")
    assert all(len(line) <= 52 for line in lines)
    positions = [text.index(f"{panel.key} {panel.label}") for panel in PANELS]
    assert positions == sorted(positions)
    assert key_range() == f"{PANELS[0].key} ... {PANELS[-1].key}"
