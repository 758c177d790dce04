"""New lines of a managed server's log file, read once per tick."""

from __future__ import annotations

from vtop.core.managed_server import ManagedServer, read_log


class LogTail:
    """Follows a log file; the first read returns the whole history."""

    def __init__(self, state: ManagedServer, start_offset: int = 0) -> None:
        self.state = state
        self.offset = start_offset
        self._partial = ""

    def new_lines(self) -> tuple[str, ...]:
        """Complete lines written since the last call."""
        text, self.offset = read_log(self.state, self.offset)
        text = self._partial + text
        lines = text.split("\n")
        self._partial = lines.pop()
        return tuple(lines)

    def follow(self, state: ManagedServer) -> None:
        """Follow the same log after a restart (the file is appended to)."""
        self.state = state
