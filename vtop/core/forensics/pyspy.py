"""One read of a process's Python stacks with py-spy (`py-spy dump --json --nonblocking`):
read-only (the process is not paused, nothing is written to it), under a deadline.

py-spy is the maintained tool for this (it reads the interpreter's memory from outside, for
every CPython vtop supports); vtop only runs it and reads its JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

PTRACE_FIX = (
    "py-spy needs ptrace permission over the server's processes: run vtop as the user that "
    "runs vLLM (or with sudo); where /proc/sys/kernel/yama/ptrace_scope is 1 or more, "
    "`sudo sysctl kernel.yama.ptrace_scope=0`; in a container, start it with "
    "`--cap-add SYS_PTRACE`"
)


@dataclass(frozen=True)
class CodeFrame:
    """One Python frame: function, file and line."""

    function: str
    file: str
    line: int


@dataclass(frozen=True)
class ThreadStack:
    """One thread at one instant, innermost frame first."""

    name: str
    thread_id: int
    active: bool
    """Running or runnable (py-spy's `active`), not waiting in a system call."""
    owns_gil: bool
    frames: tuple[CodeFrame, ...]


@dataclass(frozen=True)
class Refused:
    """Why a process's stacks could not be read."""

    reason: str


def py_spy_path() -> str | None:
    """The py-spy executable: on PATH, else beside this interpreter (a venv not activated)."""
    found = shutil.which("py-spy")
    if found:
        return found
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(folder) / "py-spy"
        if candidate.exists():
            return str(candidate)
    return None


def parse_dump(text: str) -> list[ThreadStack]:
    """py-spy's JSON dump as thread stacks (raises ValueError on anything else)."""
    threads = json.loads(text)
    if not isinstance(threads, list):
        raise ValueError("py-spy printed no list of threads")
    stacks = []
    for thread in threads:
        frames = tuple(
            CodeFrame(str(f.get("name", "?")), str(f.get("filename", "?")), int(f.get("line", 0)))
            for f in thread.get("frames", [])
        )
        stacks.append(
            ThreadStack(
                str(thread.get("thread_name") or ""),
                int(thread.get("thread_id", 0)),
                bool(thread.get("active")),
                bool(thread.get("owns_gil")),
                frames,
            )
        )
    return stacks


def refusal(pid: int, stderr: str) -> Refused:
    """py-spy's failure as one sentence, with the fix where it is a permission."""
    lowered = stderr.lower()
    if "permission" in lowered or "not permitted" in lowered:
        return Refused(f"process {pid}: not allowed to read its memory. {PTRACE_FIX}")
    if "no such" in lowered or ("failed to find" in lowered and "process" in lowered):
        return Refused(f"process {pid} is gone")
    last = stderr.strip().splitlines()[-1] if stderr.strip() else "no output"
    return Refused(f"process {pid}: py-spy could not read it ({last[:160]})")


def dump(pid: int, timeout_s: float) -> list[ThreadStack] | Refused:
    """The stacks of every thread of `pid` now, or why not (never raises)."""
    executable = py_spy_path()
    if executable is None:
        return Refused("py-spy is not installed: `pip install py-spy` (vtop depends on it)")
    argv = [executable, "dump", "--pid", str(pid), "--json", "--nonblocking"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Refused(f"process {pid}: py-spy took longer than {timeout_s:g} s")
    except OSError as error:
        return Refused(f"py-spy could not run: {error}")
    if done.returncode != 0:
        return refusal(pid, done.stderr)
    try:
        return parse_dump(done.stdout)
    except (ValueError, TypeError, AttributeError) as error:
        return Refused(f"process {pid}: py-spy's output was not its JSON ({error})")
