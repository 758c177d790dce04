"""The pieces of one exposition line: the head's end (quotes respected), quoted names, label
bodies with the format's escapes, values and TYPE lines."""

from __future__ import annotations

import re

from vtop.core.frame import Labels

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def parse_label_body(body: str) -> Labels:
    """Parse `a="x",b="y"` (without braces; UTF-8 names quoted) into sorted label pairs."""
    pairs: dict[str, str] = {}
    position, end = 0, len(body)
    while True:
        position = _skip_spaces(body, position)
        if position >= end:
            break
        if body[position] == '"':
            name, after = _read_quoted(body, position)
            equals = _skip_spaces(body, after)
            if equals >= end or body[equals] != "=":
                raise ValueError("label without '='")
        else:
            equals = body.find("=", position)
            if equals < 0:
                raise ValueError("label without '='")
            name = body[position:equals].strip()
            if not LABEL_NAME.match(name):
                raise ValueError(f"invalid label name {name!r}")
        if name in pairs:
            raise ValueError(f"duplicate label {name!r}")
        value, position = _read_quoted(body, _skip_spaces(body, equals + 1))
        pairs[name] = value
        position = _skip_spaces(body, position)
        if position < end and body[position] != ",":
            raise ValueError("expected ',' between labels")
        position += 1
    return tuple(sorted(pairs.items()))


def _skip_spaces(text: str, position: int) -> int:
    """Index of the first non-blank character at or after `position`."""
    while position < len(text) and text[position] in " \t":
        position += 1
    return position


def _read_quoted(text: str, position: int) -> tuple[str, int]:
    """Read a double-quoted, escaped label value; return it and the index after the quote."""
    if position >= len(text) or text[position] != '"':
        raise ValueError("label value must be quoted")
    closing = text.find('"', position + 1)
    raw_end = closing
    while raw_end > 0 and _is_escaped(text, raw_end):
        raw_end = text.find('"', raw_end + 1)
    if raw_end < 0:
        raise ValueError("unterminated label value")
    raw = text[position + 1 : raw_end]
    return (_unescape(raw) if "\\" in raw else raw), raw_end + 1


def _is_escaped(text: str, position: int) -> bool:
    """True when the character at `position` follows an odd number of backslashes."""
    count = 0
    while position - 1 - count >= 0 and text[position - 1 - count] == "\\":
        count += 1
    return count % 2 == 1


def _unescape(raw: str) -> str:
    """Resolve the three escapes the text format defines."""
    out: list[str] = []
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == "\\" and index + 1 < len(raw):
            nxt = raw[index + 1]
            out.append(ESCAPES.get(nxt, "\\" + nxt))
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


def parse_number(text: str) -> float:
    """Parse a sample value the way the exposition format allows (Inf, NaN, exponents)."""
    if "_" in text:
        raise ValueError(f"invalid value {text!r}")
    return float(text)


def head_end(line: str) -> int:
    """Where a sample line's name and labels end: after the `}` that closes the label set
    (quotes and escapes respected, so a `}` or ` # ` inside a value does not end it), else at
    the first blank."""
    brace = line.find("{")
    blank = min((i for i in (line.find(" "), line.find("\t")) if i >= 0), default=len(line))
    if brace < 0 or brace > blank:
        return blank
    quoted, index = False, brace + 1
    while index < len(line):
        char = line[index]
        if char == "\\" and quoted:
            index += 2
            continue
        if char == '"':
            quoted = not quoted
        elif char == "}" and not quoted:
            return index + 1
        index += 1
    raise ValueError("unbalanced braces")


def quoted_name(body: str) -> tuple[str, str]:
    """A UTF-8 metric name quoted first inside the braces (`{"my.metric", a="1"}`) and the
    rest of the label body."""
    name, position = _read_quoted(body, _skip_spaces(body, 0))
    position = _skip_spaces(body, position)
    if position < len(body):
        if body[position] != ",":
            raise ValueError("expected ',' after the quoted metric name")
        position += 1
    return name, body[position:]


def type_line(rest: str) -> tuple[str, str] | None:
    """(family, type) of the text after `# TYPE` (blanks or tabs between; a quoted UTF-8
    family name allowed), None when malformed."""
    rest = rest.strip()
    if rest.startswith('"'):
        try:
            name, position = _read_quoted(rest, 0)
        except ValueError:
            return None
        kinds = rest[position:].split()
    else:
        name, *kinds = rest.split() or [""]
    if not name or len(kinds) != 1:
        return None
    return name, kinds[0]
