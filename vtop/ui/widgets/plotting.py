"""One fix to plotext, applied before any chart is drawn.

plotext's `_utility.no_duplicates` removes duplicate points with `set()`, so where points overlap
(tick labels, lines, markers) which one is drawn depends on Python's per-process string hashing:
the same data renders differently from run to run. An order-preserving dedupe makes the charts
deterministic (the snapshot tests depend on it); the result is otherwise the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from plotext import _utility


def _no_duplicates(data: Iterable[Any]) -> list[Any]:
    """Duplicates removed, first occurrence kept, order kept."""
    return list(dict.fromkeys(data))


_utility.no_duplicates = _no_duplicates
