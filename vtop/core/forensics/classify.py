"""What each process of a server is doing, from its stack samples, and where the engine is:
spinning in code outside vLLM and torch, computing in vLLM, waiting for work, blocked on a
lock or a queue, in a collective, in the tokenizer, or stopped by a signal.

The engine core of vLLM's multiprocessing executor only waits (in `collective_rpc`) while the
model step, sampling and logits processors run in a worker, so a waiting engine core is
followed to the worker it waits on."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePosixPath

from vtop.core.forensics.processes import Role, ServerProcess
from vtop.core.forensics.pyspy import CodeFrame, ThreadStack
from vtop.core.forensics.stacks import ProcessStacks, ServerStacks


class Activity(StrEnum):
    """What a process (or the engine) is doing; `stuck` says which ones are a problem."""

    SPINNING = "spinning"
    TOKENIZER = "in the tokenizer"
    COLLECTIVE = "in a collective"
    BLOCKED = "blocked"
    STOPPED = "stopped"
    WAITING_ON_WORKER = "waiting on a worker"
    COMPUTING = "computing"
    WAITING_FOR_WORK = "waiting for work"
    GONE = "gone"
    UNKNOWN = "unknown"

    @property
    def stuck(self) -> bool:
        """Whether this activity keeps the engine from stepping on its own."""
        return self in (Activity.SPINNING, Activity.BLOCKED, Activity.STOPPED, Activity.GONE)


PRIORITY = list(Activity)
"""Of a process's threads at one instant, the one earliest in this order speaks for it."""

INFRASTRUCTURE = {"python", "vllm", "torch", "zmq", "uvloop", "uvicorn", "starlette", "fastapi"}
"""Owners whose code a healthy server runs; busy code anywhere else is someone's own."""
TOKENIZERS = {"tokenizers", "transformers", "mistral_common", "tiktoken", "sentencepiece"}
STOPPED_STATES = {"stopped", "tracing-stop"}
_STDLIB = re.compile(r"/lib(64)?/python3\.\d+/")


def owner_of(file: str) -> str:
    """Who owns a frame's file: a package's name (vllm, torch, zmq, ...), "python" for the
    standard library, "custom" for code outside any installed package."""
    path = file.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            package = path.split(marker, 1)[1].split("/", 1)[0]
            return package.removesuffix(".py").split(".", 1)[0]
    if _STDLIB.search(path) or path.startswith("<frozen"):
        return "python"
    for package in ("vllm", "torch"):
        if f"/{package}/" in path:
            return package
    return "custom"


def short_file(file: str) -> str:
    """A frame's file as a reader finds it: from the package folder on, else its name."""
    path = file.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return PurePosixPath(path).name


def frame_text(frame: CodeFrame) -> str:
    """`function (file:line)`."""
    return f"{frame.function} ({short_file(frame.file)}:{frame.line})"


@dataclass(frozen=True)
class ThreadActivity:
    """One thread at one instant: what it does and the frame that shows it."""

    activity: Activity
    where: CodeFrame | None
    stack: tuple[CodeFrame, ...]


def _first_not_python(frames: tuple[CodeFrame, ...]) -> CodeFrame | None:
    return next((f for f in frames if owner_of(f.file) != "python"), None)


def _waits_on_worker(frames: tuple[CodeFrame, ...]) -> CodeFrame | None:
    for frame in frames:
        waiting = frame.function == "collective_rpc" or "shm_broadcast" in frame.file
        if waiting and owner_of(frame.file) == "vllm":
            return next((f for f in frames if f.function == "collective_rpc"), frame)
    return None


LOCK_WAITS = {"threading.py", "queue.py"}
"""Standard-library files whose waits are on a lock, a condition or a queue (the caller says
whose): every other standard-library wait is on input (a selector, a socket, a pipe)."""


def _idle(frames: tuple[CodeFrame, ...], owned: CodeFrame | None) -> ThreadActivity:
    """A waiting thread: blocked where code outside any package waits (a sleep, a lock it
    took), else waiting for work (vLLM, its libraries and Python waiting for input)."""
    inner = frames[0]
    inner_owner = owner_of(inner.file)
    if inner_owner == "python" and PurePosixPath(inner.file).name in LOCK_WAITS:
        if owned is not None and owner_of(owned.file) == "custom":
            return ThreadActivity(Activity.BLOCKED, owned, frames)
    elif inner_owner == "custom":
        return ThreadActivity(Activity.BLOCKED, inner, frames)
    return ThreadActivity(Activity.WAITING_FOR_WORK, owned, frames)


def thread_activity(thread: ThreadStack, role: Role) -> ThreadActivity:
    """What one thread does at one instant (innermost frame first in `thread.frames`)."""
    frames = thread.frames
    if not frames:
        return ThreadActivity(Activity.UNKNOWN, None, frames)
    owned = _first_not_python(frames)
    owner = owner_of(owned.file) if owned is not None else "python"
    if role is Role.ENGINE_CORE and (waiting := _waits_on_worker(frames)) is not None:
        return ThreadActivity(Activity.WAITING_ON_WORKER, waiting, frames)
    if any("torch/distributed" in f.file for f in frames[:4]):
        return ThreadActivity(Activity.COLLECTIVE, owned, frames)
    if owner in TOKENIZERS and role is Role.API_SERVER and thread.active:
        return ThreadActivity(Activity.TOKENIZER, owned, frames)
    if not thread.active:
        return _idle(frames, owned)
    if owner not in INFRASTRUCTURE | TOKENIZERS:
        return ThreadActivity(Activity.SPINNING, owned, frames)
    return ThreadActivity(Activity.COMPUTING, owned, frames)


