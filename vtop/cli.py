"""Command line: argv -> settings -> command."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from vtop import __version__
from vtop.core.sources.vllm_http import API_KEY_ENV, DEFAULT_URL, ScrapeOptions
from vtop.dashboard_cli import add_view_options

Command = Callable[[list[str]], int]


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """Options for reaching vLLM endpoints."""
    parser.add_argument("--api-key", default=None, help=f"bearer token (default: ${API_KEY_ENV})")
    parser.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    parser.add_argument("--timeout", type=float, default=5.0, help="scrape timeout in seconds")


def scrape_options(args: argparse.Namespace) -> ScrapeOptions:
    """ScrapeOptions from parsed arguments and the environment."""
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    return ScrapeOptions(timeout_s=args.timeout, api_key=api_key, verify_tls=not args.insecure)


def monitor_parser() -> argparse.ArgumentParser:
    """`vtop [URL ...]`."""
    parser = argparse.ArgumentParser(prog="vtop", description="top for vLLM")
    parser.add_argument("urls", nargs="*", metavar="URL", help=f"default {DEFAULT_URL}")
    parser.add_argument("--version", action="version", version=f"vtop {__version__}")
    parser.add_argument("--interval", type=float, help="seconds between scrapes (1)")
    parser.add_argument("--plain", action="store_true", help="plain text lines instead of the TUI")
    parser.add_argument("--once", action="store_true", help="plain: take --samples scrapes, exit")
    parser.add_argument("--samples", type=int, default=2, help="scrapes taken with --once")
    parser.add_argument("--record", metavar="FILE", help="also write every frame to a recording")
    parser.add_argument(
        "--prometheus", metavar="URL", help="read the vLLM servers a Prometheus server scrapes"
    )
    add_view_options(parser)
    add_target_options(parser)
    return parser


def monitor_main(argv: list[str]) -> int:
    """Watch one or more vLLM servers."""
    from vtop.monitor import run_monitor

    args = monitor_parser().parse_args(argv)
    if args.prometheus and (args.plain or args.once or args.urls):
        print("vtop: --prometheus reads every server from Prometheus: no URLs, no --plain")
        return 2
    if not (args.plain or args.once):
        from vtop.dashboard_cli import live_dashboard

        return live_dashboard(args, scrape_options(args))
    ticks = args.samples if args.once else None
    interval, window = args.interval or 1.0, args.window or 15.0
    try:
        urls = args.urls or [DEFAULT_URL]
        return asyncio.run(run_monitor(urls, scrape_options(args), interval, window, ticks))
    except KeyboardInterrupt:
        return 0


SERVE_COMMANDS = ("serve", "ps", "stop", "attach", "tune")


def lazy(module: str, function: str) -> Command:
    """A subcommand whose module is imported only when it runs (keeps `vtop --help` fast)."""

    def run(argv: list[str]) -> int:
        main_of: Command = getattr(importlib.import_module(module), function)
        return main_of(argv)

    return run


COMMANDS: dict[str, Command] = {
    "bench": lazy("vtop.bench_cli", "bench_main"),
    "diagnose": lazy("vtop.diagnose_cli", "diagnose_main"),
    "rules": lazy("vtop.diagnose_cli", "rules_main"),
    "kv": lazy("vtop.kv_cli", "kv_main"),
    "record": lazy("vtop.record_cli", "record_main"),
    "replay": lazy("vtop.dashboard_cli", "replay_main"),
    "demo": lazy("vtop.dashboard_cli", "demo_main"),
    "bundle": lazy("vtop.bundle_cli", "bundle_main"),
    **{
        name: lazy("vtop.serve_cli", f"{name}_main")
        for name in ("serve", "ps", "stop", "attach", "tune")
    },
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `vtop` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        return COMMANDS[args[0]](args[1:])
    return monitor_main(args)
