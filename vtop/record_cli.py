"""`vtop record URL -o FILE`: write every frame to a recording until stopped."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from vtop.core.poller import poll
from vtop.core.recorder import RecordingWriter
from vtop.core.sources.nvml import NvmlSource
from vtop.core.sources.vllm_http import DEFAULT_URL, ScrapeOptions, VllmHttpSource


async def record(
    urls: list[str], path: Path, options: ScrapeOptions, interval: float, duration: float | None
) -> int:
    """Poll and append frames; return the number written."""
    sources = [VllmHttpSource(url, options) for url in urls]
    nvml = NvmlSource()
    written, started = 0, time.time()
    try:
        with RecordingWriter(path) as writer:
            while duration is None or time.time() - started < duration:
                tick = time.time()
                writer.write(await poll(sources, nvml, tick))
                written += 1
                await asyncio.sleep(max(0.0, interval - (time.time() - tick)))
    finally:
        for source in sources:
            await source.close()
        nvml.close()
    return written


def record_main(argv: list[str]) -> int:
    """Run `vtop record`."""
    from vtop.cli import add_target_options, scrape_options

    parser = argparse.ArgumentParser(prog="vtop record", description="flight recorder")
    parser.add_argument("urls", nargs="*", default=[DEFAULT_URL], metavar="URL")
    parser.add_argument("-o", "--output", type=Path, required=True, help="recording file")
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--duration", type=float, help="stop after N seconds")
    add_target_options(parser)
    args = parser.parse_args(argv)
    try:
        count = asyncio.run(
            record(args.urls, args.output, scrape_options(args), args.interval, args.duration)
        )
    except KeyboardInterrupt:
        print(f"stopped; {args.output} holds every complete frame", file=sys.stderr)
        return 0
    print(f"{count} frames written to {args.output}", file=sys.stderr)
    return 0
