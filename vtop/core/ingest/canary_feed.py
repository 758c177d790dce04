"""The front door's feed: canaries back to back through the URL users call, the engine scraped
before the first and after the last (its counters' increase over the window needs no more).
`vtop probe` reads it like any other feed (`sample`), opened by `open_canary_feed`."""

from __future__ import annotations

import time
from collections.abc import Sequence

from vtop.core.frame import Event, Frame
from vtop.core.ingest.feed_status import UNAVAILABLE, Control, FeedStatus, Mode, Moved
from vtop.core.ingest.poller import poll
from vtop.core.ingest.sources.probe import ProbeSource
from vtop.core.ingest.sources.vllm_http import VllmHttpSource
from vtop.core.managed_server import ManagedServer


class CanaryFeed:
    """`count` canaries per source, one after another, between two scrapes of the engine;
    then finished. One frame per call: the engine's scrape, or one canary."""

    def __init__(self, engine: VllmHttpSource, sources: Sequence[ProbeSource], count: int) -> None:
        self.engine = engine
        self.sources = list(sources)
        self.url = self.sources[0].url
        """The front door, as reports name it (redacted)."""
        self._due = [source for _ in range(count) for source in self.sources]
        self._last: float | None = None
        self._scraped = 0

    async def frames(self, now: float) -> list[Frame]:
        """The next frame: the first scrape, a canary, or the last scrape (none after it)."""
        if self._scraped == 0 or (not self._due and self._scraped == 1):
            self._scraped += 1
            frame = await poll([self.engine], None, self._after(now))
        elif self._due:
            result = await self._due.pop(0).probe()
            frame = Frame(self._after(time.time()), probes=(result,))
        else:
            return []
        self._last = frame.timestamp
        return [frame]

    def _after(self, now: float) -> float:
        """Now, and later than the previous frame (the store takes ticks in order)."""
        return now if self._last is None else max(now, self._last + 0.001)

    def status(self, now: float) -> FeedStatus:
        """Live, no pause between frames; finished after the last scrape."""
        return FeedStatus(Mode.LIVE, 0.0, finished=self._scraped == 2)

    def control(self, action: Control, amount: float = 0.0) -> Moved:
        """Nothing to control: the canaries run to their count."""
        return Moved(UNAVAILABLE, changed=False)

    def focus(self, target: str | None) -> None:
        """The canaries go through the front door whatever is on screen."""

    def follow(self, server: ManagedServer) -> None:
        """Nothing to follow."""

    def note(self, event: Event) -> None:
        """Nothing is recorded."""

    async def close(self) -> None:
        """Close the canaries' and the engine's connections."""
        for source in self.sources:
            await source.close()
        await self.engine.close()
