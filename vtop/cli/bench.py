"""`vtop bench URL`: drive load at a vLLM server and print client-side latencies."""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from vtop.cli.options import add_otlp_options, settings_from
from vtop.cli.options import parser as options_parser
from vtop.cli.spans import listening_for_spans, wait_for_last_spans
from vtop.core.config.settings import API_KEY_ENV, DEFAULT_URL, server_url
from vtop.core.frame import RequestSpan
from vtop.core.ingest.sources.otlp_receiver import SpanStore
from vtop.core.ingest.sources.vllm_http import ScrapeOptions
from vtop.core.manage.bench import Bench, BenchConfig, Lengths
from vtop.core.manage.bench_report import BenchReport, Percentiles
from vtop.core.ops.front_door import EngineView, beside_engine, held_back
from vtop.core.redact import remembered
from vtop.core.session.request_view import time_split
from vtop.core.status import ExitCode
from vtop.core.strict_json import strict_json
from vtop.text.requests import TURN_ON, split_json


def bench_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop bench`."""
    parser = options_parser("vtop bench", "load generator for vLLM (client-side latencies)")
    parser.add_argument("url", nargs="?", default=DEFAULT_URL, help="the server")
    parser.add_argument("--model", help="model name (default: first of /v1/models)")
    parser.add_argument(
        "--endpoint", choices=["completions", "chat"], default="completions", help="API route"
    )
    stream = parser.add_mutually_exclusive_group()
    stream.add_argument(
        "--stream", dest="stream", action="store_true", default=True, help="stream the outputs"
    )
    stream.add_argument("--no-stream", dest="stream", action="store_false", help="whole answers")
    load = parser.add_mutually_exclusive_group()
    load.add_argument("-c", "--concurrency", type=int, default=8, help="closed-loop clients")
    load.add_argument("-r", "--request-rate", type=float, help="open loop: Poisson requests/s")
    parser.add_argument("-n", "--num-requests", type=int, help="total requests (default 100)")
    parser.add_argument("-d", "--duration", type=float, help="stop issuing after N seconds")
    add_shape_options(parser)
    parser.add_argument("--timeout", type=float, default=300.0, help="per-request timeout, s")
    parser.add_argument("--stall-timeout", type=float, default=60.0, help="max stream silence, s")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the prompts")
    parser.add_argument("--api-key", default=None, help=f"bearer token (default: ${API_KEY_ENV})")
    parser.add_argument(
        "--engine",
        metavar="URL",
        help="vLLM's own URL, to compare what the clients saw with what the engine reports "
        "(default: /metrics at the URL loaded, when it serves vLLM's)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_otlp_options(parser)
    return parser


def add_shape_options(parser: argparse.ArgumentParser) -> None:
    """Prompt and output shape options."""
    lengths = "N or LOW:HIGH (uniform)"
    default = Lengths(128, 128)
    parser.add_argument("--prompt-tokens", type=Lengths.parse, default=default, help=lengths)
    parser.add_argument("--output-tokens", type=Lengths.parse, default=default, help=lengths)
    parser.add_argument("--shared-prefix", type=int, default=0, help="tokens every prompt shares")
    parser.add_argument(
        "--no-ignore-eos",
        dest="ignore_eos",
        action="store_false",
        default=True,
        help="stop at the end-of-sequence token (by default every output has its length)",
    )
    parser.add_argument(
        "--token-id-max", type=int, default=500, help="prompt token ids stay below (< vocab)"
    )


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """A BenchConfig from parsed arguments."""
    num_requests = args.num_requests
    if num_requests is None and args.duration is None:
        num_requests = 100
    return BenchConfig(
        url=args.url,
        model=args.model,
        endpoint=args.endpoint,
        stream=args.stream,
        concurrency=args.concurrency,
        request_rate=args.request_rate,
        num_requests=num_requests,
        duration_s=args.duration,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        shared_prefix_tokens=args.shared_prefix,
        ignore_eos=args.ignore_eos,
        request_timeout_s=args.timeout,
        stall_timeout_s=args.stall_timeout,
        token_id_max=args.token_id_max,
        seed=args.seed,
        api_key=remembered(args.api_key or os.environ.get(API_KEY_ENV) or None),
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def report_table(report: BenchReport) -> Table:
    """The latency table of a report."""
    table = Table(title="latency (ms)", title_justify="left")
    for column in ("metric", "p50", "p95", "p99", "mean"):
        table.add_column(column, justify="right" if column != "metric" else "left")
    rows: list[tuple[str, Percentiles]] = [
        ("TTFT", report.ttft),
        ("TPOT", report.tpot),
        ("ITL", report.itl),
        ("e2e", report.e2e),
    ]
    for name, p in rows:
        table.add_row(name, _ms(p.p50), _ms(p.p95), _ms(p.p99), _ms(p.mean))
    return table


def print_report(console: Console, report: BenchReport) -> None:
    """Human-readable report."""
    console.print(
        f"completed {report.completed}  failed {report.failed} "
        f"(timeouts {report.timeouts}, stalled streams {report.stalls})  "
        f"in {report.duration_s:.1f} s"
    )
    console.print(
        f"QPS {report.qps:.2f}  output tok/s {report.output_tokens_per_s:.1f}  "
        f"output tokens {report.total_output_tokens}"
    )
    console.print(report_table(report))
    for error, count in sorted(report.errors.items()):
        console.print(f"error: {error} x{count}")


async def _run(bench: Bench, show_progress: bool) -> BenchReport:
    """Run with a progress bar on stderr when asked."""
    if not show_progress:
        return await bench.run()
    columns = (BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("requests", total=bench.config.num_requests)
        bench.progress = lambda done, total: progress.update(task, completed=done)
        return await bench.run()


def bench_main(argv: list[str]) -> int:
    """Run `vtop bench`; exit 1 when any request failed, 3 when it could not start."""
    args = bench_parser().parse_args(argv)
    config = config_from_args(args)
    engine_url = server_url(args.engine) if args.engine else config.url
    scraping = ScrapeOptions(timeout_s=10.0, api_key=config.api_key)
    bench = Bench(config)
    received = SpanStore()
    with listening_for_spans("vtop bench", settings_from(args), None, received) as bound:
        try:
            run = _run(bench, sys.stderr.isatty() and not args.json)
            report, engine = asyncio.run(beside_engine(run, engine_url, scraping))
        except Exception as error:
            print(f"vtop: error: bench: cannot run against {config.url}: {error}", file=sys.stderr)
            return ExitCode.UNKNOWN
        if bound and report.completed:
            wait_for_last_spans("vtop bench", "the run's last requests")
    mine = [s for s in received.spans() if bench.run_id in s.request_id]
    if args.json:
        spans = spans_json(report, mine, bound) if bound else None
        print(
            strict_json({**report.as_dict(), "engine": engine_json(report, engine), "spans": spans})
        )
    else:
        print_report(Console(), report)
        print(
            "\n".join(
                engine_lines(report, engine) + (span_lines(report, mine, bound) if bound else [])
            )
        )
    return 1 if report.failed else 0


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def spans_json(report: BenchReport, spans: list[RequestSpan], bound: list[str]) -> dict[str, Any]:
    """vLLM's spans of the run's requests: where their time went, and the engine's TTFT beside
    the clients'."""
    engine = _median([s.ttft_s for s in spans if s.ttft_s is not None])
    client = report.ttft.p50
    return {
        "listening": bound,
        "received": len(spans),
        "time_split": [split_json(split) for split in time_split(spans)],
        "engine_ttft_p50_s": engine,
        "client_ttft_p50_s": client,
        "path_ttft_p50_s": None if engine is None or client is None else max(0.0, client - engine),
    }


def span_lines(report: BenchReport, spans: list[RequestSpan], bound: list[str]) -> list[str]:
    """The same run from vLLM's spans of its requests (found by their X-Request-Id)."""
    if not spans:
        return [f"spans: none of the run's requests arrived on {', '.join(bound)}: {TURN_ON}"]
    figures = spans_json(report, spans, bound)
    lines = [f"vLLM's spans of {len(spans)} of the run's requests (on {', '.join(bound)}):"]
    for split in time_split(spans):
        lines.append(
            f"  {split.band}: queue {split.queue:.0%}, prefill {split.prefill:.0%}, "
            f"decode {split.decode:.0%} of their end-to-end time"
        )
    engine, path = figures["engine_ttft_p50_s"], figures["path_ttft_p50_s"]
    if engine is not None and path is not None:
        lines.append(
            f"  TTFT p50: engine {_ms(engine)} ms, clients {_ms(report.ttft.p50)} ms: "
            f"{_ms(path)} ms outside the engine (the API server and the path)"
        )
    return lines


def engine_json(report: BenchReport, engine: EngineView) -> dict[str, object]:
    """The engine's view of the run, and whether the path held the streams back."""
    return {
        "target": engine.target,
        "ttft_mean_s": engine.ttft_mean_s,
        "itl_mean_s": engine.itl_mean_s,
        "rejected": engine.rejected,
        "held_back": held_back(report.ttft.p50, report.tpot.p50, engine),
    }


def engine_lines(report: BenchReport, engine: EngineView) -> list[str]:
    """What the clients saw beside what vLLM reports for the same run."""
    if engine.target is None:
        return ["engine: no vLLM metrics at the URL loaded (give vLLM's own with --engine URL)"]
    lines = [
        f"engine ({engine.target}, vLLM's own metrics over the run): mean TTFT "
        f"{_ms(engine.ttft_mean_s)} ms, mean ITL {_ms(engine.itl_mean_s)} ms; clients: TTFT "
        f"p50 {_ms(report.ttft.p50)} ms, TPOT p50 {_ms(report.tpot.p50)} ms"
    ]
    if held_back(report.ttft.p50, report.tpot.p50, engine):
        lines.append(
            "the path holds the streams back: the clients' first tokens come far later than the "
            "engine's and the rest arrive in a lump (`vtop probe URL` shows where and the fix)"
        )
    if engine.rejected:
        lines.append(f"{engine.rejected:.0f} requests were rejected at admission (HTTP 503)")
    return lines
