"""`vtop [URL ...]`, `vtop replay FILE`, `vtop demo`: the dashboard on live data or a recording."""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from vtop.core.bundle import extract_recording, is_bundle, not_a_recording
from vtop.core.feeds import Feed, LiveFeed, RecordingFeed, ReplayFeed
from vtop.core.frame import Frame
from vtop.core.process import ServerState
from vtop.core.recorder import RecordingError, RecordingReader, RecordingWriter
from vtop.core.rules import PACKAGED, RuleFileError, load_rules
from vtop.core.settings import PANELS, Settings, SettingsError, load_settings
from vtop.core.sources.nvml import NvmlSource
from vtop.core.sources.prometheus import PrometheusClient, PrometheusFeed
from vtop.core.sources.vllm_http import ScrapeOptions, VllmHttpSource

DEMO_RECORDING = "storm.vtoprec"


def add_view_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by the live and replay dashboards (None = not given, for layering)."""
    parser.add_argument("--window", type=float, help="seconds for rates and quantiles (15)")
    parser.add_argument("--history", type=float, help="seconds of history in charts (300)")
    parser.add_argument("--low-redraw", action="store_true", default=None, help="slow links")
    parser.add_argument("--hide", help=f"panels to hide, comma-separated: {','.join(PANELS)}")
    parser.add_argument("--rules", help="directory of extra or overriding rules")
    parser.add_argument("--vllm-args", help="the server's `vllm serve` flags, as one string")
    parser.add_argument("--vllm-log", help="the server's log file (for its startup lines)")


def view_flags(args: argparse.Namespace) -> dict[str, Any]:
    """Flags as settings fields (None when not given)."""
    return {
        "window_s": args.window,
        "history_s": args.history,
        "low_redraw": args.low_redraw,
        "hidden_panels": args.hide,
        "rules_dir": args.rules,
        "vllm_args": args.vllm_args,
        "vllm_log": args.vllm_log,
    }


def run_dashboard(
    settings: Settings,
    feed: Feed,
    server: ServerState | None = None,
    readonly: bool = False,
) -> int:
    """Run the Textual app until the user quits."""
    from vtop.ui.app import VtopApp

    try:
        rules = load_rules([PACKAGED, *([Path(settings.rules_dir)] if settings.rules_dir else [])])
        log_text = (
            Path(settings.vllm_log).read_text(errors="replace") if settings.vllm_log else None
        )
    except (RuleFileError, OSError) as error:
        print(f"vtop: {error}", file=sys.stderr)
        return 2
    pids = frozenset({server.pid}) if server is not None else frozenset()
    app = VtopApp(
        settings,
        feed,
        rules,
        vllm_pids=pids,
        log_text=log_text,
        server=server,
        readonly=readonly,
        tune_gc=True,
    )
    return app.run() or 0


def live_dashboard(args: argparse.Namespace, options: ScrapeOptions) -> int:
    """The dashboard on live endpoints."""
    flags = view_flags(args) | {
        "urls": args.urls or None,
        "interval_s": args.interval,
        "timeout_s": options.timeout_s,
        "prometheus": args.prometheus,
    }
    try:
        settings = load_settings(flags)
    except SettingsError as error:
        print(f"vtop: {error}", file=sys.stderr)
        return 2
    feed: Feed
    if settings.prometheus:
        client = PrometheusClient(settings.prometheus, replace(options, api_key=None))
        feed = PrometheusFeed(client, settings.interval_s)
    else:
        sources = [VllmHttpSource(url, options) for url in settings.urls]
        feed = LiveFeed(sources, NvmlSource(), settings.interval_s)
    if args.record:
        feed = RecordingFeed(feed, RecordingWriter(Path(args.record)))
    return run_dashboard(settings, feed)


def read_frames(path: Path, prog: str = "vtop replay") -> list[Frame] | None:
    """Every complete frame of a recording or bundle; problems go to stderr."""
    problem = not_a_recording(path)
    if problem is not None:
        print(f"{prog}: {problem}", file=sys.stderr)
        return None
    if is_bundle(path):
        with tempfile.TemporaryDirectory() as scratch:
            return read_frames(extract_recording(path, Path(scratch)), prog)
    reader = RecordingReader(path)
    try:
        frames = list(reader)
    except (RecordingError, OSError) as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return None
    if reader.problem:
        print(f"{prog}: {reader.problem} (using every complete frame)", file=sys.stderr)
    if not frames:
        print(f"{prog}: {path} holds no complete frame", file=sys.stderr)
        return None
    return frames


def replay_parser(prog: str) -> argparse.ArgumentParser:
    """Arguments of `vtop replay` and `vtop demo`."""
    parser = argparse.ArgumentParser(prog=prog, description="the dashboard on a recording")
    parser.add_argument("--speed", type=float, default=1.0, help="x times real time; 0 = max")
    parser.add_argument("--seek", type=float, default=0.0, help="start N seconds into it")
    add_view_options(parser)
    return parser


def replay(path: Path, args: argparse.Namespace) -> int:
    """The dashboard on a recording."""
    frames = read_frames(path)
    if frames is None:
        return 3
    urls = tuple(dict.fromkeys(s.target for f in frames for s in f.scrapes)) or ("recording",)
    try:
        settings = load_settings(view_flags(args) | {"urls": urls})
    except SettingsError as error:
        print(f"vtop: {error}", file=sys.stderr)
        return 2
    feed = ReplayFeed(frames, args.speed)
    feed.start_index = feed.index_at(args.seek) if args.seek > 0 else 0
    return run_dashboard(settings, feed)


def replay_main(argv: list[str]) -> int:
    """Run `vtop replay FILE`."""
    parser = replay_parser("vtop replay")
    parser.add_argument("file", type=Path, help="a recording made by `vtop record`")
    args = parser.parse_args(argv)
    return replay(args.file, args)


def demo_main(argv: list[str]) -> int:
    """Run `vtop demo`: the recording shipped with vtop."""
    args = replay_parser("vtop demo").parse_args(argv)
    with resources.as_file(resources.files("vtop.demo") / DEMO_RECORDING) as path:
        return replay(path, args)
