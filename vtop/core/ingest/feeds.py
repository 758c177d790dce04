"""Where a session's frames come from, and the one loop that reads them.

Every command is a composition over a Feed: the dashboard asks it for frames on its timer;
`sample` reads one for a window, a number of frames, or forever (record, diagnose, bundle,
tune and `--plain` all go through it). A feed's state is one value (`FeedStatus`) and its
controls one method (`control`), whatever it reads: live endpoints, a recording, Prometheus.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from vtop.core.forensics.last_words import why_it_exited
from vtop.core.frame import Event, EventKind, Frame, ProbeResult
from vtop.core.ingest.excerpt import excerpt
from vtop.core.ingest.feed_status import (
    INTERVAL_STEPS,
    SPEED_STEPS,
    UNAVAILABLE,
    Control,
    FeedStatus,
    Mode,
    Moved,
    next_step,
)
from vtop.core.ingest.poller import Poller
from vtop.core.ingest.recorder import RecordingWriter
from vtop.core.ingest.sources.nvml import NvmlSource
from vtop.core.ingest.sources.probe import ProbeSource
from vtop.core.ingest.sources.process_log import LogTail
from vtop.core.ingest.sources.vllm_http import VllmHttpSource
from vtop.core.managed_server import ManagedServer, is_alive, read_log, reap

if TYPE_CHECKING:
    from vtop.core.ingest.sources.otlp_receiver import SpanReceiver

MAX_BACKOFF_S = 30.0
DEADLINE_SHARE = 0.8
"""With several endpoints a tick waits at most this share of the interval for scrapes."""
REPLAY_BATCH = 200
GAP_S = 10.0
REBUILD_S = 420.0
REBUILD_FRAMES = 600


class Feed(Protocol):
    """Frames due at `now` (an empty list when none are), its status, and its controls."""

    async def frames(self, now: float) -> list[Frame]: ...

    def status(self, now: float) -> FeedStatus: ...

    def control(self, action: Control, amount: float = 0.0) -> Moved: ...

    def follow(self, server: ManagedServer) -> None: ...

    def focus(self, target: str | None) -> None: ...

    def note(self, event: Event) -> None: ...

    async def close(self) -> None: ...


Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


async def sample(
    feed: Feed,
    seconds: float | None = None,
    count: int | None = None,
    clock: Clock = time.time,
    sleep: Sleep = asyncio.sleep,
) -> AsyncGenerator[Frame, None]:
    """The feed's frames, paced by its own interval: for `seconds` (and at least two frames),
    for `count` frames, or until it is finished (a recording) or forever (live)."""
    started, given = clock(), 0
    while True:
        tick = clock()
        for frame in await feed.frames(tick):
            yield frame
            given += 1
            if count is not None and given >= count:
                return
        status = feed.status(clock())
        if status.finished:
            return
        if seconds is not None and clock() - started >= seconds and given >= 2:
            return
        if status.mode is not Mode.REPLAY or status.speed > 0:
            await sleep(max(0.0, status.interval_s - (clock() - tick)))


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
        server: ManagedServer | None = None,
        canaries: Canaries | None = None,
        spans: SpanReceiver | None = None,
    ) -> None:
        self.sources = list(sources)
        self.canaries = canaries
        self.spans = spans
        """vLLM's request spans, received as they come (None: not listening); each frame
        carries those received since the one before."""
        """Canaries through the URL users call (None: the front door is not probed)."""
        self.poller = Poller(self.sources)
        self.nvml = nvml
        self.interval = interval
        self.backoff = Backoff()
        self.log = log
        self.server = server
        self.paused = False
        """Live data keeps flowing while paused: only the display holds still."""
        self._exit_reported = False
        self._noted: list[Event] = []

    async def frames(self, now: float) -> list[Frame]:
        """One frame (with new log lines of a managed server), unless backing off."""
        lines = self.log.new_lines() if self.log is not None else ()
        events = (*self._exit_event(now), *self._noted)
        self._noted = []
        if self.canaries is not None:
            self.canaries.start_if_due(now)
        if self.backoff.waiting(now) > 0 and not lines and not events:
            return []
        deadline = self.interval * DEADLINE_SHARE if len(self.sources) > 1 else None
        frame = await self.poller.poll(self.nvml, now, deadline)
        if frame.scrapes:
            self.backoff.record(any(s.ok for s in frame.scrapes), now, self.interval)
        probes = self.canaries.finished() if self.canaries is not None else ()
        spans = self.spans.new_spans() if self.spans is not None else ()
        return [
            dataclasses.replace(
                frame, log_lines=lines, events=frame.events + events, probes=probes, spans=spans
            )
        ]

    def status(self, now: float) -> FeedStatus:
        """Live, its interval, and the retry delay while every endpoint fails."""
        return FeedStatus(
            Mode.LIVE, self.interval, self.paused, retry_in_s=self.backoff.waiting(now)
        )

    def control(self, action: Control, amount: float = 0.0) -> Moved:
        """Pause the display; poll faster or slower."""
        if action is Control.PAUSE:
            self.paused = not self.paused
            return Moved("paused" if self.paused else "live")
        if action in (Control.FASTER, Control.SLOWER):
            self.interval = next_step(INTERVAL_STEPS, self.interval, action is Control.SLOWER)
            return Moved(f"polling every {self.interval:g} s")
        return Moved(UNAVAILABLE, changed=False)

    def _exit_event(self, now: float) -> tuple[Event, ...]:
        """An event, once, when the managed server's process is gone."""
        reap()
        if self.server is None or self._exit_reported or is_alive(self.server):
            return ()
        self._exit_reported = True
        log, _ = read_log(self.server)
        why = why_it_exited(log)
        message = f"vLLM (pid {self.server.pid}) exited. {why}".strip()
        return (Event(now, EventKind.EXITED, self.server.url, message),)

    def note(self, event: Event) -> None:
        """An event of vtop's own (an applied change) for the next frame: the session marks
        it on the charts and a recording keeps it."""
        self._noted.append(event)

    def focus(self, target: str | None) -> None:
        """Every endpoint is read whole: nothing changes with the one on screen."""

    def follow(self, server: ManagedServer) -> None:
        """Watch a restarted server (same URL and log, new pid)."""
        self.server, self._exit_reported = server, False
        if self.log is not None:
            self.log.follow(server)

    async def close(self) -> None:
        """Close HTTP clients, NVML and the span receivers."""
        self.poller.cancel()
        for source in self.sources:
            await source.close()
        if self.canaries is not None:
            await self.canaries.close()
        if self.nvml is not None:
            self.nvml.close()
        if self.spans is not None:
            self.spans.close()


