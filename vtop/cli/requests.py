"""`vtop requests [URL|RECORDING] [--otlp ADDR]`: the requests a server has in flight (vtop's
middleware in it lists them), and vLLM's per-request spans received for a window (or held by
a recording): the slowest requests with where their time went; exit 0 with either, 3 with
neither."""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtop.cli.errors import CliError
from vtop.cli.frames import file_argument, read_frames
from vtop.cli.options import add_otlp_options, parser, settings_from
from vtop.core.config.otlp_address import OtlpAddressError, parse_address
from vtop.core.config.settings import Settings, server_url
from vtop.core.frame import InFlightRequest, RequestSpan, TargetScrape
from vtop.core.ingest.open_feed import scrape_options
from vtop.core.ingest.sources.otlp_receiver import (
    SpanStore,
    receiving,
)
from vtop.core.ingest.sources.vllm_http import VllmHttpSource
from vtop.core.session.request_view import SORTS, ranked, spans_of_server, time_split
from vtop.core.status import ExitCode
from vtop.core.strict_json import strict_json
from vtop.text.fold import fold, terminal_width
from vtop.text.in_flight import in_flight_json, in_flight_lines
from vtop.text.requests import TURN_ON, requests_lines, span_json, split_json

SCHEMA = "vtop.requests/1"
DEFAULT_OTLP = "grpc://127.0.0.1:4317"
NONE_RECORDED = (
    "this recording holds no request span: record with `vtop record --otlp ADDR` (or the "
    "dashboard with --otlp and --record) while vLLM exports its spans there"
)
"""Where `vtop requests` listens when no address is given: OTLP/gRPC's own port."""


def requests_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop requests`."""
    command = parser(
        "vtop requests",
        "receive vLLM's per-request OpenTelemetry spans (OTLP over gRPC or HTTP) for a window "
        "and show the slowest requests: queue | prefill | decode, TTFT, tokens",
        epilog="exit codes: 0 spans received, 3 none arrived, 64 usage",
    )
    add_otlp_options(command)
    command.add_argument(
        "--window", type=float, default=30.0, help="seconds to receive spans for (30)"
    )
    command.add_argument("--sort", choices=sorted(SORTS), default="e2e", help="rank by (e2e)")
    command.add_argument("--limit", type=int, default=20, help="requests listed (20)")
    command.add_argument(
        "source",
        nargs="?",
        metavar="URL|RECORDING",
        help="a vLLM server: the requests it has in flight (when vtop's middleware is loaded: "
        "vtop serve does), and with --otlp the spans of its requests that finish in the "
        "window; or a recording or bundle: the spans it holds (vtop record --otlp ADDR)",
    )
    command.add_argument("--json", action="store_true", help="print JSON")
    return command


def listen(settings: Settings, store: SpanStore, window_s: float) -> list[str]:
    """Receive spans for the window on the settings' addresses (OTLP/gRPC's own port when
    none); the addresses as bound."""
    try:
        addresses = [parse_address(text) for text in settings.otlp or (DEFAULT_OTLP,)]
        with receiving(addresses, store, settings.otlp_token) as bound:
            time.sleep(window_s)
    except OtlpAddressError as error:
        raise CliError(f"vtop requests: --otlp {error}") from error
    return bound


def recorded_spans(text: str) -> list[RequestSpan]:
    """The spans a recording or bundle holds (frames written while vtop listened for them)."""
    path = file_argument(text)
    if path is None:
        raise CliError(f"vtop requests: {text}: no such recording or bundle")
    return [span for frame in read_frames(path) for span in frame.spans]


@dataclass
class Heard:
    """The spans a run has to show, where they came from, and what the receiver dropped."""

    spans: list[RequestSpan]
    bound: list[str]
    received: str
    """`7 request span(s) in 30 s on grpc://...` (empty when nothing was listened to)."""
    store: SpanStore


