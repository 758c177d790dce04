"""Command line: argv -> settings -> command."""

from __future__ import annotations

import argparse
import asyncio
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
    add_view_options(parser)
    add_target_options(parser)
    return parser


def monitor_main(argv: list[str]) -> int:
    """Watch one or more vLLM servers."""
    from vtop.monitor import run_monitor

    args = monitor_parser().parse_args(argv)
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


def bench_main(argv: list[str]) -> int:
    """`vtop bench`: the load generator."""
    from vtop.bench_cli import bench_main as run

    return run(argv)


def diagnose_main(argv: list[str]) -> int:
    """`vtop diagnose`: one-shot triage."""
    from vtop.diagnose_cli import diagnose_main as run

    return run(argv)


def rules_main(argv: list[str]) -> int:
    """`vtop rules`: check, test and export rules."""
    from vtop.diagnose_cli import rules_main as run

    return run(argv)


def record_main(argv: list[str]) -> int:
    """`vtop record`: flight recorder."""
    from vtop.record_cli import record_main as run

    return run(argv)


def replay_main(argv: list[str]) -> int:
    """`vtop replay`: the dashboard on a recording."""
    from vtop.dashboard_cli import replay_main as run

    return run(argv)


def demo_main(argv: list[str]) -> int:
    """`vtop demo`: the dashboard on the recording shipped with vtop."""
    from vtop.dashboard_cli import demo_main as run

    return run(argv)


def bundle_main(argv: list[str]) -> int:
    """`vtop bundle`: an incident tarball."""
    from vtop.bundle_cli import bundle_main as run

    return run(argv)


def _serve_command(name: str) -> Command:
    """A `vtop serve` family command, imported when used."""

    def run(argv: list[str]) -> int:
        from vtop import serve_cli

        main_of: Command = getattr(serve_cli, f"{name}_main")
        return main_of(argv)

    return run


def kv_main(argv: list[str]) -> int:
    """`vtop kv`: KV-cache calculator."""
    from vtop.kv_cli import kv_main as run

    return run(argv)


COMMANDS: dict[str, Command] = {
    "bench": bench_main,
    "diagnose": diagnose_main,
    "rules": rules_main,
    "kv": kv_main,
    "record": record_main,
    "replay": replay_main,
    "demo": demo_main,
    "bundle": bundle_main,
    **{name: _serve_command(name) for name in ("serve", "ps", "stop", "attach", "tune")},
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `vtop` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        return COMMANDS[args[0]](args[1:])
    return monitor_main(args)
