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
    """The long options of a parser, and of its subcommands with their names (`vtop rules`
    completes `export` and `--setting`)."""
    words: set[str] = set()
    for action in built._actions:
        words.update(option for option in action.option_strings if option.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words.add(name)
                words.update(long_flags(sub))
    return sorted(words)


def flags_by_command() -> dict[str, list[str]]:
    """Every subcommand's long options, and the dashboard's under ''."""
    from vtop.cli.dashboard import monitor_parser

    found = {name: long_flags(command.argument_parser()) for name, command in COMMANDS.items()}
    found[""] = long_flags(monitor_parser())
    return found


def first_words() -> list[str]:
    """What a first word can be besides a server: every command, and `help`."""
    return [*COMMANDS, "help"]


def bash(flags: dict[str, list[str]]) -> str:
    """A bash completion function."""
    cases = "\n".join(
        f'        {name}) opts="{" ".join(options)}" ;;' for name, options in flags.items() if name
    )
    return f"""_vtop() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" opts
    if [ "$COMP_CWORD" -eq 1 ] && [[ "$cur" != -* ]]; then
        COMPREPLY=($(compgen -W "{" ".join(first_words())}" -- "$cur")); return
    fi
    if [ "$COMP_CWORD" -eq 2 ] && [ "${{COMP_WORDS[1]}}" = help ]; then
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
    lines.append("complete -c vtop -n __fish_use_subcommand -a help -d 'the flags of a command'")
    lines.append(
        f"complete -c vtop -n '__fish_seen_subcommand_from help' -a '{' '.join(COMMANDS)}'"
    )
    for name, options in flags.items():
        condition = f"__fish_seen_subcommand_from {name}" if name else "__fish_use_subcommand"
        lines += [
            f"complete -c vtop -n '{condition}' -l {o[2:]}"
            if o.startswith("--")
            else f"complete -c vtop -n '{condition}' -a {o}"
            for o in options
        ]
    return "\n".join(lines) + "\n"


def completion_main(argv: list[str]) -> int:
    """Print the script."""
    shell = completion_parser().parse_args(argv).shell
    print({"bash": bash, "zsh": zsh, "fish": fish}[shell](flags_by_command()), end="")
    return 0
