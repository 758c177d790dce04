"""Recursive-descent parser for vtop's PromQL subset (written by hand: no maintained Python
PromQL parser exists, and rules must stay exportable to a real Prometheus)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from vtop.core.rules.promql.ast import (
    Aggregate,
    Binary,
    Call,
    Expr,
    Matcher,
    Negate,
    Number,
    Selector,
)

AGGREGATIONS = frozenset({"sum", "min", "max", "avg", "count"})
RANGE_FUNCTIONS = frozenset(
    {
        "rate",
        "increase",
        "avg_over_time",
        "min_over_time",
        "max_over_time",
        "sum_over_time",
        "count_over_time",
        "last_over_time",
        "delta",
    }
)
INSTANT_FUNCTIONS = frozenset(
    {
        "histogram_quantile",
        "abs",
        "floor",
        "ceil",
        "round",
        "clamp_min",
        "clamp_max",
        "clamp",
        "scalar",
        "vector",
        "absent",
        "sqrt",
    }
)
FUNCTIONS = RANGE_FUNCTIONS | INSTANT_FUNCTIONS
KEYWORDS = (
    AGGREGATIONS
    | frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"})
    | frozenset({"and", "or", "unless"})
)
"""Case-insensitive in Prometheus (`SUM BY (x)`, `AND`); function names are not."""
MATCHING = frozenset({"on", "ignoring"})
NOT_RE2_GROUPS = ("(?P=", "(?=", "(?!", "(?<=", "(?<!", "(?>", "(?(")
RE2_GROUP_STARTS = frozenset("P:imsU-)")
PRECEDENCE: list[frozenset[str]] = [
    frozenset({"or"}),
    frozenset({"and", "unless"}),
    frozenset({"==", "!=", ">", "<", ">=", "<="}),
    frozenset({"+", "-"}),
    frozenset({"*", "/", "%"}),
    frozenset({"^"}),
]
POWER = len(PRECEDENCE) - 1
"""The level of `^`, the only operator that binds more tightly than a unary sign."""
DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
TOKEN = re.compile(
    r"""\s*(?:
    (?P<duration>(?:\d+(?:ms|s|m|h|d|w))+(?![a-zA-Z0-9_:]))
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?![a-zA-Z0-9_:.])|0x[0-9a-fA-F]+
      |(?i:inf|nan)(?![a-zA-Z0-9_:]))
  | (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op>=~|!~|==|!=|>=|<=|[-+*/%^(){}\[\],=<>])
    )""",
    re.VERBOSE,
)


class PromQLError(ValueError):
    """A syntax or semantic error, with the character position it was found at."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} (at character {position})")
        self.position = position


@dataclass(frozen=True)
class Token:
    """One lexical token."""

    kind: str
    text: str
    position: int


def tokenize(source: str) -> list[Token]:
    """Split an expression into tokens."""
    tokens: list[Token] = []
    position = 0
    while position < len(source):
        if source[position:].strip() == "":
            break
        match = TOKEN.match(source, position)
        if match is None or match.lastgroup is None:
            raise PromQLError(f"unexpected character {source[position]!r}", position)
        start = match.start(match.lastgroup)
        tokens.append(Token(match.lastgroup, match.group(match.lastgroup), start))
        position = match.end()
    tokens.append(Token("end", "", len(source)))
    return tokens


def parse_duration(text: str, position: int = 0) -> float:
    """'5m', '1h30m', '500ms' -> seconds."""
    total = 0.0
    for amount, unit in re.findall(r"(\d+)(ms|s|m|h|d|w)", text):
        total += int(amount) * DURATION_UNITS[unit]
    if total <= 0:
        raise PromQLError(f"bad duration {text!r}", position)
    return total


