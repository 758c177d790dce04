"""Run vtop as a user would (a subprocess) and measure what it cost: time and peak memory."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MEASURED = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "open(sys.argv[1], 'w').write(str(peak * 1024))\n"
    "sys.exit(code)\n"
)
"""A wrapper whose only child is vtop, so its children's peak RSS is vtop's own."""


@dataclass(frozen=True)
class Ran:
    """Exit code, output, wall time and peak resident memory of one vtop command."""

    code: int
    out: str
    err: str
    seconds: float
    peak_rss_bytes: int

    @property
    def text(self) -> str:
        """Everything it printed."""
        return self.out + self.err


def vtop(
    *args: str, timeout_s: float = 120, env: dict[str, str] | None = None, stdin: str = ""
) -> Ran:
    """`python -m vtop ARGS` with its exit code, output, time and peak RSS."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as peak:
        started = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-c", MEASURED, peak.name, sys.executable, "-m", "vtop", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, **(env or {}), "NO_COLOR": "1", "PYTHONFAULTHANDLER": "1"},
            start_new_session=True,
        )
        try:
            out, err = process.communicate(stdin.encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired as expired:
            where = interrupted(process)
            message = f"vtop {' '.join(args)} ran past {timeout_s} s; where it was:\n{where}"
            raise AssertionError(message) from expired
        seconds = time.monotonic() - started
        rss = int(peak.read() or 0)
    return Ran(process.returncode, out.decode(), err.decode(), seconds, rss)


def interrupted(process: subprocess.Popen[bytes]) -> str:
    """Stop a command that ran too long: SIGABRT first, on which Python's fault handler (on in
    every command run here) prints each thread's stack to stderr, then SIGKILL; the tail of
    what it wrote."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGABRT)
    try:
        out, err = process.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
    return (out.decode(errors="replace")[-1000:] + err.decode(errors="replace"))[-4000:]
