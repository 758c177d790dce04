"""One tick of polling: every target concurrently, plus the GPUs, into one Frame."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from vtop.core.frame import Event, Frame, GpuSnapshot, TargetScrape
from vtop.core.ingest.sources.nvml import NvmlSource
from vtop.core.ingest.sources.vllm_http import VllmHttpSource


async def poll(sources: Sequence[VllmHttpSource], nvml: NvmlSource | None, now: float) -> Frame:
    """Scrape all targets at once (a slow one delays none of the others beyond its timeout)."""
    scrapes: tuple[TargetScrape, ...] = tuple(
        await asyncio.gather(*(source.scrape() for source in sources))
    )
    gpu: GpuSnapshot | None = None
    if nvml is not None:
        gpu = await asyncio.to_thread(nvml.read)
    return Frame(now, scrapes, gpu, events=_failures(scrapes, now))


class Poller:
    """Polls many targets per tick; a scrape not done by the deadline joins a later frame.

    So a slow or hung endpoint delays none of the others: its scrape keeps running (bounded by
    its own timeout) and is delivered with the first frame after it finishes.
    """

    def __init__(self, sources: Sequence[VllmHttpSource]) -> None:
        self.sources = list(sources)
        self._pending: dict[int, asyncio.Task[TargetScrape]] = {}

    async def poll(self, nvml: NvmlSource | None, now: float, deadline_s: float | None) -> Frame:
        """One frame with every scrape finished within `deadline_s` (None: wait for all)."""
        for index, source in enumerate(self.sources):
            if index not in self._pending:
                self._pending[index] = asyncio.ensure_future(source.scrape())
        await asyncio.wait(self._pending.values(), timeout=deadline_s)
        finished = sorted(index for index, task in self._pending.items() if task.done())
        scrapes = tuple(self._pending.pop(index).result() for index in finished)
        gpu = await asyncio.to_thread(nvml.read) if nvml is not None else None
        return Frame(now, scrapes, gpu, events=_failures(scrapes, now))

    def cancel(self) -> None:
        """Stop scrapes still running."""
        for task in self._pending.values():
            task.cancel()
        self._pending.clear()


def _failures(scrapes: tuple[TargetScrape, ...], now: float) -> tuple[Event, ...]:
    """An event per failed scrape."""
    return tuple(
        Event(now, scrape.status.event_kind, scrape.target, scrape.error)
        for scrape in scrapes
        if not scrape.ok
    )
