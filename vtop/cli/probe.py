"""`vtop probe URL`: canaries through the URL users call, beside the engine's own view."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses

from vtop.cli.errors import CliError
from vtop.cli.options import (
    add_otlp_options,
    add_rules_option,
    add_target_options,
    parser,
    positive_float,
    positive_int,
    rules_of,
    settings_from,
)
from vtop.cli.spans import listening_for_spans, wait_for_last_spans
from vtop.core.config.settings import server_url
from vtop.core.ingest.open_feed import open_canary_feed, probe_options
from vtop.core.ingest.sources.otlp_receiver import SpanStore
from vtop.core.ingest.sources.probe import ProbeOptions
from vtop.core.ops.front_door import probe_front_door, with_canary_spans
from vtop.core.strict_json import strict_json
from vtop.text.fold import fold, terminal_width
from vtop.text.probe import json_probe, text_probe

ENDPOINTS = {"completions": ("completions",), "chat": ("chat",), "both": ("completions", "chat")}


def probe_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop probe`."""
    probe = parser(
        "vtop probe",
        "stream canary requests through the URL users call (a proxy, a gateway) and compare "
        "what arrives, and when, with what vLLM reports",
        epilog="exit codes: 0 the path is clean, 1 warning, 2 critical, 3 no canary answered",
    )
    probe.add_argument("url", help="the URL users call (the proxy's, not vLLM's own)")
    probe.add_argument(
        "--engine", metavar="URL", help="vLLM's own URL, when the proxy does not pass /metrics"
    )
    probe.add_argument(
        "--endpoint", choices=sorted(ENDPOINTS), default="both", help="which API to stream"
    )
    probe.add_argument("--count", type=positive_int, default=2, help="canaries per endpoint")
    probe.add_argument(
        "--tokens", type=positive_int, default=ProbeOptions().max_tokens, help="tokens per canary"
    )
    probe.add_argument(
        "--probe-timeout", type=positive_float, default=75.0, help="seconds a canary may take"
    )
    probe.add_argument("--json", action="store_true", help="print the JSON report")
    add_rules_option(probe)
    add_otlp_options(probe)
    add_target_options(probe)
    return probe


def probe_main(argv: list[str]) -> int:
    """Run `vtop probe`."""
    args = probe_parser().parse_args(argv)
    settings = settings_from(args, probe_url=args.url)
    url = settings.probe_url or server_url(args.url)
    engine = server_url(args.engine) if args.engine else None
    options = dataclasses.replace(
        probe_options(settings), max_tokens=args.tokens, timeout_s=args.probe_timeout
    )
    endpoints = ENDPOINTS[args.endpoint]
    feed = open_canary_feed(settings, url, engine, endpoints, args.count, options)
    spans = SpanStore()
    with listening_for_spans("vtop probe", settings, None, spans) as bound:
        door = asyncio.run(probe_front_door(feed, rules_of(settings)))
        if bound and any(canary.first_token_s is not None for canary in door.canaries):
            wait_for_last_spans("vtop probe", "the canaries")
    if bound:
        door = with_canary_spans(door, spans.spans(), bound)
    if door.unanswered is not None and not args.json:
        raise CliError(
            f"probe: {url}: no canary got a streamed answer: {door.unanswered}", door.exit_code
        )
    print(strict_json(json_probe(door)) if args.json else fold(text_probe(door), terminal_width()))
    return door.exit_code
