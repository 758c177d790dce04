"""`vtop diagnose` and `vtop rules`: one-shot triage and rule tooling."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from vtop.core.bundle import not_a_recording
from vtop.core.diagnose import (
    EXIT_UNKNOWN,
    DiagnoseOptions,
    Diagnosis,
    diagnose_frames,
    diagnose_prometheus,
    diagnose_url,
)
from vtop.core.promql.parser import PromQLError, parse_duration
from vtop.core.rule_tests import run_rule_tests
from vtop.core.rules import PACKAGED, Rule, RuleFileError, load_rules
from vtop.core.sources.prometheus import PrometheusError
from vtop.core.sources.vllm_http import DEFAULT_URL
from vtop.core.strict_json import strict_json
from vtop.report import fleet_json_report, fleet_text_report, json_report, text_report


def add_rules_option(parser: argparse.ArgumentParser) -> None:
    """--rules DIR (repeatable): user rules added to, or overriding by id, the packaged ones."""
    parser.add_argument("--rules", action="append", type=Path, default=[], metavar="DIR")


def rules_from(args: argparse.Namespace) -> list[Rule]:
    """Packaged rules plus the user's directories."""
    return load_rules([PACKAGED, *args.rules])


def diagnose_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop diagnose`."""
    from vtop.cli import add_target_options

    parser = argparse.ArgumentParser(
        prog="vtop diagnose",
        description="sample a vLLM server for a window and print a ranked triage",
        epilog="exit codes: 0 healthy, 1 warning, 2 critical, 3 could not diagnose",
    )
    parser.add_argument("url", nargs="?", default=DEFAULT_URL, help="server URL or recording")
    parser.add_argument("--target", help="which target of a recording (default: the first)")
    parser.add_argument("--window", type=float, default=15.0, help="seconds to sample")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between scrapes")
    parser.add_argument("--vllm-args", help="the server's `vllm serve` flags, as one string")
    parser.add_argument("--vllm-log", type=Path, help="the server's startup log")
    parser.add_argument("--no-gpu", action="store_true", help="do not read NVML")
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    parser.add_argument(
        "--prometheus", metavar="URL", help="triage every vLLM server a Prometheus server scrapes"
    )
    parser.add_argument("--since", default="30m", help="--prometheus: window to look back (30m)")
    parser.add_argument("--step", default="15s", help="--prometheus: resolution (15s)")
    add_rules_option(parser)
    add_target_options(parser)
    return parser


def diagnose_main(argv: list[str]) -> int:
    """Run `vtop diagnose`."""
    from vtop.cli import scrape_options

    args = diagnose_parser().parse_args(argv)
    try:
        rules = rules_from(args)
        log_text = args.vllm_log.read_text(errors="replace") if args.vllm_log else None
    except (RuleFileError, OSError) as error:
        print(f"vtop diagnose: {error}", file=sys.stderr)
        return EXIT_UNKNOWN
    options = DiagnoseOptions(args.window, args.interval, args.vllm_args, log_text, not args.no_gpu)
    if args.prometheus:
        return diagnose_from_prometheus(args, rules, options)
    path = file_argument(args.url)
    if path is not None:
        problem = not_a_recording(path)
        if problem is not None:
            print(f"vtop diagnose: {problem}", file=sys.stderr)
            return EXIT_UNKNOWN
        diagnosis = diagnose_recording(path, args.target, rules, options)
        if diagnosis is None:
            return EXIT_UNKNOWN
    else:
        diagnosis = asyncio.run(diagnose_url(args.url, rules, options, scrape_options(args)))
    print(strict_json(json_report(diagnosis)) if args.json else text_report(diagnosis))
    return diagnosis.exit_code


RECORDING_SUFFIXES = (".vtoprec", ".tar.gz", ".tgz")


def file_argument(text: str) -> Path | None:
    """The path a URL-or-recording argument names, None when it is a URL: an existing path, or
    one that looks like a file (a recording's suffix, or starting with / ./ ../ ~)."""
    if "://" in text:
        return None
    path = Path(text).expanduser()
    looks_like_file = text.endswith(RECORDING_SUFFIXES) or text.startswith(("/", "./", "../", "~"))
    return path if path.exists() or looks_like_file else None


def diagnose_from_prometheus(
    args: argparse.Namespace, rules: list[Rule], options: DiagnoseOptions
) -> int:
    """`vtop diagnose --prometheus URL --since 30m`: the fleet's triage over a past window."""
    from vtop.cli import scrape_options

    try:
        since, step = parse_duration(args.since), parse_duration(args.step)
        fleet = asyncio.run(
            diagnose_prometheus(
                args.prometheus,
                since,
                step,
                rules,
                options,
                replace(scrape_options(args), api_key=None),
                time.time(),
            )
        )
    except (PrometheusError, PromQLError) as error:
        print(f"vtop diagnose: {error}", file=sys.stderr)
        return EXIT_UNKNOWN
    report = fleet_json_report(fleet) if args.json else None
    print(strict_json(report) if report else fleet_text_report(fleet))
    return fleet.exit_code


def diagnose_recording(
    path: Path, target: str | None, rules: list[Rule], options: DiagnoseOptions
) -> Diagnosis | None:
    """Triage a recording with the same code as live data; None when it holds no frame."""
    from vtop.dashboard_cli import read_frames

    frames = read_frames(path, "vtop diagnose")
    if frames is None:
        return None
    targets = [scrape.target for frame in frames for scrape in frame.scrapes]
    if not targets:
        print(f"vtop diagnose: {path} holds no complete frame", file=sys.stderr)
        return None
    return diagnose_frames(target or targets[0], frames, rules, options)


def export_rules(rules: list[Rule]) -> dict[str, Any]:
    """Rules that use only real vLLM metrics, as a Prometheus alerting-rules document."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for rule in rules:
        expr = rule.prometheus_expr()
        if expr is None:
            continue
        groups.setdefault(rule.phase, []).append(
            {
                "alert": "vtop_" + rule.id.replace("-", "_"),
                "expr": expr,
                "for": f"{int(rule.for_s)}s",
                "labels": {"severity": rule.severity, "phase": rule.phase},
                "annotations": {"summary": rule.title, "source": rule.source or rule.path},
            }
        )
    return {
        "groups": [{"name": f"vtop-{phase}", "rules": items} for phase, items in groups.items()]
    }


EXIT_USAGE = 2


def rule_directory_problem(directory: Path) -> str | None:
    """Why a directory given to `vtop rules` or --rules holds no rules (None when it does)."""
    if not directory.exists():
        return f"{directory}: no such directory"
    if not directory.is_dir():
        return f"{directory}: not a directory"
    if not any(directory.glob("*.yaml")):
        return f"{directory}: no rule files (*.yaml) in it"
    return None


def rules_main(argv: list[str]) -> int:
    """`vtop rules check DIR` / `test DIR` / `export [--rules DIR]` / `path`."""
    parser = argparse.ArgumentParser(
        prog="vtop rules", description="rule files: check, test, export"
    )
    sub = parser.add_subparsers(dest="action", required=True)
    check = sub.add_parser("check", help="validate rule files; errors as file:line")
    check.add_argument("directory", type=Path)
    test = sub.add_parser("test", help="run the data tests in DIR/tests")
    test.add_argument("directory", type=Path)
    export = sub.add_parser("export", help="print Prometheus alerting rules")
    add_rules_option(export)
    sub.add_parser("path", help="print where the shipped rules are")
    args = parser.parse_args(argv)
    if args.action == "path":
        print(PACKAGED)
        return 0
    directories = args.rules if args.action == "export" else [args.directory]
    for directory in directories:
        problem = rule_directory_problem(directory)
        if problem is not None:
            print(f"vtop rules {args.action}: {problem}", file=sys.stderr)
            return EXIT_USAGE
    try:
        rules = rules_from(args) if args.action == "export" else load_rules([args.directory])
    except RuleFileError as error:
        print(error, file=sys.stderr)
        return 1
    if args.action == "export":
        print(yaml.safe_dump(export_rules(rules), sort_keys=False, width=120))
        return 0
    if args.action == "check":
        print(f"{len(rules)} rules OK in {args.directory}")
        return 0
    if not (args.directory / "tests").is_dir():
        print(f"vtop rules test: {args.directory / 'tests'}: no such directory", file=sys.stderr)
        return EXIT_USAGE
    problems, _ = run_rule_tests(args.directory)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{len(rules)} rules, {len(problems)} test problems")
    return 1 if problems else 0
