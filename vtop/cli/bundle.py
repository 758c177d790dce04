"""`vtop bundle`: a recording, or a live feed for a window -> session -> incident tarball."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from vtop.cli.errors import CliError
from vtop.cli.frames import file_argument, never_answered, read_frames
from vtop.cli.options import (
    add_rules_option,
    add_target_options,
    diagnose_options_of,
    parser,
    rules_of,
    settings_from,
)
from vtop.core.frame import Frame
from vtop.core.ingest.bundle import BundleContents, write_bundle
from vtop.core.ingest.open_feed import first_server, open_feed
from vtop.core.ingest.window import window_frames
from vtop.core.ops.process_evidence import with_process_evidence
from vtop.core.session.diagnose import Diagnosis, diagnose_frames
from vtop.core.status import ExitCode
from vtop.text.report import json_report

EXIT_FAILED = ExitCode.UNKNOWN


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


def bundle_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop bundle`."""
    bundler = parser("vtop bundle", "an incident bundle: recording, findings, log tail, argv")
    bundler.add_argument("source", help="a recording or bundle, or a server URL to sample")
    bundler.add_argument(
        "-o", "--output", type=Path, help="tarball (default vtop-bundle-TIME.tar.gz here)"
    )
    bundler.add_argument("--minutes", type=float, default=10.0, help="of a recording to keep")
    bundler.add_argument("--duration", type=float, default=30.0, help="seconds to sample a URL")
    bundler.add_argument("--vllm-log", help="the server's log (its tail goes in)")
    bundler.add_argument("--vllm-args", help="the server's `vllm serve` flags")
    add_rules_option(bundler)
    add_target_options(bundler)
    return bundler


def bundle_main(argv: list[str]) -> int:
    """Run `vtop bundle`."""
    args = bundle_parser().parse_args(argv)
    path = file_argument(args.source)
    settings = settings_from(args, urls=None if path is not None else (args.source,))
    if path is not None:
        frames = last_minutes(read_frames(path), args.minutes)
    else:
        feed = open_feed(first_server(settings), gpus=not args.no_gpu)
        frames = asyncio.run(window_frames(feed, args.duration))
    options = diagnose_options_of(settings, read_gpus=not args.no_gpu)
    target = next((s.target for f in frames for s in f.scrapes), args.source)
    diagnosis = diagnose_frames(target, frames, rules_of(settings), options)
    if path is None:
        diagnosis = with_process_evidence(diagnosis, args.source, options.vllm_log)
    output = args.output or Path(time.strftime("vtop-bundle-%Y%m%d-%H%M%S.tar.gz"))
    write_bundle(output, frames, bundle_contents(diagnosis, options.vllm_log, settings.vllm_args))
    silent = never_answered(frames)
    if silent is not None:
        raise CliError(
            f"no server answered in {len(frames)} frame(s), {output} holds only the failures: "
            f"{silent}",
            EXIT_FAILED,
        )
    print(f"{output}: {len(frames)} frames, verdict {diagnosis.verdict}", file=sys.stderr)
    return 0
