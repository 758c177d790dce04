"""A vLLM server that vtop started: own session, log file, state file; outlives vtop.

Never a shell, never a kill by name: vtop signals only the process group it started, and only
after checking that the pid still belongs to that process (its kernel start time matches).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

STOP_TIMEOUT_S = 30.0


class ProcessError(RuntimeError):
    """A managed server could not be started, found or stopped."""


@dataclass(frozen=True)
class ServerState:
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
    """Environment variables given to the server on top of vtop's own (kept for restarts)."""

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


def is_alive(state: ServerState) -> bool:
    """True when the pid is running and is still the process vtop started."""
    started = kernel_start_time(state.pid)
    if started is None or is_zombie(state.pid):
        return False
    return state.kernel_start is None or started == state.kernel_start


def port_of(argv: Sequence[str]) -> int | None:
    """The --port value in an argv (vLLM's default 8000 when absent)."""
    for index, arg in enumerate(argv):
        if arg == "--port" and index + 1 < len(argv):
            return int(argv[index + 1])
        if arg.startswith("--port="):
            return int(arg.split("=", 1)[1])
    return 8000


def start(
    name: str, argv: Sequence[str], directory: Path, env: Mapping[str, str] | None = None
) -> tuple[ServerState, subprocess.Popen[bytes]]:
    """Start argv in its own session, output to a log file; write the state file.

    `env` is added to vtop's environment and remembered, so a restart gets the same.
    """
    extra = dict(env or {})
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / f"{name}.log"
    with log_path.open("ab") as log:
        try:
            child = subprocess.Popen(
                list(argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **extra},
            )
        except OSError as error:
            raise ProcessError(f"cannot start {argv[0]}: {error}") from None
    state = ServerState(
        name,
        child.pid,
        os.getpgid(child.pid),
        tuple(argv),
        port_of(argv),
        str(log_path),
        time.time(),
        kernel_start_time(child.pid),
        extra,
    )
    save(state, directory)
    return state, child


def save(state: ServerState, directory: Path) -> Path:
    """Write the state file atomically."""
    path = directory / f"{state.name}.json"
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(asdict(state), indent=2))
    partial.replace(path)
    return path


def load_states(directory: Path) -> list[tuple[ServerState | None, Path, str]]:
    """Every state file: (state or None, path, problem) — a broken file is reported, not used."""
    found: list[tuple[ServerState | None, Path, str]] = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            data["argv"] = tuple(data["argv"])
            found.append((ServerState(**data), path, ""))
        except (OSError, ValueError, TypeError, KeyError) as error:
            found.append((None, path, f"unreadable state file: {error}"))
    return found


def managed(directory: Path) -> list[ServerState]:
    """Servers whose state file is readable (alive or not)."""
    return [state for state, _, _ in load_states(directory) if state is not None]


def stop(state: ServerState, timeout: float = STOP_TIMEOUT_S) -> str:
    """SIGTERM the server's group, wait, then SIGKILL; refuses a pid that is not ours any more."""
    if not is_alive(state):
        return f"{state.name}: not running (pid {state.pid} gone or reused); nothing signalled"
    _signal_group(state.pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap()
        if not is_alive(state):
            _signal_group(state.pgid, signal.SIGKILL)
            return f"{state.name}: stopped (SIGTERM)"
        time.sleep(0.2)
    _signal_group(state.pgid, signal.SIGKILL)
    return f"{state.name}: killed (SIGKILL after {timeout:.0f} s)"


def _signal_group(pgid: int, signum: int) -> None:
    """Signal a process group that may already be gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def restart(state: ServerState, argv: Sequence[str], directory: Path) -> ServerState:
    """Stop the server and start it again with `argv` (same name, log and environment)."""
    stop(state)
    new_state, child = start(state.name, argv, directory, state.env)
    _REAPERS[new_state.pid] = child
    return new_state


_REAPERS: dict[int, subprocess.Popen[bytes]] = {}
"""Children started by this vtop process, polled so that an exited server is never a zombie."""


def reap() -> None:
    """Collect the exit status of children that exited."""
    for pid, child in list(_REAPERS.items()):
        if child.poll() is not None:
            del _REAPERS[pid]


def keep_reaped(state: ServerState, child: subprocess.Popen[bytes]) -> None:
    """Remember a child so that reap() collects it."""
    _REAPERS[state.pid] = child


def forget(state: ServerState, directory: Path) -> None:
    """Remove a server's state file (its log is kept)."""
    (directory / f"{state.name}.json").unlink(missing_ok=True)


def read_log(state: ServerState, offset: int = 0) -> tuple[str, int]:
    """Log text from `offset` and the new offset (a truncated log restarts at 0)."""
    path = Path(state.log_path)
    try:
        size = path.stat().st_size
        with path.open("rb") as log:
            log.seek(offset if offset <= size else 0)
            data = log.read()
            return data.decode(errors="replace"), log.tell()
    except OSError:
        return "", offset
