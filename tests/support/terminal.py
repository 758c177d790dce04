"""Run a command in a real pseudo-terminal of a given size, type keys into it, and read what it
drew (the dashboard as a user's terminal runs it, not through Textual's test harness)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ESCAPES = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|.)")


@dataclass(frozen=True)
class TerminalRun:
    """How a command in a terminal ended and what it wrote there."""

    returncode: int | None
    """None when it had to be killed."""
    output: bytes

    @property
    def text(self) -> str:
        """What was written, without the terminal's escape sequences."""
        return ESCAPES.sub(b"", self.output).decode(errors="replace")


def _read_for(fd: int, seconds: float, chunks: list[bytes]) -> None:
    """Read from the terminal for `seconds` (until it closes)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], min(left, 0.2))
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            return
        if not data:
            return
        chunks.append(data)


def run_in_terminal(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    keys: Sequence[tuple[float, bytes]] = (),
    size: tuple[int, int] = (80, 24),
    exit_within_s: float = 20.0,
) -> TerminalRun:
    """Start `argv` on a pseudo-terminal of `size` (columns, rows), type each key after its
    delay in seconds, then wait for the exit; a command still running is killed by its
    process group."""
    master, slave = pty.openpty()
    columns, rows = size
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    process = subprocess.Popen(
        list(argv),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    try:
        for delay, key in keys:
            _read_for(master, delay, chunks)
            os.write(master, key)
        deadline = time.monotonic() + exit_within_s
        while process.poll() is None and time.monotonic() < deadline:
            _read_for(master, 0.2, chunks)
        _read_for(master, 0.3, chunks)
        code = process.poll()
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        os.close(master)
    return TerminalRun(code, b"".join(chunks))
