"""A proposed change as `vllm serve` argv: the flag set (replacing any earlier value), and the
difference between two argvs as - / + lines."""

from __future__ import annotations

import json
from collections.abc import Sequence

from vtop.core.rules.engine import ProposedChange

BOOLEAN_PAIRS = {"--enable-prefix-caching": "--no-enable-prefix-caching"}


def apply_change(argv: Sequence[str], change: ProposedChange) -> list[str]:
    """argv with the flag set to the proposed value (replacing any earlier value). A dotted
    flag (`--speculative-config.num_speculative_tokens 2`) is merged into the JSON of its
    flag when argv has one: vLLM appends the dotted keys as a JSON of their own after argv,
    which would replace the method and the rest of the original."""
    arguments = change.argument()
    if arguments is None:
        unknown = ", ".join(change.unknown)
        why = f"{unknown} unknown" if unknown else "advice, not a flag vtop can set"
        raise ValueError(f"{change.flag}: no value to apply ({why})")
    flag, _, key = arguments[0].partition(".")
    if key and len(arguments) == 2:
        written = flag_value(argv, flag)
        if written is not None:
            arguments = [flag, _merged(flag, written, key, arguments[1])]
    return _with_flag(argv, arguments)


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The last value argv gives a flag (`--flag value` or `--flag=value`), None without one."""
    found = None
    for index, arg in enumerate(argv):
        if arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
        elif arg == flag and index + 1 < len(argv):
            found = argv[index + 1]
    return found


def _merged(flag: str, written: str, key: str, value: str) -> str:
    """A flag's JSON with the dotted key set to the value (a JSON value, else the text)."""
    try:
        config = json.loads(written)
    except json.JSONDecodeError:
        config = None
    if not isinstance(config, dict):
        raise ValueError(f"{flag}: its value is not a JSON object, so {key} cannot be set in it")
    *path, last = key.split(".")
    inner = config
    for part in path:
        inner = inner.setdefault(part, {})
        if not isinstance(inner, dict):
            raise ValueError(f"{flag}: {part} is not an object, so {key} cannot be set in it")
    try:
        inner[last] = json.loads(value)
    except json.JSONDecodeError:
        inner[last] = value
    return json.dumps(config, separators=(",", ":"))


def _with_flag(argv: Sequence[str], arguments: list[str]) -> list[str]:
    """argv without any earlier value of the flag (or its negation), then the arguments."""
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
