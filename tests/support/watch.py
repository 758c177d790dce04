"""Watch a real server with vtop's own sources and store while load runs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

from vtop.core.frame import EventKind, Frame
from vtop.core.ingest.poller import poll
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.store.store import Store
from vtop.core.store.summary import TargetSummary, summarize

T = TypeVar("T")
RESET_KINDS = (EventKind.RESTART, EventKind.COUNTER_RESET)


class Watcher:
    """Scrapes one target into a store every `interval` seconds until stopped."""

    def __init__(self, url: str, interval: float = 0.5) -> None:
        self.source = VllmHttpSource(url, ScrapeOptions(timeout_s=10))
        self.store = Store()
        self.interval = interval
        self.started = time.time()
        self.summaries: list[TargetSummary] = []
        self.frames: list[Frame] = []
        self.events: list[str] = []
        self.restarts: list[float] = []
        """When the store saw the server restart or a counter reset."""

    async def tick(self) -> None:
        """One scrape into the store."""
        now = time.time()
        frame = await poll([self.source], None, now)
        self.frames.append(frame)
        events = self.store.ingest(frame)
        self.events += [event.kind for event in events]
        self.restarts += [e.timestamp for e in events if e.kind in RESET_KINDS]
        self.summaries.append(summarize(self.store, self.source.target, now, 5.0))

    async def during(self, work: Awaitable[T], after_s: float = 0.0) -> T:
        """Run `work` while scraping; scrape on for `after_s` seconds (at least once) after it."""
        task = asyncio.ensure_future(work)
        while not task.done():
            await self.tick()
            await asyncio.sleep(self.interval)
        ended = time.time()
        await asyncio.sleep(self.interval)
        await self.tick()
        while time.time() - ended < after_s:
            await asyncio.sleep(self.interval)
            await self.tick()
        return task.result()

    async def close(self) -> None:
        """Close the HTTP client."""
        await self.source.close()

    def peak(self, field: str) -> float:
        """Largest value of a summary field seen (0 when never known)."""
        values = [getattr(s, field) for s in self.summaries]
        return max((v for v in values if v is not None), default=0.0)
