"""Where a session's frames come from: live polling (with backoff) or a recording."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from vtop.core.frame import Event, Frame
from vtop.core.poller import Poller
from vtop.core.process import ServerState, is_alive, read_log, reap
from vtop.core.recorder import RecordingWriter
from vtop.core.sources.nvml import NvmlSource
from vtop.core.sources.process_log import LogTail
from vtop.core.sources.vllm_http import VllmHttpSource
from vtop.core.startup_failures import explain_failure

MAX_BACKOFF_S = 30.0
DEADLINE_SHARE = 0.8
"""With several endpoints a tick waits at most this share of the interval for scrapes."""
REPLAY_BATCH = 200
GAP_S = 10.0
REBUILD_S = 420.0
REBUILD_FRAMES = 600


class Feed(Protocol):
    """Gives the frames due at `now` (wall clock); an empty list when none are."""

    async def frames(self, now: float) -> list[Frame]: ...

    async def close(self) -> None: ...


@dataclass
class Backoff:
    """Exponential retry delay after consecutive failed polls."""

    failures: int = 0
    retry_at: float = 0.0

    def record(self, ok: bool, now: float, interval: float) -> None:
        """Note one poll's outcome."""
        self.failures = 0 if ok else self.failures + 1
        delay = 0.0 if ok else min(interval * 2 ** (self.failures - 1), MAX_BACKOFF_S)
        self.retry_at = now + delay

    def waiting(self, now: float) -> float:
        """Seconds until the next try (0 when one may poll now)."""
        return max(0.0, self.retry_at - now)


class LiveFeed:
    """Polls vLLM endpoints and the GPUs; backs off while every endpoint fails."""

    def __init__(
        self,
        sources: Sequence[VllmHttpSource],
        nvml: NvmlSource | None,
        interval: float,
        log: LogTail | None = None,
        server: ServerState | None = None,
    ) -> None:
        self.sources = list(sources)
        self.poller = Poller(self.sources)
        self.nvml = nvml
        self.interval = interval
        self.backoff = Backoff()
        self.log = log
        self.server = server
        self._exit_reported = False

    async def frames(self, now: float) -> list[Frame]:
        """One frame (with new log lines of a managed server), unless backing off."""
        lines = self.log.new_lines() if self.log is not None else ()
        events = self._exit_event(now)
        if self.backoff.waiting(now) > 0 and not lines and not events:
            return []
        deadline = self.interval * DEADLINE_SHARE if len(self.sources) > 1 else None
        frame = await self.poller.poll(self.nvml, now, deadline)
        if frame.scrapes:
            self.backoff.record(any(s.ok for s in frame.scrapes), now, self.interval)
        return [dataclasses.replace(frame, log_lines=lines, events=frame.events + events)]

    def _exit_event(self, now: float) -> tuple[Event, ...]:
        """An event, once, when the managed server's process is gone."""
        reap()
        if self.server is None or self._exit_reported or is_alive(self.server):
            return ()
        self._exit_reported = True
        log, _ = read_log(self.server)
        failure = explain_failure(log)
        why = f"{failure.explanation} (log line {failure.line_number})" if failure else ""
        message = f"vLLM (pid {self.server.pid}) exited. {why}".strip()
        return (Event(now, "exited", self.server.url, message),)

    def follow(self, server: ServerState) -> None:
        """Watch a restarted server (same URL and log, new pid)."""
        self.server, self._exit_reported = server, False
        if self.log is not None:
            self.log.follow(server)

    async def close(self) -> None:
        """Close HTTP clients and NVML."""
        self.poller.cancel()
        for source in self.sources:
            await source.close()
        if self.nvml is not None:
            self.nvml.close()


class ReplayFeed:
    """Frames of a recording at their recorded pace times `speed` (0 means as fast as possible)."""

    def __init__(self, frames: Sequence[Frame], speed: float = 1.0, start_index: int = 0) -> None:
        self.recorded = list(frames)
        self.position = 0
        self.start_index = start_index
        self.speed = speed
        self.paused = False
        self._anchor: tuple[float, float] | None = None

    @property
    def finished(self) -> bool:
        """True when every frame was given."""
        return self.position >= len(self.recorded)

    async def frames(self, now: float) -> list[Frame]:
        """Frames whose recorded time has come; outages and gaps are passed through at once."""
        if self.paused or self.finished:
            self._anchor = None
            return []
        if self._anchor is None or self._gap_ahead():
            self._anchor = (now, self.recorded[self.position].timestamp)
        due = self._due_until(now)
        taken: list[Frame] = []
        while not self.finished and len(taken) < REPLAY_BATCH:
            frame = self.recorded[self.position]
            if frame.timestamp > due and not _outage(frame):
                break
            taken.append(frame)
            self.position += 1
        if taken and _outage(taken[-1]):
            self._anchor = None
        return taken

    def _gap_ahead(self) -> bool:
        """True when the recording jumps ahead (nothing was recorded for a while)."""
        if self.position == 0 or self.finished:
            return False
        previous = self.recorded[self.position - 1].timestamp
        return self.recorded[self.position].timestamp - previous > GAP_S

    def _due_until(self, now: float) -> float:
        """The recorded time that corresponds to `now`."""
        assert self._anchor is not None
        if self.speed <= 0:
            return float("inf")
        wall, recorded = self._anchor
        return recorded + (now - wall) * self.speed

    def step(self) -> list[Frame]:
        """The next frame (for single-stepping while paused)."""
        if self.finished:
            return []
        self.position += 1
        return [self.recorded[self.position - 1]]

    def seek(self, index: int) -> tuple[bool, list[Frame]]:
        """Move to frame `index`: (start a fresh session?, frames to ingest to get there).

        Rules look back at most a few minutes, so a backward or long jump replays only the
        REBUILD_S before the target into a fresh session instead of the whole recording.
        """
        index = max(1, min(index, len(self.recorded)))
        self._anchor = None
        if self.position <= index <= self.position + REBUILD_FRAMES:
            frames, self.position = self.recorded[self.position : index], index
            return False, frames
        since = self.recorded[index - 1].timestamp - REBUILD_S
        start = next(i for i, f in enumerate(self.recorded) if f.timestamp >= since)
        self.position = index
        return True, self.recorded[start:index]

    def index_at(self, offset_s: float) -> int:
        """Frames up to `offset_s` seconds after the recording's start."""
        first = self.recorded[0].timestamp
        return sum(1 for f in self.recorded if f.timestamp - first <= offset_s)

    async def close(self) -> None:
        """Nothing to release."""


def _outage(frame: Frame) -> bool:
    """True when no target answered in this frame."""
    return bool(frame.scrapes) and not any(scrape.ok for scrape in frame.scrapes)


class RecordingFeed:
    """Another feed's frames, each also appended to a recording (`--record FILE`)."""

    def __init__(self, inner: Feed, writer: RecordingWriter) -> None:
        self.inner = inner
        self.writer = writer

    async def frames(self, now: float) -> list[Frame]:
        """The inner feed's frames, written as they pass."""
        frames = await self.inner.frames(now)
        for frame in frames:
            self.writer.write(frame)
        return frames

    async def close(self) -> None:
        """Close the inner feed and the recording."""
        await self.inner.close()
        self.writer.close()
