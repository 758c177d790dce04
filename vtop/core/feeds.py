"""Where a session's frames come from: live polling (with backoff) or a recording."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from vtop.core.frame import Frame
from vtop.core.poller import poll
from vtop.core.sources.nvml import NvmlSource
from vtop.core.sources.vllm_http import VllmHttpSource

MAX_BACKOFF_S = 30.0
REPLAY_BATCH = 200
GAP_S = 10.0


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
        self, sources: Sequence[VllmHttpSource], nvml: NvmlSource | None, interval: float
    ) -> None:
        self.sources = list(sources)
        self.nvml = nvml
        self.interval = interval
        self.backoff = Backoff()

    async def frames(self, now: float) -> list[Frame]:
        """One frame, unless backing off."""
        if self.backoff.waiting(now) > 0:
            return []
        frame = await poll(self.sources, self.nvml, now)
        self.backoff.record(any(s.ok for s in frame.scrapes), now, self.interval)
        return [frame]

    async def close(self) -> None:
        """Close HTTP clients and NVML."""
        for source in self.sources:
            await source.close()
        if self.nvml is not None:
            self.nvml.close()


class ReplayFeed:
    """Frames of a recording at their recorded pace times `speed` (0 means as fast as possible)."""

    def __init__(self, frames: Sequence[Frame], speed: float = 1.0) -> None:
        self.recorded = list(frames)
        self.position = 0
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

    async def close(self) -> None:
        """Nothing to release."""


def _outage(frame: Frame) -> bool:
    """True when no target answered in this frame."""
    return bool(frame.scrapes) and not any(scrape.ok for scrape in frame.scrapes)