class ReplayFeed:
    """Frames of a recording at their recorded pace times `speed` (0 means as fast as possible)."""

    def __init__(
        self,
        frames: Sequence[Frame],
        speed: float = 1.0,
        start_index: int = 0,
        interval: float = 1.0,
    ) -> None:
        self.recorded = list(frames)
        self.position = 0
        self.start_index = start_index
        self.speed = speed
        self.interval = interval
        self.paused = False
        self._anchor: tuple[float, float] | None = None

    @property
    def finished(self) -> bool:
        """True when every frame was given."""
        return self.position >= len(self.recorded)

    async def frames(self, now: float) -> list[Frame]:
        """Frames whose recorded time has come; outages and gaps are passed through at once
        (a replay that starts part-way gives the minutes before its start first)."""
        if self.position == 0 and self.start_index > 0:
            return self.seek(self.start_index).frames
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

    def status(self, now: float) -> FeedStatus:
        """Replay, its speed and position."""
        return FeedStatus(
            Mode.REPLAY,
            self.interval,
            self.paused,
            self.speed,
            self.position,
            len(self.recorded),
            self.finished,
        )

    def control(self, action: Control, amount: float = 0.0) -> Moved:
        """Pause, speed up or down, step by frames, jump by recorded seconds."""
        if action is Control.PAUSE:
            self.paused = not self.paused
            return Moved("paused" if self.paused else "playing")
        if action in (Control.FASTER, Control.SLOWER):
            speed = self.speed if self.speed > 0 else SPEED_STEPS[-1]
            self.speed = next_step(SPEED_STEPS, speed, action is Control.FASTER)
            return Moved(f"replay x{self.speed:g}")
        if action is Control.SPEED:
            self.speed = {1.0: 10.0, 10.0: 0.0}.get(self.speed, 1.0)
            return Moved("replay at full speed" if self.speed <= 0 else f"replay x{self.speed:g}")
        if action is Control.STEP:
            self.paused = True
            return self.seek(self.position + int(amount))
        if action is Control.JUMP and self.position > 0:
            first = self.recorded[0].timestamp
            offset = self.recorded[self.position - 1].timestamp - first + amount
            return self.seek(self.index_at(offset))
        return Moved("nothing to jump from", changed=False)

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

    def seek(self, index: int) -> Moved:
        """Move to frame `index`, with the frames to ingest to get there.

        Rules look back at most a few minutes, so a backward or long jump replays only the
        REBUILD_S before the target into a fresh session instead of the whole recording.
        """
        index = max(1, min(index, len(self.recorded)))
        self._anchor = None
        message = f"frame {index} of {len(self.recorded)}"
        if self.position <= index <= self.position + REBUILD_FRAMES:
            frames, self.position = self.recorded[self.position : index], index
            return Moved(message, frames)
        since = self.recorded[index - 1].timestamp - REBUILD_S
        start = next(i for i, f in enumerate(self.recorded) if f.timestamp >= since)
        self.position = index
        return Moved(message, excerpt(self.recorded, start, index), fresh=True)

    def index_at(self, offset_s: float) -> int:
        """Frames up to `offset_s` seconds after the recording's start."""
        first = self.recorded[0].timestamp
        return sum(1 for f in self.recorded if f.timestamp - first <= offset_s)

    def focus(self, target: str | None) -> None:
        """A recording holds what it holds."""

    def follow(self, server: ManagedServer) -> None:
        """A recording follows no server."""

    def note(self, event: Event) -> None:
        """A recording takes no new events."""

    async def close(self) -> None:
        """Nothing to release."""