@dataclass(frozen=True)
class ProcessActivity:
    """What one process does across its samples."""

    process: ServerProcess
    activity: Activity
    where: CodeFrame | None
    stack: tuple[CodeFrame, ...]
    """The stack of one sample that shows it, innermost first."""
    share: float
    """The share of samples in which it did that."""
    samples: int
    refused: str | None = None


def _instant(sample: tuple[ThreadStack, ...], role: Role) -> ThreadActivity:
    seen = [thread_activity(thread, role) for thread in sample]
    if not seen:
        return ThreadActivity(Activity.UNKNOWN, None, ())
    return min(seen, key=lambda t: PRIORITY.index(t.activity))


def process_activity(stacks: ProcessStacks) -> ProcessActivity:
    """The most common activity of a process's samples (a stopped process is stopped)."""
    process, count = stacks.process, len(stacks.samples)
    if process.state in STOPPED_STATES:
        return ProcessActivity(process, Activity.STOPPED, None, (), 1.0, count, stacks.refused)
    if process.state == "zombie":
        return ProcessActivity(process, Activity.GONE, None, (), 1.0, count, stacks.refused)
    instants = [_instant(sample, process.role) for sample in stacks.samples]
    if not instants:
        return ProcessActivity(process, Activity.UNKNOWN, None, (), 0.0, 0, stacks.refused)
    tally = Counter(i.activity for i in instants)
    activity, times = min(tally.items(), key=lambda kv: (-kv[1], PRIORITY.index(kv[0])))
    chosen = [i for i in instants if i.activity is activity]
    where = Counter(i.where for i in chosen).most_common(1)[0][0]
    stack = next(i.stack for i in chosen if i.where == where)
    return ProcessActivity(process, activity, where, stack, times / len(instants), len(instants))


@dataclass(frozen=True)
class EngineWhereabouts:
    """Where the engine is: the activity that speaks for it, in which process, reached through
    which (the engine core waiting on its worker), and every process's own activity."""

    activity: Activity
    speaker: ProcessActivity | None
    via: ProcessActivity | None
    processes: tuple[ProcessActivity, ...]
    span_s: float

    @property
    def stuck(self) -> bool:
        """Whether the engine is stuck where it is (not computing or waiting for work)."""
        return self.activity.stuck

    @property
    def owner(self) -> str:
        """Who owns the code it is in: custom code, a package, a logits processor, vLLM."""
        if self.speaker is None or self.speaker.where is None:
            return ""
        return code_owner(self.speaker.where, self.speaker.stack)


def code_owner(where: CodeFrame, stack: tuple[CodeFrame, ...]) -> str:
    """Whose code a frame is, and by what vLLM calls it (a logits processor, a plugin)."""
    owner = owner_of(where.file)
    if owner in ("vllm", "torch", "python"):
        return {"vllm": "vLLM itself", "torch": "PyTorch", "python": "Python"}[owner]
    who = f"custom code ({where.file})" if owner == "custom" else f"the package {owner}"
    index = stack.index(where) if where in stack else 0
    caller = next((f for f in stack[index:] if owner_of(f.file) == "vllm"), None)
    if caller is None:
        return who
    if "logits_processor" in caller.file or "sample" in caller.file:
        return f"{who}, a custom logits processor (vLLM calls it in {frame_text(caller)})"
    if "plugin" in caller.file:
        return f"{who}, a vLLM plugin (loaded by {frame_text(caller)})"
    return f"{who}, called by vLLM's {frame_text(caller)}"


def _worst(activities: list[ProcessActivity]) -> ProcessActivity | None:
    if not activities:
        return None
    return min(activities, key=lambda a: PRIORITY.index(a.activity))


def where_engine_is(stacks: ServerStacks) -> EngineWhereabouts:
    """The engine's activity: a stopped process first; else the engine core's, followed to
    its workers when it waits on them; an idle engine core with the API server in its
    tokenizer is the tokenizer."""
    every = tuple(process_activity(p) for p in stacks.processes)
    by_role = {role: [a for a in every if a.process.role is role] for role in Role}

    def said(
        speaker: ProcessActivity | None, via: ProcessActivity | None = None
    ) -> EngineWhereabouts:
        activity = speaker.activity if speaker is not None else Activity.UNKNOWN
        return EngineWhereabouts(activity, speaker, via, every, stacks.span_s)

    stopped = [
        a for a in every if a.activity is Activity.STOPPED and a.process.role is not Role.HELPER
    ]
    if stopped:
        return said(stopped[0])
    core = _worst(by_role[Role.ENGINE_CORE])
    if core is None:
        return said(_worst(by_role[Role.API_SERVER]))
    if core.activity is Activity.WAITING_ON_WORKER:
        worker = _worst(by_role[Role.WORKER])
        return said(worker, core) if worker is not None else said(core)
    if core.activity is Activity.WAITING_FOR_WORK:
        api = _worst(by_role[Role.API_SERVER])
        if api is not None and api.activity in (Activity.TOKENIZER, Activity.SPINNING):
            return said(api, core)
    return said(core)
