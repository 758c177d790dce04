"""Stacks of every process of a server, a few samples over a second or two (a single sample
can catch a healthy engine anywhere; a stuck one is in the same place each time)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from vtop.core.forensics.processes import ServerProcess, ServerProcesses
from vtop.core.forensics.pyspy import Refused, ThreadStack, dump

SAMPLES = 5
SPACING_S = 0.3
DEADLINE_S = 10.0
"""The whole read, every process and sample: a deadline, so a frozen host cannot hold vtop."""


@dataclass(frozen=True)
class ProcessStacks:
    """One process: its samples (each every thread at one instant), or why none were read."""

    process: ServerProcess
    samples: tuple[tuple[ThreadStack, ...], ...]
    refused: str | None = None


@dataclass(frozen=True)
class ServerStacks:
    """The samples of every process of one server."""

    processes: tuple[ProcessStacks, ...]
    taken_at: float
    span_s: float


def current_state(process: ServerProcess) -> ServerProcess:
    """The process with its state read again (a stopped process is judged by it)."""
    try:
        state = psutil.Process(process.pid).status()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return process
    return ServerProcess(process.pid, process.role, process.title, state)


def take_stacks(
    server: ServerProcesses,
    samples: int = SAMPLES,
    spacing_s: float = SPACING_S,
    deadline_s: float = DEADLINE_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    wall: Callable[[], float] = time.time,
) -> ServerStacks:
    """`samples` rounds over every process, `spacing_s` apart, all within `deadline_s`; a
    process py-spy refuses is asked no more."""
    started = clock()
    taken: dict[int, list[tuple[ThreadStack, ...]]] = {p.pid: [] for p in server.processes}
    refused: dict[int, str] = {}
    for round_index in range(samples):
        if round_index:
            sleep(spacing_s)
        for process in server.processes:
            left = deadline_s - (clock() - started)
            if left <= 0:
                break
            if process.pid in refused:
                continue
            read = dump(process.pid, min(left, 3.0))
            if isinstance(read, Refused):
                refused[process.pid] = read.reason
            else:
                taken[process.pid].append(tuple(read))
    results = tuple(
        ProcessStacks(current_state(p), tuple(taken[p.pid]), refused.get(p.pid))
        for p in server.processes
    )
    return ServerStacks(results, wall(), clock() - started)
