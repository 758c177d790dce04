"""`vtop stacks [URL | PID]`: where the engine is, from its processes' Python stacks (py-spy);
exit 0 working or idle, 2 stuck, 3 not readable from here."""

from __future__ import annotations

import argparse

from vtop.cli.options import parser
from vtop.core.config.settings import DEFAULT_URL
from vtop.core.forensics.look import look_at
from vtop.core.forensics.processes import NotVisible
from vtop.core.status import ExitCode
from vtop.core.strict_json import strict_json
from vtop.text.fold import fold, terminal_width
from vtop.text.stacks import whereabouts_json, whereabouts_lines


def stacks_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop stacks`."""
    stacks = parser(
        "vtop stacks",
        "sample the Python stacks of a vLLM server's processes on this host (py-spy, read-only) "
        "and say where the engine is: spinning, blocked, stopped, computing or idle",
        epilog="exit codes: 0 working or idle, 2 stuck (spinning outside vLLM, blocked, "
        "stopped, gone), 3 processes not readable from here, 64 usage",
    )
    stacks.add_argument(
        "target",
        nargs="?",
        default=DEFAULT_URL,
        help=f"server URL or API server pid ({DEFAULT_URL})",
    )
    stacks.add_argument("--json", action="store_true", help="print JSON")
    return stacks


def stacks_main(argv: list[str]) -> int:
    """Run `vtop stacks`."""
    args = stacks_parser().parse_args(argv)
    found = look_at(args.target)
    if args.json:
        print(strict_json({"target": args.target, "stacks": whereabouts_json(found)}))
    else:
        print(fold("\n".join(whereabouts_lines(found)), terminal_width()))
    if isinstance(found, NotVisible):
        return ExitCode.UNKNOWN
    return ExitCode.CRITICAL if found.stuck else ExitCode.OK
