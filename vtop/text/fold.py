"""Fold a report to the terminal's width: every printed report fits an 80-column SSH window.

Lines longer than the width are wrapped at spaces, each continuation indented under its line
(a flag diff's `+ ` or `- ` line two more); a word longer than a whole line (a path, a URL) is
cut, so that nothing runs past the right edge. textwrap does the wrapping; this adds only the
indentation rule.
"""

from __future__ import annotations

import shutil
import textwrap

DEFAULT_WIDTH = 80
MIN_WIDTH = 40
"""Narrower than this, folding would make a report unreadable: it is folded at this width."""


def terminal_width() -> int:
    """The width to fold to: `$COLUMNS`, else the terminal's, else 80 (a pipe, a file)."""
    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def fold(text: str, width: int = DEFAULT_WIDTH) -> str:
    """The text with every line of more than `width` characters wrapped under itself."""
    return "\n".join(line for raw in text.split("\n") for line in fold_line(raw, width))


def fold_line(line: str, width: int) -> list[str]:
    """One line as the lines it folds into."""
    if len(line) <= width:
        return [line]
    body = line.lstrip(" ")
    indent = line[: len(line) - len(body)]
    if len(indent) > width // 2:
        indent = indent[: width // 2]
    hanging = indent + ("    " if body[:2] in ("+ ", "- ") else "  ")
    return textwrap.wrap(
        body,
        width,
        initial_indent=indent,
        subsequent_indent=hanging,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [line[:width]]


def cut(text: str, width: int) -> str:
    """The text in at most `width` columns: cut with `…` when longer."""
    return text if len(text) <= width else text[: width - 1] + "…"
