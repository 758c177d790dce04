"""The one error the command line reports: `vtop: error: MESSAGE`, then its exit code."""

from __future__ import annotations

from vtop.core.status import ExitCode

EXIT_USAGE = ExitCode.USAGE
"""64 (sysexits' EX_USAGE): never 2, which `vtop diagnose` returns for a critical finding."""


class CliError(Exception):
    """A mistake the user can fix; main() prints it once, without a traceback."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
