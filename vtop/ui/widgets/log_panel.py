"""The managed server's log: the newest lines, or the lines around a startup failure."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from vtop.core.config.startup_failures import StartupFailure, explain_failure

SHOWN_LINES = 200
ACCESS_LINE = re.compile(r'"(GET|POST|PUT|DELETE) /\S* HTTP/[\d.]+" \d{3}')
"""uvicorn's per-request lines (vtop's own /metrics polls among them): not shown."""
VLLM_PREFIX = re.compile(r"^\((\w+) pid=\d+\) (\w+) \d\d-\d\d (\d\d:\d\d:\d\d) \[[^\]]+\] ")
"""'(APIServer pid=1) INFO 11-29 11:11:30 [loggers.py:123] ' -> '11:11:30 INFO '."""


def compact(line: str) -> str:
    """A vLLM log line without process name, date and source location."""
    return VLLM_PREFIX.sub(lambda m: f"{m[3]} {m[2]} ", line)


class LogPanel(Static):
    """Tails the log vtop keeps for a server it started; hidden when there is none."""

    def __init__(self) -> None:
        super().__init__(id="log", classes="panel")
        self.border_title = "vLLM log"
        self._tail: list[str] = []
        self._failure: StartupFailure | None = None
        self._shown: tuple[int, str, bool] | None = None

    def show(self, lines: Sequence[str], exited: bool) -> None:
        """Render the tail; after an exit, the failure line and what it means come first."""
        key = (len(lines), lines[-1], exited) if lines else None
        if key is None or key == self._shown:
            return
        self._shown = key
        self.add_class("-has-log")
        recent = list(lines)[-SHOWN_LINES:]
        self._tail = [compact(line) for line in recent if not ACCESS_LINE.search(line)]
        self._failure = explain_failure("\n".join(self._tail)) if exited else None
        self._draw()

    def on_resize(self) -> None:
        """As many lines as fit."""
        self._draw()

    def _draw(self) -> None:
        """Render the kept tail at the current height."""
        rows = max(1, self.size.height - 2)
        self.update(_render(self._tail, self._failure, rows), layout=False)  # height is 1fr


def _render(tail: list[str], failure: StartupFailure | None, rows: int) -> Text:
    """Newest lines last, one row each; a failure's explanation and line on top."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if failure is not None:
        text.append(f"{failure.explanation}\n", style="bold reverse")
        text.append(f"{failure.line}\n", style="bold")
        rows -= 2
    shown = tail[-rows:] if rows > 0 else []
    for index, line in enumerate(shown):
        end = "\n" if index < len(shown) - 1 else ""
        text.append(line + end, style="bold" if "ERROR" in line else "")
    return text