def unquote(text: str) -> str:
    """A PromQL string literal's value."""
    body = text[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


class Parser:
    """Parses one expression."""

    def __init__(self, source: str) -> None:
        self.tokens = tokenize(source)
        self.index = 0

    @property
    def current(self) -> Token:
        return self.tokens[self.index]

    def take(self, text: str | None = None, kind: str | None = None) -> Token:
        """Consume the current token, checking its text or kind."""
        token = self.current
        if (text is not None and token.text != text) or (kind is not None and token.kind != kind):
            wanted = text or kind
            raise PromQLError(f"expected {wanted!r}, found {token.text or 'end'!r}", token.position)
        self.index += 1
        return token

    def accept(self, text: str) -> bool:
        """Consume the current token if it is `text` (keywords in any case)."""
        if self.is_(text):
            self.index += 1
            return True
        return False

    def is_(self, text: str) -> bool:
        """Whether the current token is `text` (keywords in any case)."""
        token = self.current
        if token.kind == "name" and text in KEYWORDS:
            return token.text.lower() == text
        return token.text == text and token.kind in ("op", "name")

    def operator(self, level: int) -> str | None:
        """The binary operator of this precedence level at the current token, if any."""
        token = self.current
        text = token.text.lower() if token.kind == "name" else token.text
        if token.kind in ("op", "name") and text in PRECEDENCE[level]:
            return text
        return None

    def parse(self) -> Expr:
        """The whole input as one expression."""
        expr = self.binary(0)
        if self.current.kind != "end":
            raise PromQLError(f"unexpected {self.current.text!r}", self.current.position)
        return expr

    def binary(self, level: int) -> Expr:
        """Binary operators by precedence (all left-associative except ^)."""
        if level == len(PRECEDENCE):
            return self.unary()
        left = self.binary(level + 1)
        while (op := self.operator(level)) is not None:
            self.index += 1
            return_bool = self.accept("bool")
            modified = self.current.kind == "name" and self.current.text.lower() in MATCHING
            on, ignoring = self.matching()
            position = self.current.position
            group, include = self.group() if modified else (None, ())
            for label in set(include) & set(on or ()):
                raise PromQLError(
                    f"label {label!r} must not occur in ON and GROUP clause at once", position
                )
            right = self.binary(level if op == "^" else level + 1)
            left = Binary(op, left, right, return_bool, on, ignoring, group, include)
        return left

    def group(self) -> tuple[str | None, tuple[str, ...]]:
        """Optional `group_left` / `group_right`, each with an optional label list."""
        for side in ("left", "right"):
            if self.accept(f"group_{side}"):
                return side, self.label_list() if self.current.text == "(" else ()
        return None, ()

    def matching(self) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
        """Optional `on(...)` / `ignoring(...)` after a binary operator."""
        if self.accept("on"):
            return self.label_list(), ()
        if self.accept("ignoring"):
            return None, self.label_list()
        return None, ()

    def unary(self) -> Expr:
        """Unary minus/plus, binding less tightly than `^` (-2 ^ 2 is -4), then a primary."""
        if self.accept("-"):
            return Negate(self.binary(POWER))
        if self.accept("+"):
            return self.binary(POWER)
        return self.primary()

    def primary(self) -> Expr:
        """Number, parenthesised expression, function call, aggregation or selector."""
        token = self.current
        if token.kind == "number":
            self.index += 1
            return Number(
                float(int(token.text, 16)) if token.text.startswith("0x") else float(token.text)
            )
        if self.accept("("):
            expr = self.binary(0)
            self.take(")")
            return expr
        if token.kind == "name" and token.text.lower() in AGGREGATIONS:
            return self.aggregate()
        if token.kind == "name" and self.tokens[self.index + 1].text == "(":
            return self.call()
        if token.kind == "name" or token.text == "{":
            return self.selector()
        raise PromQLError(f"unexpected {token.text or 'end'!r}", token.position)

    def call(self) -> Call:
        """function(args...)."""
        name = self.take(kind="name")
        if name.text not in FUNCTIONS:
            raise PromQLError(f"unsupported function {name.text!r}", name.position)
        self.take("(")
        args: list[Expr] = []
        if not self.accept(")"):
            args.append(self.binary(0))
            while self.accept(","):
                args.append(self.binary(0))
            self.take(")")
        if name.text in RANGE_FUNCTIONS and not (
            len(args) == 1 and isinstance(args[0], Selector) and args[0].range_s is not None
        ):
            raise PromQLError(f"{name.text}() takes one range selector like x[5m]", name.position)
        return Call(name.text, tuple(args))

    def aggregate(self) -> Aggregate:
        """sum by (a) (expr), sum (expr) by (a), or without."""
        op = self.take(kind="name").text.lower()
        labels, without = self.grouping()
        self.take("(")
        expr = self.binary(0)
        self.take(")")
        if not labels and not without:
            labels, without = self.grouping()
        return Aggregate(op, expr, labels, without)

    def grouping(self) -> tuple[tuple[str, ...], bool]:
        """Optional `by (...)` or `without (...)`."""
        if self.accept("by"):
            return self.label_list(), False
        if self.accept("without"):
            return self.label_list(), True
        return (), False

    def label_list(self) -> tuple[str, ...]:
        """(a, b, c)."""
        self.take("(")
        labels: list[str] = []
        while not self.accept(")"):
            labels.append(self.take(kind="name").text)
            if not self.accept(","):
                self.take(")")
                break
        return tuple(labels)

    def selector(self) -> Selector:
        """name{matchers}[range] offset d."""
        start = self.current.position
        name = self.take(kind="name").text if self.current.kind == "name" else ""
        matchers: list[Matcher] = []
        if self.accept("{"):
            while not self.accept("}"):
                matchers.append(self.matcher())
                if not self.accept(","):
                    self.take("}")
                    break
        named = [m for m in matchers if m.label == "__name__" and m.op == "="]
        if not name and len(named) == 1:
            name = named[0].value
            matchers.remove(named[0])
        if not name and not any(not _matches_empty(m) for m in matchers):
            raise PromQLError(
                "a selector needs a metric name or a matcher that does not match the empty string",
                start,
            )
        range_s = self.range_suffix()
        offset_s = parse_duration(self.take(kind="duration").text) if self.accept("offset") else 0.0
        return Selector(name, tuple(matchers), range_s, offset_s)

    def matcher(self) -> Matcher:
        """label op "value"."""
        label = self.take(kind="name").text
        op = self.take(kind="op").text
        if op not in ("=", "!=", "=~", "!~"):
            raise PromQLError(f"bad label matcher operator {op!r}", self.current.position)
        value = unquote(self.take(kind="string").text)
        if op in ("=~", "!~"):
            check_regex(value, self.current.position)
        return Matcher(label, op, value)

    def range_suffix(self) -> float | None:
        """Optional [5m]."""
        if not self.accept("["):
            return None
        token = self.current
        if token.kind not in ("duration", "number"):
            raise PromQLError("expected a duration like 5m", token.position)
        self.index += 1
        self.take("]")
        return (
            parse_duration(token.text, token.position)
            if token.kind == "duration"
            else float(token.text)
        )


def check_regex(pattern: str, position: int) -> None:
    """A regex both engines read alike (RE2 syntax), else a PromQLError saying what to change."""
    python_only = _python_only(pattern)
    if python_only is not None:
        raise PromQLError(
            f"regex {pattern!r}: {python_only!r} is not RE2 syntax (Prometheus's regex engine "
            "has no backreferences, lookaround, atomic groups, conditionals, possessive "
            "quantifiers or \\Z)",
            position,
        )
    try:
        re2_regex(pattern)
    except re.error as error:
        raise PromQLError(f"bad regex {pattern!r}: {error}", position) from None


FLAGS_GROUP = re.compile(r"\(\?([imsU]*(?:-[imsU]+)?)\)")
"""A flags-only group, `(?i)`, `(?-s)`: in RE2 it sets its flags up to the end of the group it
stands in (past a `|` too); Python takes such a group only at the pattern's start."""


@functools.lru_cache(maxsize=4096)
def re2_regex(pattern: str) -> re.Pattern[str]:
    """An RE2 pattern (syntax checked by `check_regex`) compiled with Python's engine: flags set
    inside the pattern become Python's scoped groups, `a(?i)b|c` -> `a(?i:b)|(?i:c)`.
    Remembered: every tick matches the same few patterns."""
    return re.compile(_scoped_flags(pattern))


def _scoped_flags(pattern: str) -> str:
    """RE2's mid-pattern flag groups as Python's scoped ones (the text unchanged without)."""
    if FLAGS_GROUP.search(pattern, 1) is None:
        return pattern
    out: list[str] = []
    flags: list[list[str]] = [[]]
    """The flags set so far in each open group, innermost last."""
    index, in_class = 0, False
    while index < len(pattern):
        char = pattern[index]
        found = FLAGS_GROUP.match(pattern, index)
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif found is not None and index > 0:
            flags[-1].append(found[1])
            out.append(f"(?{found[1]}:")
            index = found.end()
            continue
        elif char == "[":
            in_class = True
        elif char == "(":
            flags.append([])
        elif char in ")|" and (char == "|" or len(flags) > 1):  # an unmatched ")" stays an error
            out.append(")" * len(flags[-1]))
            if char == ")":
                flags.pop()
            else:
                out.append("|" + "".join(f"(?{f}:" for f in flags[-1]))
                index += 1
                continue
        out.append(char)
        index += 1
    out.append(")" * len(flags[-1]))
    return "".join(out)


def _python_only(pattern: str) -> str | None:
    """The first piece of Python regex syntax that RE2 lacks, or None."""
    index, after_quantifier, in_class = 0, False, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            escaped = pattern[index + 1 : index + 2]
            if escaped and (escaped in "123456789Z"):
                return char + escaped
            index, after_quantifier = index + 2, False
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif pattern.startswith("(?", index):
            bad = next((g for g in NOT_RE2_GROUPS if pattern.startswith(g, index)), None)
            if bad is not None or pattern[index + 2 : index + 3] not in RE2_GROUP_STARTS:
                return bad or pattern[index : index + 3]
        elif char == "+" and after_quantifier:
            return pattern[index - 1 : index + 1]
        after_quantifier = not in_class and char in "*+?}"
        index += 1
    return None


def _matches_empty(matcher: Matcher) -> bool:
    """Whether a matcher also selects series without the label."""
    if matcher.op == "=":
        return matcher.value == ""
    if matcher.op == "!=":
        return matcher.value != ""
    found = re2_regex(matcher.value).fullmatch("") is not None
    return found if matcher.op == "=~" else not found


def parse(source: str) -> Expr:
    """Parse a PromQL-subset expression; PromQLError names the position of a mistake."""
    return Parser(source).parse()
