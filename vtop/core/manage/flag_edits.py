"""A proposed change as `vllm serve` argv: the flag set (replacing any earlier value), and the
difference between two argvs as - / + lines."""

from __future__ import annotations

from collections.abc import Sequence

from vtop.core.rules.engine import ProposedChange

BOOLEAN_PAIRS = {"--enable-prefix-caching": "--no-enable-prefix-caching"}


def change_argument(change: ProposedChange) -> list[str] | None:
    """The flag change as argv items, None when its value could not be computed."""
    literal = change.as_flag()
    return None if literal is None else literal.split()


def apply_change(argv: Sequence[str], change: ProposedChange) -> list[str]:
    """argv with the flag set to the proposed value (replacing any earlier value)."""
    arguments = change_argument(change)
    if arguments is None:
        raise ValueError(f"{change.flag}: no value to apply ({', '.join(change.unknown)} unknown)")
    flag = arguments[0]
    drop = {flag, BOOLEAN_PAIRS.get(flag, ""), _negated(flag)}
    result: list[str] = []
    skip_value = False
    for arg in argv:
        if skip_value:
            skip_value = False
            continue
        name = arg.split("=", 1)[0]
        if name in drop:
            skip_value = "=" not in arg and len(arguments) > 1
            continue
        result.append(arg)
    return result + arguments


def _negated(flag: str) -> str:
    """--enable-x <-> --no-enable-x."""
    return "--" + flag[5:] if flag.startswith("--no-") else "--no-" + flag[2:]


def argv_diff(before: Sequence[str], after: Sequence[str]) -> list[str]:
    """Flags removed (-) and added (+), in order."""
    removed = [arg for arg in _flag_items(before) if arg not in _flag_items(after)]
    added = [arg for arg in _flag_items(after) if arg not in _flag_items(before)]
    return [f"- {arg}" for arg in removed] + [f"+ {arg}" for arg in added]


def _flag_items(argv: Sequence[str]) -> list[str]:
    """'--flag value' pairs and lone flags of an argv."""
    items: list[str] = []
    for arg in argv:
        if arg.startswith("-") or not items or not items[-1].startswith("-") or " " in items[-1]:
            items.append(arg)
        else:
            items[-1] += " " + arg
    return items
