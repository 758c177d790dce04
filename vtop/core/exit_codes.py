"""Every exit code vtop's commands return, in one table (docs/exit-codes.md prints it).

A script reads the outcome from the code alone: a diagnosis's severity (0, 1, 2), a window
that saw a problem it could not judge yet (4, never mistaken for healthy), a target that
could not be diagnosed at all (3: unreachable, not vLLM, no traffic), and a mistake in the
command line or its files (64, sysexits' EX_USAGE, never mistaken for "critical").
"""

from __future__ import annotations

import enum


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


BY_SEVERITY = {
    "ok": ExitCode.OK,
    "info": ExitCode.OK,
    "warning": ExitCode.WARNING,
    "critical": ExitCode.CRITICAL,
}
"""The exit code of a finding's (or a triage's) severity."""

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


_WORST_FIRST = (ExitCode.CRITICAL, ExitCode.WARNING, ExitCode.INCOMPLETE, ExitCode.OK)


def worst(codes: list[int]) -> int:
    """The worst of several diagnoses' codes: critical, warning, incomplete, then ok (a code
    outside the four, such as could-not-diagnose, counts as incomplete)."""
    if not codes:
        return ExitCode.OK
    rank: dict[int, int] = {int(code): index for index, code in enumerate(_WORST_FIRST)}
    return min(codes, key=lambda code: rank.get(code, rank[ExitCode.INCOMPLETE]))