def requests_main(argv: list[str]) -> int:
    """Run `vtop requests`."""
    args = requests_parser().parse_args(argv)
    if args.window <= 0 or args.limit <= 0:
        raise CliError("vtop requests: --window and --limit must be positive")
    path = file_argument(args.source) if args.source else None
    url = server_of(args.source) if args.source and path is None else None
    settings = settings_from(args)
    if url is not None and settings.otlp:
        asyncio.run(scrape_once(url, settings))  # a dead or not-vLLM URL: refused before the window
    heard = spans_heard(args, settings, path, url)
    in_flight: tuple[InFlightRequest, ...] | None = None
    if url is not None:
        scrape = asyncio.run(scrape_once(url, settings))
        in_flight, heard.spans = scrape.in_flight, spans_of_server(heard.spans, scrape.target)
    if args.json:
        print(strict_json(requests_json(heard, in_flight, args)))
    else:
        print(fold(requests_text(heard, in_flight, args, url, path), terminal_width()))
    return ExitCode.OK if heard.spans or in_flight is not None else ExitCode.UNKNOWN


def server_of(text: str) -> str:
    """The server's base URL (a bare host means vLLM's port 8000, as everywhere)."""
    try:
        return server_url(text)
    except ValueError as error:
        raise CliError(f"vtop requests: {error}") from None


def spans_heard(
    args: argparse.Namespace, settings: Settings, path: Path | None, url: str | None
) -> Heard:
    """The recording's spans, or those received in the window (none listened for when a URL
    is given without --otlp: its requests in flight are then the answer)."""
    store = SpanStore()
    if path is not None:
        spans = recorded_spans(args.source)
        return Heard(spans, [args.source], f"{len(spans)} request span(s) in {args.source}", store)
    if url is not None and not settings.otlp:
        return Heard([], [], "", store)
    bound = listen(settings, store, args.window)
    spans = store.spans()
    received = f"{len(spans)} request span(s) in {args.window:g} s on {', '.join(bound)}"
    received += (f"; {store.dropped} dropped (oldest)" if store.dropped else "") + (
        f"; {store.refused} export(s) refused" if store.refused else ""
    )
    return Heard(spans, bound, received, store)


def requests_json(
    heard: Heard, in_flight: tuple[InFlightRequest, ...] | None, args: argparse.Namespace
) -> dict[str, Any]:
    """The vtop.requests/1 document."""
    return {
        "schema": SCHEMA,
        "received": len(heard.spans),
        "dropped": heard.store.dropped,
        "refused": heard.store.refused,
        "listening": heard.bound,
        "requests": [span_json(span) for span in ranked(heard.spans, args.sort, args.limit)],
        "time_split": [split_json(split) for split in time_split(heard.spans)],
        "in_flight": None if in_flight is None else [in_flight_json(r) for r in in_flight],
    }


def requests_text(
    heard: Heard,
    in_flight: tuple[InFlightRequest, ...] | None,
    args: argparse.Namespace,
    url: str | None,
    path: Path | None,
) -> str:
    """The requests in flight (with a URL), then the ranked spans or why there are none."""
    lines = [] if url is None else [*in_flight_lines(in_flight), ""]
    if heard.received:
        listed = ranked(heard.spans, args.sort, args.limit)
        splits = time_split(heard.spans)
        why = TURN_ON if path is None else NONE_RECORDED
        shown = requests_lines(listed, splits, heard.received)
        lines += shown if heard.spans else [heard.received, why]
    return "\n".join(lines).rstrip("\n")


async def scrape_once(url: str, settings: Settings) -> TargetScrape:
    """One scrape of the server (with its requests in flight when it lists them); a server
    that does not answer as vLLM is refused in one line."""
    source = VllmHttpSource(url, scrape_options(settings))
    try:
        scrape = await source.scrape()
    finally:
        await source.close()
    if not scrape.ok:
        message = f"vtop requests: {scrape.target}: {scrape.status.value}: {scrape.error}"
        raise CliError(message, ExitCode.UNKNOWN)
    return scrape
