"""The words vtop says of a server, a window or a finding (`Status`), worst first, and every
exit code its commands return (`ExitCode`, in one table: docs/exit-codes.md prints it), each
status with its code.

A script reads the outcome from the code alone: a diagnosis's severity (0, 1, 2), a window
that saw a problem it could not judge yet (4, never mistaken for healthy), a target that
could not be diagnosed at all (3: unreachable, not vLLM, no traffic), and a mistake in the
command line or its files (64, sysexits' EX_USAGE, never mistaken for "critical").
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class ExitCode(enum.IntEnum):
    """What a vtop command's exit status means."""

    OK = 0
    """Healthy, or the command did what was asked."""
    WARNING = 1
    """A warning finding, or data no vLLM can export."""
    CRITICAL = 2
    """A critical finding."""
    UNKNOWN = 3
    """Could not diagnose or measure: unreachable, not vLLM, no traffic, a failed command."""
    INCOMPLETE = 4
    """The window saw something it could not judge yet (a queue with every rule pending, a
    window shorter than a rule the server needs): not healthy, run longer."""
    USAGE = 64
    """A mistake in the command line, a config, rules or another file the user gave."""
    INTERRUPTED = 130
    """Ctrl-C."""


MEANING = {
    ExitCode.OK: "healthy (or done)",
    ExitCode.WARNING: "warning, or data no vLLM can export",
    ExitCode.CRITICAL: "critical",
    ExitCode.UNKNOWN: "could not diagnose: unreachable, not vLLM, no traffic, or it failed",
    ExitCode.INCOMPLETE: "incomplete: a problem seen but not yet judged, or too short a window",
    ExitCode.USAGE: "a mistake in the command line or a file given to it",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}
"""One line per code, for `--help` epilogues and the docs."""


def epilog() -> str:
    """The exit-code table as one `--help` line."""
    return "exit codes: " + ", ".join(f"{int(code)} {text}" for code, text in MEANING.items())


class Status(enum.StrEnum):
    """One word for a diagnosis, a server's row, a finding's severity: worst first (the
    order of the members is the order every list of servers and findings is sorted by)."""

    CRITICAL = "critical"
    WARNING = "warning"
    INCOMPLETE = "incomplete"
    """Something seen and not yet judged: never mistaken for healthy."""
    UNKNOWN = "unknown"
    """Could not diagnose: unreachable, not vLLM, no traffic, no verdict yet."""
    INFO = "info"
    """Findings that are notes: healthy."""
    OK = "ok"

    @property
    def exit_code(self) -> ExitCode:
        """The exit code a command returns for it."""
        return _EXIT_OF[self]

    @property
    def rank(self) -> int:
        """0 for the worst (critical); sorts worst first."""
        return _RANK[self]

    @property
    def troubled(self) -> bool:
        """Not healthy: anything but ok and info."""
        return self not in (Status.OK, Status.INFO)


_RANK = {status: index for index, status in enumerate(Status)}
_EXIT_OF = {
    Status.CRITICAL: ExitCode.CRITICAL,
    Status.WARNING: ExitCode.WARNING,
    Status.INCOMPLETE: ExitCode.INCOMPLETE,
    Status.UNKNOWN: ExitCode.UNKNOWN,
    Status.INFO: ExitCode.OK,
    Status.OK: ExitCode.OK,
}
_STATUS_OF_CODE: dict[int, Status] = {
    int(code): status for status, code in reversed(_EXIT_OF.items())
}


def worst_status(statuses: Iterable[str]) -> Status:
    """The worst of several statuses (ok when there are none)."""
    return min((Status(status) for status in statuses), key=_RANK.__getitem__, default=Status.OK)


def worst(codes: list[int]) -> int:
    """The worst of several diagnoses' codes, in the order of `Status` (a code no status has,
    such as a usage error, counts as incomplete)."""
    if not codes:
        return ExitCode.OK
    return min(codes, key=lambda code: _STATUS_OF_CODE.get(code, Status.INCOMPLETE).rank)
