"""One tick of polling: every target concurrently, plus the GPUs, into one Frame."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from vtop.core.frame import Event, Frame, GpuSnapshot, TargetScrape
from vtop.core.sources.nvml import NvmlSource
from vtop.core.sources.vllm_http import VllmHttpSource


async def poll(sources: Sequence[VllmHttpSource], nvml: NvmlSource | None, now: float) -> Frame:
    """Scrape all targets at once (a slow one delays none of the others beyond its timeout)."""
    scrapes: tuple[TargetScrape, ...] = tuple(
        await asyncio.gather(*(source.scrape() for source in sources))
    )
    gpu: GpuSnapshot | None = None
    if nvml is not None:
        gpu = await asyncio.to_thread(nvml.read)
    events = tuple(
        Event(now, scrape.status.value.replace(" ", "_"), scrape.target, scrape.error)
        for scrape in scrapes
        if not scrape.ok
    )
    return Frame(now, scrapes, gpu, events=events)
