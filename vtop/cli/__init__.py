"""Floor 11, cli: argv -> a command of the table -> its exit code. The top floor: it may import
everything, and it reads the files the core must not (the server log, the model's config.json).
Offers `main`, the console script.

Every mistake is a CliError printed once as `vtop: error: ...` with its exit code; a closed
pipe (`vtop ... | head`) ends the process by SIGPIPE, quietly, as Unix tools do (never exit 0 by
chance); an unknown word close to a command is a typo, not a host name.
"""

from __future__ import annotations

import concurrent.futures
import difflib
import os
import signal
import socket
import sys
from collections.abc import Sequence

from vtop import __version__
from vtop.cli.commands import COMMANDS
from vtop.cli.errors import EXIT_USAGE, CliError

CLOSE_ENOUGH = 0.75


def usage() -> str:
    """`vtop --help`: what vtop is, the dashboard's use, and every command in one line."""
    from vtop.cli.dashboard import monitor_parser

    width = max(map(len, COMMANDS))
    commands = "\n".join(f"  {name:<{width}}  {c.summary}" for name, c in COMMANDS.items())
    return (
        f"{monitor_parser().format_help()}\ncommands (vtop COMMAND --help for each):\n{commands}\n"
    )


def typo_of(word: str) -> str | None:
    """The command a first word misspells, None when it can be a host (has : . / or no
    command is close)."""
    if word.startswith("-") or any(mark in word for mark in ":./"):
        return None
    close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=CLOSE_ENOUGH)
    return close[0] if close else None


def dispatch(args: list[str]) -> int:
    """Run the command the arguments name (the dashboard when the first is not a command)."""
    if args and args[0] in COMMANDS:
        return COMMANDS[args[0]].run(args[1:])
    if args and args[0] == "help" and len(args) > 1:
        if args[1] not in COMMANDS:
            meant = typo_of(args[1])
            close = f": did you mean {meant!r}?" if meant else ""
            raise CliError(f"help: no command {args[1]!r}{close} (`vtop --help` lists them)")
        return dispatch([args[1], "--help"])
    if args and args[0] in ("-h", "--help", "help"):
        print(usage(), end="")
        return 0
    if args and args[0] in ("-V", "--version"):
        print(f"vtop {__version__}")
        return 0
    if args and (meant := typo_of(args[0])) is not None:
        raise CliError(
            f"unknown command {args[0]!r}: did you mean {meant!r}? "
            "(a server needs a host:port or a URL; `vtop --help` lists the commands)"
        )
    if args and is_bare_word(args[0]) and not resolves(args[0]):
        raise CliError(
            f"{args[0]!r} is not a command, and no host of that name resolves (a server is "
            "HOST, HOST:PORT or http://HOST:PORT; `vtop --help` lists the commands)"
        )
    from vtop.cli.dashboard import monitor_main

    return monitor_main(args)


RESOLVE_DEADLINE_S = 2.0


def is_bare_word(word: str) -> bool:
    """A first word with no port, dot, slash or scheme: a command or a bare host name."""
    return not word.startswith("-") and not any(mark in word for mark in ":./")


def resolves(host: str) -> bool:
    """True when the name resolves within RESOLVE_DEADLINE_S (a bare host is then a server on
    vLLM's port; one that does not is a mistyped command far from any, not a host to wait on)."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    lookup = pool.submit(socket.getaddrinfo, host, None)
    pool.shutdown(wait=False)
    try:
        return bool(lookup.result(timeout=RESOLVE_DEADLINE_S))
    except (OSError, UnicodeError, concurrent.futures.TimeoutError):
        return False


def end_by_sigpipe() -> int:
    """Output into a closed pipe: die by SIGPIPE, as `cat` and `grep` do, so that a script
    (`set -o pipefail`) sees 141 and never a success the command did not earn. Python ignores
    SIGPIPE; the default action is restored for this one signal."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    return 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `vtop` console script."""
    try:
        return dispatch(list(sys.argv[1:] if argv is None else argv))
    except CliError as error:
        print(f"vtop: error: {error.message}", file=sys.stderr)
        return error.code
    except BrokenPipeError:
        return end_by_sigpipe()
    except KeyboardInterrupt:
        return 130


__all__ = ["EXIT_USAGE", "main"]
