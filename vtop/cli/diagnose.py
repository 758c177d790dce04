"""`vtop diagnose [URL | RECORDING]`: a feed for a window -> session -> report; exit by severity."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from vtop.cli.errors import CliError
from vtop.cli.frames import between, file_argument, read_frames
from vtop.cli.judging import add_judge_option, resolved
from vtop.cli.options import (
    add_otlp_options,
    add_probe_options,
    add_rules_option,
    add_target_options,
    diagnose_options_of,
    parser,
    rules_of,
    settings_from,
    step_profiles_of,
    warn_unkept,
)
from vtop.cli.spans import listening_for_spans, wait_for_last_spans
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.config.settings import DEFAULT_URL, Settings
from vtop.core.frame import Frame
from vtop.core.ingest.open_feed import first_server, open_feed, scrape_options
from vtop.core.ingest.sources.otlp_receiver import SpanStore
from vtop.core.ingest.sources.prometheus import PrometheusError, past_window
from vtop.core.ingest.sources.prometheus_judged import judged_past_window
from vtop.core.ingest.sources.vllm_http import ScrapeOptions
from vtop.core.ingest.window import window_frames
from vtop.core.ops.drill_down import evidence_of
from vtop.core.ops.process_evidence import with_process_evidence
from vtop.core.ops.rank import primary_predictions
from vtop.core.rules.judge import FleetJudge
from vtop.core.rules.promql.parser import PromQLError, parse_duration
from vtop.core.rules.rule import Rule
from vtop.core.session.diagnose import (
    EXIT_UNKNOWN,
    EarlyVerdict,
    FleetDiagnosis,
    diagnose_fleet,
    judged_diagnosis,
    needed_window,
    needing_evidence,
    with_evidence,
)
from vtop.core.session.request_findings import request_evidence
from vtop.core.session.request_view import spans_of_server
from vtop.core.session.window_session import one_shot_hold_s
from vtop.core.strict_json import strict_json
from vtop.text.fold import fold, terminal_width
from vtop.text.report import fleet_json_report, fleet_text_report, json_report, text_report
from vtop.text.whatif import json_predictions, text_predictions


def diagnose_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop diagnose`."""
    diagnose = parser(
        "vtop diagnose",
        "sample a vLLM server (or read a recording) for a window and print a ranked triage",
        epilog="exit codes: 0 healthy, 1 warning (or bad data), 2 critical, 3 could not "
        "diagnose, 4 incomplete (a problem seen but not yet judged), 64 usage",
    )
    diagnose.add_argument(
        "url", nargs="?", help=f"server URL, recording or bundle (default {DEFAULT_URL})"
    )
    diagnose.add_argument("--target", help="which target of a recording (default: the first)")
    diagnose.add_argument("--window", type=float, help="seconds to sample (15)")
    diagnose.add_argument("--interval", type=float, help="seconds between scrapes (1)")
    diagnose.add_argument("--from", dest="start", type=float, help="recording: from N s in")
    diagnose.add_argument("--to", dest="end", type=float, help="recording: up to N s in")
    diagnose.add_argument("--vllm-args", help="the server's `vllm serve` flags, as one string")
    diagnose.add_argument(
        "--vllm-log", type=Path, help="the server's log (its settings; why it died, if it did)"
    )
    diagnose.add_argument("--json", action="store_true", help="print the JSON report")
    diagnose.add_argument(
        "--no-predict",
        action="store_true",
        help="skip the scheduler model's predictions for the primary finding's changes",
    )
    diagnose.add_argument(
        "--prometheus", metavar="URL", help="triage every vLLM server a Prometheus server scrapes"
    )
    diagnose.add_argument("--since", default="30m", help="--prometheus: how far to look back")
    diagnose.add_argument("--step", default="15s", help="--prometheus: resolution")
    add_judge_option(diagnose)
    add_rules_option(diagnose)
    add_probe_options(diagnose)
    add_otlp_options(diagnose)
    add_target_options(diagnose)
    return diagnose


def window_of(
    args: argparse.Namespace,
    path: Path | None,
    settings: Settings,
    options: DiagnoseOptions,
    rules: list[Rule] | None = None,
    command: str | None = None,
) -> tuple[list[Frame], DiagnoseOptions]:
    """The frames to judge: a recording's (between --from and --to), or the first server's
    for the window; and the options with the window sampled. Given the rules and no
    --window, a live window is lengthened to what the rules whose inputs the server shows
    need (said on stderr at the start). Given the `command` (vtop whatif), a live window
    says its progress on stderr, and a server that never answered as a vLLM is refused."""
    if path is not None:
        return between(read_frames(path), args.start, args.end), options
    if args.start is not None or args.end is not None:
        raise CliError("--from/--to pick a window of a recording, not of a live server")
    feed = open_feed(first_server(settings), gpus=options.read_gpus)
    sampled = options.window_s

    def lengthen(frame: Frame) -> float:
        nonlocal sampled
        assert rules is not None
        sampled, longer = needed_window(frame, rules, options)
        if longer:
            named = ", ".join(f"{r.id} ({r.for_s:g} s)" for r in longer)
            print(
                f"vtop diagnose: up to {sampled:g} s, not {options.window_s:g}: this server "
                f"shows what {named} judge(s), which need that long "
                f"(--window {options.window_s:g} keeps it short)",
                file=sys.stderr,
                flush=True,
            )
        return sampled

    chosen = lengthen if rules is not None and args.window is None else None
    early = None
    if rules is not None and args.window is None:
        early = EarlyVerdict(rules, options)
    told = Progress(command) if command is not None else None
    if told is not None and options.window_s > PROGRESS_EVERY_S / 2:
        url = settings.urls[0] if settings.urls else "the server"
        print(f"{command}: sampling {url} for {options.window_s:g} s", file=sys.stderr)
    frames = asyncio.run(window_frames(feed, options.window_s, chosen, early, told))
    if command is not None:
        refuse_unanswered(command, frames)
    return frames, dataclasses.replace(options, window_s=sampled)


