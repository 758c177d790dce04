"""One look at a server's processes: find them (by URL or pid), sample their stacks, say where
the engine is."""

from __future__ import annotations

from vtop.core.forensics.classify import EngineWhereabouts, where_engine_is
from vtop.core.forensics.processes import (
    NotVisible,
    ServerProcesses,
    processes_of_pid,
    processes_of_url,
)
from vtop.core.forensics.stacks import take_stacks


def find_server(target: str) -> ServerProcesses | NotVisible:
    """The processes of a server given as a URL, a host:port, or its API server's pid."""
    if target.isdigit():
        return processes_of_pid(int(target))
    return processes_of_url(target)


def look_at(target: str) -> EngineWhereabouts | NotVisible:
    """Where the engine behind `target` is, or why its processes cannot be read from here."""
    found = find_server(target)
    if isinstance(found, NotVisible):
        return found
    stacks = take_stacks(found)
    refused = [p.refused for p in stacks.processes if p.refused and not p.samples]
    if refused and len(refused) == len(stacks.processes):
        return NotVisible(refused[0])
    return where_engine_is(stacks)
