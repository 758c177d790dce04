"""`vtop record URL -o FILE`: live feed -> recording, until stopped or for --duration."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from vtop.cli.errors import CliError
from vtop.cli.frames import EXIT_NO_DATA, never_answered
from vtop.cli.options import add_otlp_options, add_target_options, parser, settings_from
from vtop.cli.spans import open_feed_with_spans
from vtop.core.config.settings import DEFAULT_URL
from vtop.core.ingest.feeds import Feed, sample
from vtop.core.ingest.recorder import RecordingWriter


async def record(feed: Feed, path: Path, duration: float | None) -> tuple[int, str | None]:
    """Write the feed's frames: how many were written, and why no server answered in any of
    them (None when one did)."""
    written, answered, failures = 0, False, []
    try:
        with RecordingWriter(path) as writer:
            async for frame in sample(feed, duration):
                writer.write(frame)
                written += 1
                answered = answered or any(scrape.ok for scrape in frame.scrapes)
                failures = [] if answered else [frame]
    finally:
        await feed.close()
    return written, None if answered else never_answered(failures)


def record_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop record`."""
    recorder = parser("vtop record", "flight recorder: every frame of live servers to a file")
    recorder.add_argument("urls", nargs="*", metavar="URL", help=f"servers (default {DEFAULT_URL})")
    recorder.add_argument("-o", "--output", type=Path, required=True, help="recording file")
    recorder.add_argument("--interval", type=float, help="seconds between scrapes (1)")
    recorder.add_argument("--duration", type=float, help="stop after N seconds (default: never)")
    add_otlp_options(recorder)
    add_target_options(recorder)
    return recorder


def record_main(argv: list[str]) -> int:
    """Run `vtop record`."""
    args = record_parser().parse_args(argv)
    settings = settings_from(args, urls=tuple(args.urls) or None)
    try:
        count, silent = asyncio.run(
            record(open_feed_with_spans(settings, gpus=not args.no_gpu), args.output, args.duration)
        )
    except KeyboardInterrupt:
        print(f"stopped; {args.output} holds every complete frame", file=sys.stderr)
        return 0
    if silent is not None:
        raise CliError(
            f"no server answered in {count} scrape(s), {args.output} holds only the failures: "
            f"{silent}",
            EXIT_NO_DATA,
        )
    print(f"{count} frames written to {args.output}", file=sys.stderr)
    return 0
