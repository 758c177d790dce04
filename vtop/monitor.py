"""Plain-text monitor: one line per target per tick (headless, also for pipes and logs)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from vtop.core.frame import Frame
from vtop.core.poller import poll
from vtop.core.sources.nvml import NvmlSource
from vtop.core.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.store import Store
from vtop.core.summary import format_summary, summarize


def describe_frame(store: Store, frame: Frame, window: float) -> list[str]:
    """Lines describing each target in a frame."""
    lines = []
    for scrape in frame.scrapes:
        if scrape.ok:
            summary = summarize(store, scrape.target, frame.timestamp, window)
            text = format_summary(summary)
            if scrape.parse_errors:
                text += f" ({len(scrape.parse_errors)} bad lines: {scrape.parse_errors[0]})"
        else:
            text = f"{scrape.status.value}: {scrape.error}"
        lines.append(f"{scrape.target} {text}")
    return lines


async def run_monitor(
    urls: Sequence[str],
    options: ScrapeOptions,
    interval: float,
    window: float,
    ticks: int | None,
    emit: Callable[[str], None] = print,
) -> int:
    """Poll until `ticks` frames were taken (forever when None); return an exit code."""
    sources = [VllmHttpSource(url, options) for url in urls]
    store, taken, ok = Store(), 0, False
    try:
        while ticks is None or taken < ticks:
            started = time.time()
            frame = await poll(sources, NvmlSource() if taken == 0 else None, started)
            store.ingest(frame)
            ok = all(scrape.ok for scrape in frame.scrapes)
            for line in describe_frame(store, frame, window):
                emit(f"{time.strftime('%H:%M:%S', time.localtime(started))} {line}")
            taken += 1
            if ticks is None or taken < ticks:
                await asyncio.sleep(max(0.0, interval - (time.time() - started)))
    finally:
        for source in sources:
            await source.close()
    return 0 if ok else 3
