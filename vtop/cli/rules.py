"""`vtop rules check DIR | test DIR | export [--rules DIR] | path`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from vtop.cli.errors import EXIT_USAGE, CliError
from vtop.cli.options import add_rules_option, parser
from vtop.core.rules.export import export_rules
from vtop.core.rules.loader import PACKAGED, RuleFileError, load_rules
from vtop.core.rules.rule_tests import run_rule_tests

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
    export = sub.add_parser("export", help="print the rules as Prometheus alerting rules")
    add_rules_option(export)
    sub.add_parser("path", help="print where the shipped rules are")
    return rules_cli


def rules_main(argv: list[str]) -> int:
    """Run `vtop rules ...`."""
    args = rules_parser().parse_args(argv)
    if args.action == "path":
        print(PACKAGED)
        return 0
    directories = (
        [Path(d) for d in args.rules or []] if args.action == "export" else [args.directory]
    )
    for directory in directories:
        problem = rule_directory_problem(directory)
        if problem is not None:
            raise CliError(f"rules {args.action}: {problem}", EXIT_USAGE)
    try:
        loaded = load_rules([PACKAGED, *directories] if args.action == "export" else directories)
    except RuleFileError as error:
        raise CliError(str(error), EXIT_RULE_ERRORS) from None
    if args.action == "export":
        print(yaml.safe_dump(export_rules(loaded), sort_keys=False, width=120))
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
