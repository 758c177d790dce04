"""`vtop [URL ...]`, `vtop replay FILE`, `vtop demo`: the dashboard (or plain lines) on a feed."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from importlib import resources
from pathlib import Path

from vtop.cli.errors import CliError
from vtop.cli.frames import read_frames
from vtop.cli.judging import add_judge_option, prometheus_reader, resolved
from vtop.cli.options import (
    add_otlp_options,
    add_probe_options,
    add_target_options,
    add_view_options,
    diagnose_options_of,
    not_negative_float,
    parser,
    rules_of,
    settings_from,
)
from vtop.cli.spans import open_feed_with_spans
from vtop.core.config.settings import DEFAULT_URL, Settings
from vtop.core.ingest.feeds import Feed, ReplayFeed
from vtop.core.managed_server import ManagedServer
from vtop.text.plain import run_plain

DEMO_RECORDING = "storm.vtoprec"
NOT_A_TERMINAL = (
    "vtop: stdout is not a terminal: printing plain lines (--plain) instead of the dashboard"
)


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
    add_judge_option(watch)
    add_view_options(watch)
    add_probe_options(watch)
    add_otlp_options(watch)
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
    record = Path(args.record) if args.record else None
    settings = resolved(settings)
    reader = prometheus_reader(settings, rules_of(settings))
    feed = open_feed_with_spans(settings, gpus=not args.no_gpu, record=record, reader=reader)
    if args.plain or args.once:
        return plain_lines(settings, feed, args.samples if args.once else None)
    return run_dashboard(settings, feed)


def plain_lines(settings: Settings, feed: Feed, ticks: int | None = None) -> int:
    """`--plain`: a line per server per frame instead of the dashboard."""
    rules = rules_of(settings)
    options = diagnose_options_of(settings)
    servers = len(settings.urls)
    return asyncio.run(run_plain(feed, rules, options, ticks, servers=servers))


def run_dashboard(
    settings: Settings, feed: Feed, server: ManagedServer | None = None, readonly: bool = False
) -> int:
    """Run the Textual app until the user quits; without a terminal on stdout (a pipe, a file,
    cron), the plain lines instead, said once on stderr."""
    from vtop.ui.app import VtopApp

    if not sys.stdout.isatty():
        print(NOT_A_TERMINAL, file=sys.stderr)
        return plain_lines(settings, feed)
    rules = rules_of(settings)
    options = diagnose_options_of(settings)
    app = VtopApp(settings, feed, rules, options, server=server, readonly=readonly)
    app.tune_gc = True
    code = app.run()
    return code if isinstance(code, int) else 0


def replay_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Arguments of `vtop replay` and `vtop demo`."""
    replay = parser(prog, description)
    replay.add_argument(
        "--speed",
        type=not_negative_float,
        help="times real time; 0 = at once (default: 1, or 0 with --plain)",
    )
    replay.add_argument("--plain", action="store_true", help="plain text lines, one per frame")
    replay.add_argument("--seek", type=float, default=0.0, help="start N seconds into it")
    add_view_options(replay)
    return replay


def replay(path: Path, args: argparse.Namespace) -> int:
    """The dashboard on a recording (`p` pauses, `+`/`-` change the speed, `[` `]` step)."""
    frames = read_frames(path)
    urls = tuple(dict.fromkeys(s.target for f in frames for s in f.scrapes)) or ("recording",)
    settings = dataclasses.replace(settings_from(args), urls=urls)  # names, not addresses
    speed = args.speed if args.speed is not None else (0.0 if args.plain else 1.0)
    feed = ReplayFeed(frames, speed)
    feed.start_index = feed.index_at(args.seek) if args.seek > 0 else 0
    return plain_lines(settings, feed) if args.plain else run_dashboard(settings, feed)


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