PROGRESS_EVERY_S = 10.0


@dataclass
class Progress:
    """`vtop whatif: 10 s of 30 sampled` on stderr every PROGRESS_EVERY_S of a live window, so a
    command that samples for half a minute never sits silent."""

    command: str
    _said: float = 0.0

    def __call__(self, sampled: float, window: float) -> None:
        if sampled - self._said >= PROGRESS_EVERY_S and sampled < window:
            self._said = sampled
            print(f"{self.command}: {sampled:.0f} s of {window:.0f} sampled", file=sys.stderr)


def refuse_unanswered(command: str, frames: list[Frame]) -> None:
    """A live window in which the server never answered as a vLLM: one line, exit 3."""
    scrapes = [scrape for frame in frames for scrape in frame.scrapes]
    if scrapes and not any(scrape.ok for scrape in scrapes):
        last = scrapes[-1]
        raise CliError(f"{command}: {last.target}: {last.status.value}: {last.error}", EXIT_UNKNOWN)


def diagnose_main(argv: list[str]) -> int:
    """Run `vtop diagnose`."""
    args = diagnose_parser().parse_args(argv)
    path = file_argument(args.url) if args.url else None
    urls = (args.url,) if args.url and path is None else None
    settings = settings_from(args, urls=urls)
    rules = rules_of(settings)
    options = diagnose_options_of(settings, read_gpus=not args.no_gpu)
    if args.prometheus:
        return from_prometheus(args, settings, rules, options)
    spans = SpanStore()
    with listening_for_spans("vtop diagnose", settings, path, spans) as bound:
        frames, options = window_of(args, path, settings, options, rules)
        if bound and any(scrape.ok for frame in frames for scrape in frame.scrapes):
            wait_for_last_spans("vtop diagnose", "the window's last requests")
    targets = [scrape.target for frame in frames for scrape in frame.scrapes]
    target = args.target or (targets[0] if targets else "unknown")
    diagnosis, session = judged_diagnosis(target, frames, rules, options)
    if path is None:
        url = settings.urls[0] if settings.urls else DEFAULT_URL
        diagnosis = with_process_evidence(diagnosis, url, options.vllm_log)
    recorded = [span for frame in frames for span in frame.spans]
    if frames and (bound or recorded):
        window = (frames[0].timestamp, frames[-1].timestamp)
        found = (
            request_evidence(
                spans_of_server(spans.spans(), target),
                window,
                bound,
                diagnosis.config,
                spans.dropped,
                spans.refused,
            )
            if bound
            else request_evidence(recorded, window, ["the recording"], diagnosis.config)
        )
        diagnosis = dataclasses.replace(diagnosis, requests=found)
    predictions = None
    if not args.no_predict:
        profiles = step_profiles_of()
        predictions = primary_predictions(session, diagnosis, profiles)
        warn_unkept(profiles)
    if args.json:
        report = json_report(diagnosis)
        report["predictions"] = None if predictions is None else json_predictions(predictions)
        print(strict_json(report))
    else:
        text = text_report(diagnosis)
        text = text if predictions is None else f"{text}\n\n{text_predictions(predictions)}"
        print(fold(text, terminal_width()))
    return diagnosis.exit_code


def from_prometheus(
    args: argparse.Namespace, settings: Settings, rules: list[Rule], options: DiagnoseOptions
) -> int:
    """`vtop diagnose --prometheus URL --since 30m`: the fleet's triage over a past window,
    judged by vtop on the raw series or by Prometheus (then the worst servers' raw series
    are pulled for their evidence)."""
    settings = resolved(dataclasses.replace(settings, prometheus=args.prometheus))
    try:
        since, step = parse_duration(args.since), parse_duration(args.step)
        scraping = scrape_options(settings)
        now = time.time()
        if settings.findings_from_prometheus:
            fleet = judged_in_prometheus(
                args.prometheus, since, step, scraping, now, rules, options
            )
        else:
            frames = asyncio.run(past_window(args.prometheus, since, step, scraping, now))
            fleet = diagnose_fleet(frames, rules, options)
    except (PrometheusError, PromQLError) as error:
        raise CliError(str(error), EXIT_UNKNOWN) from None
    report = fleet_json_report(fleet) if args.json else None
    print(strict_json(report) if report else fold(fleet_text_report(fleet), terminal_width()))
    return fleet.exit_code


def judged_in_prometheus(
    url: str,
    since: float,
    step: float,
    scraping: ScrapeOptions,
    now: float,
    rules: list[Rule],
    options: DiagnoseOptions,
) -> FleetDiagnosis:
    """The fleet judged by Prometheus over the window, the worst servers judged again here on
    their raw series (the evidence and the flag changes)."""
    judge = FleetJudge(rules, step)
    judge.hold_cap_s = one_shot_hold_s(since)
    frames = asyncio.run(judged_past_window(url, since, step, scraping, now, judge))
    fleet = diagnose_fleet(frames, rules, options, alerts=True)
    worst = needing_evidence(fleet)
    if not worst:
        return fleet
    detailed = asyncio.run(evidence_of(url, worst, (since, step, now), scraping, rules, options))
    return with_evidence(fleet, detailed)
