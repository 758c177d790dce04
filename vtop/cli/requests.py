"""`vtop requests --otlp ADDR`: receive vLLM's per-request spans for a window and print the
slowest requests with where their time went; exit 0 with spans, 3 with none."""

from __future__ import annotations

import argparse
import time

from vtop.cli.errors import CliError
from vtop.cli.frames import file_argument, read_frames
from vtop.cli.options import add_otlp_options, parser, settings_from
from vtop.core.config.otlp_address import OtlpAddressError, parse_address
from vtop.core.config.settings import Settings
from vtop.core.frame import RequestSpan
from vtop.core.ingest.sources.otlp_receiver import (
    SpanStore,
    receiving,
)
from vtop.core.session.request_view import SORTS, ranked, time_split
from vtop.core.status import ExitCode
from vtop.core.strict_json import strict_json
from vtop.text.fold import fold, terminal_width
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
        "recording",
        nargs="?",
        help="a recording or bundle: the spans it holds (vtop record --otlp ADDR), not a "
        "window of listening",
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


def requests_main(argv: list[str]) -> int:
    """Run `vtop requests`."""
    args = requests_parser().parse_args(argv)
    if args.window <= 0 or args.limit <= 0:
        raise CliError("vtop requests: --window and --limit must be positive")
    settings = settings_from(args)
    store = SpanStore()
    if args.recording is not None:
        spans, bound = recorded_spans(args.recording), [args.recording]
        received = f"{len(spans)} request span(s) in {args.recording}"
    else:
        bound = listen(settings, store, args.window)
        spans = store.spans()
        received = f"{len(spans)} request span(s) in {args.window:g} s on {', '.join(bound)}"
    listed = ranked(spans, args.sort, args.limit)
    splits = time_split(spans)
    received += (f"; {store.dropped} dropped (oldest)" if store.dropped else "") + (
        f"; {store.refused} export(s) refused" if store.refused else ""
    )
    if args.json:
        print(
            strict_json(
                {
                    "schema": SCHEMA,
                    "received": len(spans),
                    "dropped": store.dropped,
                    "refused": store.refused,
                    "listening": bound,
                    "requests": [span_json(span) for span in listed],
                    "time_split": [split_json(split) for split in splits],
                }
            )
        )
    else:
        lines = requests_lines(listed, splits, received)
        why = TURN_ON if args.recording is None else NONE_RECORDED
        print(fold("\n".join(lines if spans else [received, why]), terminal_width()))
    return ExitCode.OK if spans else ExitCode.UNKNOWN
