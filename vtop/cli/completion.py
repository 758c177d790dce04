"""`vtop completion bash|zsh|fish`: a completion script made from the commands' own parsers."""

from __future__ import annotations

import argparse

from vtop.cli.commands import COMMANDS
from vtop.cli.options import parser

SHELLS = ("bash", "zsh", "fish")


def completion_parser() -> argparse.ArgumentParser:
    """Arguments of `vtop completion`."""
    completion = parser(
        "vtop completion",
        "print a shell completion script",
        epilog='e.g. eval "$(vtop completion bash)" in ~/.bashrc',
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell the script is for")
    return completion


def long_flags(built: argparse.ArgumentParser) -> list[str]:
    """The long options of a parser."""
    return sorted(
        option
        for action in built._actions
        for option in action.option_strings
        if option.startswith("--")
    )


def flags_by_command() -> dict[str, list[str]]:
    """Every subcommand's long options, and the dashboard's under ''."""
    from vtop.cli.dashboard import monitor_parser

    found = {name: long_flags(command.argument_parser()) for name, command in COMMANDS.items()}
    found[""] = long_flags(monitor_parser())
    return found


def bash(flags: dict[str, list[str]]) -> str:
    """A bash completion function."""
    cases = "\n".join(
        f'        {name}) opts="{" ".join(options)}" ;;' for name, options in flags.items() if name
    )
    return f"""_vtop() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" opts
    if [ "$COMP_CWORD" -eq 1 ] && [[ "$cur" != -* ]]; then
        COMPREPLY=($(compgen -W "{" ".join(COMMANDS)}" -- "$cur")); return
    fi
    case "${{COMP_WORDS[1]}}" in
{cases}
        *) opts="{" ".join(flags[""])}" ;;
    esac
    COMPREPLY=($(compgen -W "$opts" -f -- "$cur"))
}}
complete -F _vtop vtop
"""


def zsh(flags: dict[str, list[str]]) -> str:
    """A zsh completion (bash's, through bashcompinit)."""
    return "autoload -U +X bashcompinit && bashcompinit\n" + bash(flags)


def fish(flags: dict[str, list[str]]) -> str:
    """fish completions: subcommands with their summaries, then each one's flags."""
    lines = [
        f"complete -c vtop -n __fish_use_subcommand -a {name} -d '{command.summary}'"
        for name, command in COMMANDS.items()
    ]
    for name, options in flags.items():
        condition = f"__fish_seen_subcommand_from {name}" if name else "__fish_use_subcommand"
        lines += [f"complete -c vtop -n '{condition}' -l {o[2:]}" for o in options]
    return "\n".join(lines) + "\n"


def completion_main(argv: list[str]) -> int:
    """Print the script."""
    shell = completion_parser().parse_args(argv).shell
    print({"bash": bash, "zsh": zsh, "fish": fish}[shell](flags_by_command()), end="")
    return 0