def _outage(frame: Frame) -> bool:
    """True when no target answered in this frame."""
    return bool(frame.scrapes) and not any(scrape.ok for scrape in frame.scrapes)


class RecordingFeed:
    """Another feed's frames, each also appended to a recording (`--record FILE`); its status
    and controls are the inner feed's."""

    def __init__(self, inner: Feed, writer: RecordingWriter) -> None:
        self.inner = inner
        self.writer = writer

    async def frames(self, now: float) -> list[Frame]:
        """The inner feed's frames, written as they pass."""
        frames = await self.inner.frames(now)
        for frame in frames:
            self.writer.write(frame)
        return frames

    def status(self, now: float) -> FeedStatus:
        """The inner feed's, saying where it records to."""
        return dataclasses.replace(self.inner.status(now), recording_to=str(self.writer.path))

    def control(self, action: Control, amount: float = 0.0) -> Moved:
        """The inner feed's controls."""
        return self.inner.control(action, amount)

    def focus(self, target: str | None) -> None:
        """The inner feed hears which server is on screen."""
        self.inner.focus(target)

    def follow(self, server: ManagedServer) -> None:
        """The inner feed follows the restarted server."""
        self.inner.follow(server)

    def note(self, event: Event) -> None:
        """The inner feed takes the event (the recording gets it with its frame)."""
        self.inner.note(event)

    async def close(self) -> None:
        """Close the inner feed and the recording."""
        await self.inner.close()
        self.writer.close()


class Canaries:
    """Canaries through the front door, one every `interval` seconds, sent in the background:
    a slow or unreachable path never delays a tick, and its result joins a later frame."""

    def __init__(self, source: ProbeSource, interval: float) -> None:
        self.source = source
        self.interval = interval
        self._task: asyncio.Task[ProbeResult] | None = None
        self._last_start = -float("inf")

    def start_if_due(self, now: float) -> None:
        """Send the next canary when the interval has passed and none is on its way."""
        if self._task is None and now - self._last_start >= self.interval:
            self._last_start = now
            self._task = asyncio.ensure_future(self.source.probe())

    def finished(self) -> tuple[ProbeResult, ...]:
        """The canary that came back since the last call (if one did)."""
        if self._task is None or not self._task.done():
            return ()
        task, self._task = self._task, None
        return (task.result(),) if not task.cancelled() else ()

    async def close(self) -> None:
        """Stop a canary on its way and release the connections."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self.source.close()
