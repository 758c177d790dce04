"""A vLLM server that vtop started: own session, log file, state file; outlives vtop.

Never a shell, never a kill by name: vtop signals only the process group it started, and only
after checking that the pid still belongs to that process (its kernel start time matches).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vtop.core.redact import (
    REDACTED,
    Redactor,
    is_secret_name,
    redactor,
    remember,
    secrets_in_argv,
)

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


def is_alive(state: ServerState) -> bool:
    """True when the pid is running and is still the process vtop started (a state file without
    the kernel start time proves nothing, so it is never trusted)."""
    started = kernel_start_time(state.pid)
    if started is None or is_zombie(state.pid) or state.kernel_start is None:
        return False
    return started == state.kernel_start


TOKEN_ENV = "VTOP_SERVER_TOKEN"
SECRET_FLAGS_TO_ENV = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN"}
"""Secret flags vLLM also reads from the environment: passed that way, they are not in `ps`,
in vLLM's own 'non-default args' log line, or in the state file."""
_SECRETS: dict[str, dict[str, str]] = {}
"""Secret environment values of the servers this vtop process started, by name."""


def members(state: ServerState) -> list[int]:
    """Live processes that belong to the server: its session (vtop started it as a session
    leader), or carrying its token in their environment (they left the session with setsid(),
    or their parent exited). Never found by name."""
    session = state.pid if is_alive(state) else None  # a dead leader's pid may be reused
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        if is_zombie(pid):
            continue
        if (session is not None and _session_of(pid) == session) or _carries(pid, state):
            found.append(pid)
    return found


def _session_of(pid: int) -> int | None:
    """Field 6 of /proc/PID/stat (the session id)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def _carries(pid: int, state: ServerState) -> bool:
    """True when the process's environment holds the server's token."""
    if not state.token:
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{TOKEN_ENV}={state.token}".encode() in environ.split(b"\0")


def listeners(port: int) -> list[int]:
    """Pids with a listening TCP socket on `port` (from /proc/net/tcp{,6} and /proc/PID/fd)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    if not inodes:
        return []
    owners = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    owners.append(int(entry.name))
                    break
    return owners


def foreign_listener(state: ServerState) -> int | None:
    """A process listening on the server's port that is not the server's own (None when the
    port is the server's, or nobody listens yet)."""
    if state.port is None:
        return None
    owners = listeners(state.port)
    ours = set(members(state)) | ({state.pid} if is_alive(state) else set())
    foreign = [pid for pid in owners if pid not in ours]
    return foreign[0] if foreign and not ours.intersection(owners) else None


def secrets_to_env(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """argv without the secret flags vLLM also reads from the environment, env with them."""
    words, moved = list(argv), dict(env)
    for flag, variable in SECRET_FLAGS_TO_ENV.items():
        for index, word in enumerate(words):
            if word == flag and index + 1 < len(words):
                moved[variable] = words[index + 1]
                del words[index : index + 2]
                break
            if word.startswith(flag + "="):
                moved[variable] = word.split("=", 1)[1]
                del words[index]
                break
    return words, moved


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
    command, extra = secrets_to_env(argv, env or {})
    port = port_of(command)
    taken = listeners(port) if port is not None else []
    if taken:
        raise ProcessError(f"port {port} is already in use (pid {', '.join(map(str, taken))})")
    private_directory(directory)
    log_path = directory / f"{name}.log"
    token = secrets.token_hex(16)
    with os.fdopen(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log:
        os.chmod(log_path, 0o600)
        try:
            child = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **extra, TOKEN_ENV: token},
            )
        except OSError as error:
            raise ProcessError(f"cannot start {command[0]}: {error}") from None
    hidden = tuple(sorted(k for k in extra if is_secret_name(k)))
    _SECRETS[name] = {k: extra[k] for k in hidden}
    remember(*_SECRETS[name].values(), *secrets_in_argv(command))
    redactor = Redactor.of(command, extra)
    state = ServerState(
        name,
        child.pid,
        os.getpgid(child.pid),
        tuple(redactor.argv(command)),
        port,
        str(log_path),
        time.time(),
        kernel_start_time(child.pid),
        redactor.env(extra),
        token,
        hidden,
    )
    save(state, directory)
    return state, child


def private_directory(directory: Path) -> None:
    """Create a directory only its owner can enter (0700), tightening an existing one."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (0600), atomically."""
    partial = path.with_name(path.name + ".partial")
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        file.write(text)
    os.chmod(partial, 0o600)
    partial.replace(path)


def save(state: ServerState, directory: Path) -> Path:
    """Write the state file atomically."""
    path = directory / f"{state.name}.json"
    private_directory(directory)
    write_private(path, json.dumps(asdict(state), indent=2))
    return path


def load_states(directory: Path) -> list[tuple[ServerState | None, Path, str]]:
    """Every state file: (state or None, path, problem) — a broken file is reported, not used."""
    found: list[tuple[ServerState | None, Path, str]] = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            data["argv"] = tuple(data["argv"])
            data["secret_env"] = tuple(data.get("secret_env", ()))
            found.append((ServerState(**data), path, ""))
        except (OSError, ValueError, TypeError, KeyError) as error:
            found.append((None, path, f"unreadable state file: {error}"))
    return found


def managed(directory: Path) -> list[ServerState]:
    """Servers whose state file is readable (alive or not)."""
    return [state for state, _, _ in load_states(directory) if state is not None]


def stop(state: ServerState, timeout: float = STOP_TIMEOUT_S) -> str:
    """SIGTERM the server and every process that belongs to it (its group, its session, and
    those carrying its token: an engine that left the session or outlived its parent), wait,
    then SIGKILL what is left. A state file without the kernel start time is not trusted for a
    signal; a pid that is not ours any more is never signalled."""
    if state.kernel_start is None:
        return (
            f"{state.name}: the state file lacks the process start time, so pid {state.pid} "
            "cannot be proved to be the server vtop started; nothing signalled"
        )
    alive = is_alive(state)
    others = members(state)
    if not alive and not others:
        return f"{state.name}: not running (pid {state.pid} gone or reused); nothing signalled"
    _signal_all(state, alive, others, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap()
        alive, others = is_alive(state), members(state)
        if not alive and not others:
            return f"{state.name}: stopped (SIGTERM)"
        time.sleep(0.2)
    _signal_all(state, is_alive(state), members(state), signal.SIGKILL)
    return f"{state.name}: killed (SIGKILL after {timeout:.0f} s)"


def _signal_all(state: ServerState, alive: bool, others: list[int], signum: int) -> None:
    """Signal the server's group (while its leader is ours) and each member process."""
    if alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(state.pgid, signum)
    for pid in others:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def restart(state: ServerState, argv: Sequence[str], directory: Path) -> ServerState:
    """Stop the server and start it again with `argv` (same name, log and environment; the
    secret values from this vtop process's memory, else its environment)."""
    if any(REDACTED in word for word in argv):
        raise ProcessError(
            f"{state.name}'s command holds a secret flag vtop does not store: pass the secret "
            "through the environment (e.g. VLLM_API_KEY) and start it again"
        )
    env = dict(state.env)
    for name in state.secret_env:
        value = _SECRETS.get(state.name, {}).get(name) or os.environ.get(name)
        if not value:
            raise ProcessError(
                f"{state.name} was started with {name}, whose value vtop does not store: "
                f"set {name} in this shell to restart it"
            )
        env[name] = value
    stop(state)
    new_state, child = start(state.name, argv, directory, env)
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
            return redactor().text(data.decode(errors="replace")), log.tell()
    except OSError:
        return "", offset
