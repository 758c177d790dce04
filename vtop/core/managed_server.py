"""A managed vLLM server as its state file and /proc say it: what vtop remembers about a
server it started, where that is kept (private files in a private directory), whether the pid
is still that server, and its log. Nothing here starts or signals a process (that is
`vtop.core.manage.process`), so every floor may ask.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vtop.core.redact import redactor


@dataclass(frozen=True)
class ManagedServer:
    """What vtop remembers about a server it started (one JSON file per server)."""

    name: str
    pid: int
    pgid: int
    argv: tuple[str, ...]
    port: int | None
    log_path: str
    started_at: float
    kernel_start: int | None
    """The process's start time in clock ticks since boot (/proc/PID/stat), to detect pid reuse."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables given to the server on top of vtop's own (kept for restarts; a
    secret one is kept as <redacted> and named in `secret_env`)."""
    token: str = ""
    """A random mark in the server's environment (VTOP_SERVER_TOKEN), inherited by every process
    it starts: how vtop finds its engine processes even after they leave its session."""
    secret_env: tuple[str, ...] = ()
    """Variables whose values are secrets: never written; a restart takes them from this vtop
    process's memory or its environment."""

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port or 8000}"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """$VTOP_STATE_DIR, else $XDG_STATE_HOME/vtop/servers, else ~/.local/state/vtop/servers."""
    env = os.environ if env is None else env
    if "VTOP_STATE_DIR" in env:
        return Path(env["VTOP_STATE_DIR"])
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "vtop" / "servers"


def kernel_start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat, None when the process does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def is_zombie(pid: int) -> bool:
    """True when the process has exited but was not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def is_alive(state: ManagedServer) -> bool:
    """True when the pid is running and is still the process vtop started (a state file without
    the kernel start time proves nothing, so it is never trusted)."""
    started = kernel_start_time(state.pid)
    if started is None or is_zombie(state.pid) or state.kernel_start is None:
        return False
    return started == state.kernel_start


def private_directory(directory: Path) -> None:
    """Create a directory only its owner can enter (0700), tightening an existing one; the
    parents it has to create are made 0700 too (`~/.local/state/vtop` is vtop's alone)."""
    for missing in reversed([directory, *directory.parents]):
        if not missing.exists():
            try:
                missing.mkdir(mode=0o700)
            except FileExistsError:
                continue
            os.chmod(missing, 0o700)
    os.chmod(directory, 0o700)


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (0600), atomically."""
    partial = path.with_name(path.name + ".partial")
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        file.write(text)
    os.chmod(partial, 0o600)
    partial.replace(path)


def save(state: ManagedServer, directory: Path) -> Path:
    """Write the state file atomically."""
    path = directory / f"{state.name}.json"
    private_directory(directory)
    write_private(path, json.dumps(asdict(state), indent=2))
    return path


def load_states(directory: Path) -> list[tuple[ManagedServer | None, Path, str]]:
    """Every state file: (state or None, path, problem) — a broken file is reported, not used."""
    found: list[tuple[ManagedServer | None, Path, str]] = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            data["argv"] = tuple(data["argv"])
            data["secret_env"] = tuple(data.get("secret_env", ()))
            found.append((ManagedServer(**data), path, ""))
        except (OSError, ValueError, TypeError, KeyError) as error:
            found.append((None, path, f"unreadable state file: {error}"))
    return found


def managed(directory: Path) -> list[ManagedServer]:
    """Servers whose state file is readable (alive or not)."""
    return [state for state, _, _ in load_states(directory) if state is not None]


_REAPERS: dict[int, subprocess.Popen[bytes]] = {}
"""Children started by this vtop process, polled so that an exited server is never a zombie."""


def reap() -> None:
    """Collect the exit status of children that exited."""
    for pid, child in list(_REAPERS.items()):
        if child.poll() is not None:
            del _REAPERS[pid]


def keep_reaped(state: ManagedServer, child: subprocess.Popen[bytes]) -> None:
    """Remember a child so that reap() collects it."""
    _REAPERS[state.pid] = child


def forget(state: ManagedServer, directory: Path) -> None:
    """Remove a server's state file (its log is kept)."""
    (directory / f"{state.name}.json").unlink(missing_ok=True)


def read_log(state: ManagedServer, offset: int = 0) -> tuple[str, int]:
    """Log text from `offset` and the new offset (a truncated log restarts at 0)."""
    path = Path(state.log_path)
    try:
        size = path.stat().st_size
        with path.open("rb") as log:
            log.seek(offset if offset <= size else 0)
            data = log.read()
            return redactor().text(data.decode(errors="replace")), log.tell()
    except OSError:
        return "", offset
