"""`vtop rules check DIR | test DIR | export [--rules DIR] [--setting N=V] | path`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from vtop.cli.errors import EXIT_USAGE, CliError
from vtop.cli.options import add_rules_option, parser, settings_from
from vtop.core.ops.export_unittest import RULES_FILE, TESTS_FILE, export_tests
from vtop.core.ops.rule_unittest import run_rule_tests
from vtop.core.rules.export import ExportOptions, export_rules
from vtop.core.rules.loader import PACKAGED, load_rules
from vtop.core.rules.rule import PHASES, Rule, RuleFileError
from vtop.text.metrics_reference import metrics_reference
from vtop.text.rules_reference import rules_reference

EXIT_RULE_ERRORS = 1


def rule_directory_problem(directory: Path) -> str | None:
    """Why a directory holds no rules (None when it does)."""
    if not directory.exists():
        return f"{directory}: no such directory"
    if not directory.is_dir():
        return f"{directory}: not a directory"
    if not any(directory.glob("*.yaml")):
        return f"{directory}: no rule files (*.yaml) in it"
    return None


def rules_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop rules`."""
    rules_cli = parser("vtop rules", "rule files: validate, run their data tests, export, locate")
    sub = rules_cli.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = sub.add_parser("check", help="validate rule files; errors as file:line")
    check.add_argument("directory", type=Path, help="a directory of rule files (*.yaml)")
    test = sub.add_parser("test", help="run the data tests in DIR/tests")
    test.add_argument("directory", type=Path, help="a directory of rule files with tests/")
    export = sub.add_parser(
        "export", help="print the rules as Prometheus recording and alerting rules"
    )
    add_rules_option(export)
    export.add_argument(
        "--scrape-interval",
        type=_seconds,
        default=15.0,
        metavar="S",
        help="Prometheus's scrape interval: windows widen to 4 of them (default: 15)",
    )
    export.add_argument(
        "--evaluation-interval",
        type=_seconds,
        default=15.0,
        metavar="S",
        help="the rule group's evaluation interval (default: 15)",
    )
    export.add_argument(
        "--tests",
        type=Path,
        metavar="DIR",
        help=f"write the export for 1 s scrapes and the rule tests as promtool tests into DIR "
        f"({RULES_FILE}, {TESTS_FILE}), for `promtool test rules` (default: print the rules)",
    )
    export.add_argument(
        "--setting",
        action="append",
        type=_setting,
        default=[],
        metavar="NAME=VALUE",
        help="a vtop: setting every server shares (e.g. max_num_seqs=256), so the rules that "
        "need it export too; repeatable (default: none)",
    )
    export.add_argument(
        "--runbook-base",
        metavar="URL",
        help="where you publish vtop's rules reference (docs/rules.md): each alert's "
        "runbook_url is its rule's anchor there (or runbook_base in the config file; "
        "default: no runbook_url)",
    )
    listing = sub.add_parser("list", help="every rule: id, phase, severity, title")
    add_rules_option(listing)
    doc = sub.add_parser(
        "doc", help="print the rules reference (Markdown, an anchor per rule id: docs/rules.md)"
    )
    add_rules_option(doc)
    metrics = sub.add_parser(
        "metrics",
        help="print vLLM's metric families as vtop reads them: type, unit, labels, since, "
        "renames, the rules that read each (Markdown: docs/metrics.md)",
    )
    add_rules_option(metrics)
    sub.add_parser("path", help="print where the shipped rules are")
    return rules_cli


def _seconds(text: str) -> float:
    """A positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 86400:
        raise argparse.ArgumentTypeError(f"out of range (0 to 86400 s): {text!r}")
    return value


def _setting(text: str) -> tuple[str, float]:
    """NAME=VALUE for --setting."""
    name, equals, value = text.partition("=")
    name = name.strip().removeprefix("vtop:")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not equals or not name.isidentifier() or number != number:
        raise argparse.ArgumentTypeError(f"expected NAME=NUMBER, got {text!r}")
    return name, number


def _export_tests(rules: list[Rule], directories: list[Path], out: Path) -> int:
    """Write the export and its promtool tests; report what Prometheus does differently."""
    if out.exists() and not out.is_dir():
        raise CliError(f"rules export --tests: {out}: not a directory", EXIT_USAGE)
    tests = [d / "tests" for d in directories if (d / "tests").is_dir()]
    exported = export_tests(rules, tests)
    try:
        out.mkdir(parents=True, exist_ok=True, mode=0o755)
        (out / RULES_FILE).write_text(yaml.safe_dump(exported.rules, sort_keys=False, width=120))
        (out / TESTS_FILE).write_text(yaml.safe_dump(exported.tests, sort_keys=False, width=120))
    except OSError as error:
        raise CliError(f"rules export --tests: {out}: {error.strerror or error}", 1) from None
    for note in exported.stricter:
        print(
            f"note: Prometheus does not fire here (stricter export or young series): {note}",
            file=sys.stderr,
        )
    for problem in exported.errors:
        print(f"error: {problem}", file=sys.stderr)
    cases = len(exported.tests["tests"])
    print(f"{exported.checked} expectations in {cases} cases: {out / TESTS_FILE}")
    print(f"run: promtool test rules {out / TESTS_FILE}")
    return EXIT_RULE_ERRORS if exported.errors else 0


def rule_table(rules: list[Rule]) -> list[str]:
    """One line per rule in triage order: id, phase, severity, title."""
    ordered = sorted(rules, key=lambda rule: (PHASES.index(rule.phase), rule.id))
    width = max((len(rule.id) for rule in ordered), default=2)
    head = f"{'id':<{width}}  {'phase':<9}  {'severity':<8}  title"
    rows = [f"{r.id:<{width}}  {r.phase:<9}  {r.severity:<8}  {r.title}" for r in ordered]
    return [head, *rows]


def rules_main(argv: list[str]) -> int:
    """Run `vtop rules ...`."""
    args = rules_parser().parse_args(argv)
    if args.action == "path":
        print(PACKAGED)
        return 0
    with_shipped = args.action in ("export", "list", "doc", "metrics")
    directories = [Path(d) for d in args.rules or []] if with_shipped else [args.directory]
    for directory in directories:
        problem = rule_directory_problem(directory)
        if problem is not None:
            raise CliError(f"rules {args.action}: {problem}", EXIT_USAGE)
    try:
        loaded = load_rules([PACKAGED, *directories] if with_shipped else directories)
    except RuleFileError as error:
        raise CliError(str(error), EXIT_RULE_ERRORS) from None
    if args.action == "export" and args.tests is not None:
        return _export_tests(loaded, [PACKAGED, *directories], args.tests)
    if args.action == "list":
        print("\n".join(rule_table(loaded)))
        return 0
    if args.action == "doc":
        print(rules_reference(loaded), end="")
        return 0
    if args.action == "metrics":
        print(metrics_reference(loaded), end="")
        return 0
    if args.action == "export":
        base = args.runbook_base or settings_from(argparse.Namespace()).runbook_base
        options = ExportOptions(
            args.scrape_interval, args.evaluation_interval, dict(args.setting), base
        )
        print(yaml.safe_dump(export_rules(loaded, options), sort_keys=False, width=120))
        return 0
    if args.action == "check":
        print(f"{len(loaded)} rules OK in {args.directory}")
        return 0
    if not (args.directory / "tests").is_dir():
        raise CliError(f"rules test: {args.directory / 'tests'}: no such directory", EXIT_USAGE)
    problems, _ = run_rule_tests(args.directory)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{len(loaded)} rules, {len(problems)} test problems")
    return EXIT_RULE_ERRORS if problems else 0
