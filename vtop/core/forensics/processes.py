"""The processes behind a vLLM URL on this host: the listening socket's owner (the API server),
and below it the engine cores and workers vLLM names by their process titles."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

import psutil


class Role(StrEnum):
    """What a process of a vLLM server does (from the title vLLM gives it)."""

    API_SERVER = "api server"
    ENGINE_CORE = "engine core"
    WORKER = "worker"
    HELPER = "helper"


@dataclass(frozen=True)
class ServerProcess:
    """One process of the server, as /proc showed it."""

    pid: int
    role: Role
    title: str
    state: str
    """psutil's status: running, sleeping, disk-sleep, stopped, tracing-stop, zombie, ..."""


@dataclass(frozen=True)
class ServerProcesses:
    """Every process of one server, the API server first."""

    port: int
    processes: tuple[ServerProcess, ...]

    def with_role(self, role: Role) -> list[ServerProcess]:
        """The processes of one role, in pid order."""
        return [p for p in self.processes if p.role is role]


@dataclass(frozen=True)
class NotVisible:
    """Why the processes behind a URL cannot be seen from here, and what to run instead."""

    reason: str


def role_of(title: str, is_socket_owner: bool) -> Role:
    """A process's role from its title (vLLM sets VLLM::EngineCore, VLLM::Worker_TP0, ...)."""
    if "EngineCore" in title:
        return Role.ENGINE_CORE
    if "Worker" in title:
        return Role.WORKER
    if is_socket_owner or "APIServer" in title:
        return Role.API_SERVER
    return Role.HELPER


def is_local(host: str) -> bool:
    """Whether a URL's host is this machine (a loopback name or one of its own addresses)."""
    if host in ("localhost", "") or host.endswith(".localhost"):
        return True
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    own = {a.address for nics in psutil.net_if_addrs().values() for a in nics}
    return any(ipaddress.ip_address(a.split("%")[0]).is_loopback or a in own for a in addresses)


HIDDEN = -1
"""A listener whose owner this user may not see (another user's process)."""


def listening_pid(port: int) -> int | None:
    """The pid that owns the TCP socket listening on `port`: HIDDEN when its owner is not
    visible to this user, None when nothing listens on it in this network namespace."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        return HIDDEN
    owners = [
        c.pid
        for c in connections
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
    ]
    seen = [int(pid) for pid in owners if pid is not None]
    if seen:
        return seen[0]
    return HIDDEN if owners else None


def _process(proc: psutil.Process, is_socket_owner: bool) -> ServerProcess | None:
    try:
        title = " ".join(proc.cmdline()) or proc.name()
        return ServerProcess(proc.pid, role_of(title, is_socket_owner), title, proc.status())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def processes_of_pid(pid: int, port: int = 0) -> ServerProcesses | NotVisible:
    """A process and every process below it (a server named by its API server's pid)."""
    try:
        owner = psutil.Process(pid)
        children = owner.children(recursive=True)
    except psutil.NoSuchProcess:
        return NotVisible(f"no process {pid} on this host")
    except psutil.AccessDenied:
        return NotVisible(f"process {pid} belongs to another user: run vtop as that user")
    found = [_process(owner, True), *(_process(child, False) for child in children)]
    return ServerProcesses(port, tuple(p for p in found if p is not None))


def processes_of_url(url: str) -> ServerProcesses | NotVisible:
    """The server behind a URL when it runs on this host and its owner is visible."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    if not is_local(host):
        return NotVisible(
            f"{host} is another host: run `vtop stacks {parts.scheme}://127.0.0.1:{port}` there "
            "(or `py-spy dump --pid PID` on its engine core and worker processes)"
        )
    pid = listening_pid(port)
    if pid == HIDDEN:
        return NotVisible(
            f"the process listening on port {port} belongs to another user: run vtop as that "
            "user (or with sudo)"
        )
    if pid is None:
        return NotVisible(
            f"nothing listens on port {port} in this network namespace: the server is down, "
            "or runs in a container; run `vtop stacks` where it runs (`docker exec CONTAINER "
            "vtop stacks`), or pass the API server's pid"
        )
    return processes_of_pid(pid, port)
