"""`vtop bundle`: an incident tarball from a recording or from a live server."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from vtop.core.bundle import BundleContents, write_bundle
from vtop.core.diagnose import DiagnoseOptions, Diagnosis, diagnose_frames
from vtop.core.frame import Frame
from vtop.core.poller import poll
from vtop.core.recorder import is_recording
from vtop.core.rules import load_rules
from vtop.core.sources.nvml import NvmlSource
from vtop.core.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.report import json_report


def bundle_contents(diagnosis: Diagnosis, log_text: str | None, argv: str | None) -> BundleContents:
    """Findings as JSON plus what is known about the server."""
    return BundleContents(
        findings=json_report(diagnosis),
        log_lines=tuple((log_text or "").splitlines()),
        argv=argv,
        vllm_version=diagnosis.config.facts.version,
    )


def last_minutes(frames: list[Frame], minutes: float) -> list[Frame]:
    """The frames of the last `minutes` of a recording."""
    if not frames:
        return []
    since = frames[-1].timestamp - minutes * 60
    return [frame for frame in frames if frame.timestamp >= since]


async def sample(url: str, options: ScrapeOptions, seconds: float, interval: float) -> list[Frame]:
    """Frames from a live server for `seconds`."""
    source, nvml = VllmHttpSource(url, options), NvmlSource()
    frames: list[Frame] = []
    started = time.time()
    try:
        while not frames or time.time() - started < seconds:
            frames.append(await poll([source], nvml, time.time()))
            await asyncio.sleep(interval)
    finally:
        await source.close()
        nvml.close()
    return frames


def bundle_main(argv: list[str]) -> int:
    """Run `vtop bundle`."""
    from vtop.cli import add_target_options, scrape_options
    from vtop.dashboard_cli import read_frames

    parser = argparse.ArgumentParser(prog="vtop bundle", description="incident bundle")
    parser.add_argument("source", help="a recording, or a server URL to sample")
    parser.add_argument(
        "-o", "--output", type=Path, help="tarball (default vtop-bundle-TIME.tar.gz)"
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="of a recording to keep")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds to sample a URL")
    parser.add_argument("--vllm-log", type=Path, help="the server's log (its tail goes in)")
    parser.add_argument("--vllm-args", help="the server's `vllm serve` flags")
    add_target_options(parser)
    args = parser.parse_args(argv)
    if is_recording(args.source):
        frames = read_frames(Path(args.source), "vtop bundle")
        if frames is None:
            return 3
        frames = last_minutes(frames, args.minutes)
    else:
        frames = asyncio.run(sample(args.source, scrape_options(args), args.duration, 1.0))
    log_text = args.vllm_log.read_text(errors="replace") if args.vllm_log else None
    options = DiagnoseOptions(vllm_args=args.vllm_args, vllm_log=log_text)
    target = next((s.target for f in frames for s in f.scrapes), args.source)
    diagnosis = diagnose_frames(target, frames, load_rules(), options)
    output = args.output or Path(time.strftime("vtop-bundle-%Y%m%d-%H%M%S.tar.gz"))
    write_bundle(output, frames, bundle_contents(diagnosis, log_text, args.vllm_args))
    print(f"{output}: {len(frames)} frames, verdict {diagnosis.verdict}", file=sys.stderr)
    return 0
