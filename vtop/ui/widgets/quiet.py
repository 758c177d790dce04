"""Skip redraws whose input did not change: an update re-renders and may re-lay-out the screen."""

from __future__ import annotations

from collections.abc import Hashable
from weakref import WeakKeyDictionary

from textual.widget import Widget

_LAST: WeakKeyDictionary[Widget, Hashable] = WeakKeyDictionary()


def changed(widget: Widget, key: Hashable) -> bool:
    """True (and remembered) when `key` differs from the widget's last one."""
    if _LAST.get(widget) == key:
        return False
    _LAST[widget] = key
    return True
