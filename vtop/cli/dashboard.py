"""`vtop [URL ...]`, `vtop replay FILE`, `vtop demo`: the dashboard (or plain lines) on a feed."""

from __future__ import annotations

import argparse
import asyncio
from importlib import resources
from pathlib import Path

from vtop.cli.errors import CliError
from vtop.cli.frames import read_frames
from vtop.cli.options import (
    add_target_options,
    add_view_options,
    log_text_of,
    parser,
    rules_of,
    scrape_options,
    settings_from,
)
from vtop.core.config.settings import DEFAULT_URL, Settings
from vtop.core.ingest.feeds import Feed, LiveFeed, RecordingFeed, ReplayFeed
from vtop.core.ingest.recorder import RecordingWriter
from vtop.core.ingest.sources.nvml import NvmlSource
from vtop.core.ingest.sources.prometheus import PrometheusClient, PrometheusFeed
from vtop.core.ingest.sources.vllm_http import VllmHttpSource
from vtop.core.process_state import ServerState
from vtop.text.plain import run_plain

DEMO_RECORDING = "storm.vtoprec"
EXIT_SETTINGS = 2


def monitor_parser() -> argparse.ArgumentParser:
    """`vtop [URL ...]` (the commands are listed by main's help)."""
    watch = parser("vtop", "top for vLLM: a live dashboard of one or more vLLM servers")
    watch.add_argument(
        "urls", nargs="*", metavar="URL", help=f"vLLM servers (default {DEFAULT_URL})"
    )
    watch.add_argument("--interval", type=float, help="seconds between scrapes (1)")
    watch.add_argument("--plain", action="store_true", help="plain text lines instead of the TUI")
    watch.add_argument("--once", action="store_true", help="plain: take --samples scrapes, exit")
    watch.add_argument("--samples", type=int, default=2, help="scrapes taken with --once")
    watch.add_argument("--record", metavar="FILE", help="also write every frame to a recording")
    watch.add_argument(
        "--prometheus", metavar="URL", help="read the vLLM servers a Prometheus server scrapes"
    )
    watch.add_argument(
        "--alerts",
        action="store_true",
        default=None,
        help="--prometheus: the alerts it fires for `vtop rules export` and headline figures, "
        "not every raw series (fleets of hundreds)",
    )
    add_view_options(watch)
    add_target_options(watch)
    return watch


def monitor_main(argv: list[str]) -> int:
    """Watch one or more vLLM servers."""
    args = monitor_parser().parse_args(argv)
    if args.prometheus and (args.plain or args.once or args.urls):
        raise CliError("--prometheus reads every server from Prometheus: no URLs, no --plain")
    settings = settings_from(
        args,
        urls=tuple(args.urls) or None,
        prometheus=args.prometheus or None,
        prometheus_alerts=args.alerts,
    )
    if settings.prometheus_alerts and not settings.prometheus:
        raise CliError("--alerts reads a Prometheus server's alerts: give --prometheus URL")
    feed = live_feed(settings, args.record, gpus=not args.no_gpu)
    if args.plain or args.once:
        ticks = args.samples if args.once else None
        rules = rules_of(settings)
        log = log_text_of(settings, EXIT_SETTINGS)
        return asyncio.run(run_plain(feed, rules, settings, log, ticks))
    return run_dashboard(settings, feed)


def live_feed(settings: Settings, record: str | None = None, gpus: bool = True) -> Feed:
    """A feed of the settings' endpoints (or Prometheus), recorded to `record` when given."""
    options = scrape_options(settings)
    feed: Feed
    if settings.prometheus:
        client = PrometheusClient(settings.prometheus, options)
        feed = PrometheusFeed(client, settings.interval_s, settings.prometheus_alerts)
    else:
        sources = [VllmHttpSource(url, options) for url in settings.urls]
        feed = LiveFeed(sources, NvmlSource() if gpus else None, settings.interval_s)
    return RecordingFeed(feed, RecordingWriter(Path(record))) if record else feed


def run_dashboard(
    settings: Settings, feed: Feed, server: ServerState | None = None, readonly: bool = False
) -> int:
    """Run the Textual app until the user quits."""
    from vtop.ui.app import VtopApp

    rules = rules_of(settings)
    log_text = log_text_of(settings, EXIT_SETTINGS)
    app = VtopApp(settings, feed, rules, log_text=log_text, server=server, readonly=readonly)
    app.tune_gc = True
    code = app.run()
    return code if isinstance(code, int) else 0


def replay_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Arguments of `vtop replay` and `vtop demo`."""
    replay = parser(prog, description)
    replay.add_argument("--speed", type=float, default=1.0, help="times real time; 0 = at once")
    replay.add_argument("--seek", type=float, default=0.0, help="start N seconds into it")
    add_view_options(replay)
    return replay


def replay(path: Path, args: argparse.Namespace) -> int:
    """The dashboard on a recording (`p` pauses, `+`/`-` change the speed, `[` `]` step)."""
    frames = read_frames(path)
    urls = tuple(dict.fromkeys(s.target for f in frames for s in f.scrapes)) or ("recording",)
    settings = settings_from(args, urls=urls)
    feed = ReplayFeed(frames, args.speed)
    feed.start_index = feed.index_at(args.seek) if args.seek > 0 else 0
    return run_dashboard(settings, feed)


def replay_file_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop replay FILE`."""
    replayer = replay_parser("vtop replay", "the dashboard on a recording or incident bundle")
    replayer.add_argument("file", type=Path, help="a recording (`vtop record`) or a bundle")
    return replayer


def demo_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop demo`."""
    return replay_parser("vtop demo", "the dashboard on a recorded real incident")


def replay_main(argv: list[str]) -> int:
    """Run `vtop replay FILE`."""
    args = replay_file_parser().parse_args(argv)
    return replay(args.file, args)


def demo_main(argv: list[str]) -> int:
    """Run `vtop demo`: the recording shipped with vtop."""
    args = demo_parser().parse_args(argv)
    with resources.as_file(resources.files("vtop.demo") / DEMO_RECORDING) as path:
        return replay(path, args)
