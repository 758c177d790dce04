"""Whether Prometheus would refuse an OpenMetrics payload, and for which line.

vtop reads what it can of a payload and reports the lines it cannot. Prometheus's OpenMetrics
parser is stricter: the first line it cannot take fails the whole scrape (the target is down
and nothing of it is stored). A payload vtop reads but Prometheus refuses is a problem of its
own: the same server, scraped by Prometheus, has no data. This names the first such line with
Prometheus's reason, by the grammar Prometheus 2.42 (Debian's) enforces: single spaces between
fields, no blank lines, well-formed HELP, TYPE and UNIT lines, finite timestamps, exemplars only
on samples named `..._total` or `..._bucket`, and `# EOF` last.

Written by hand because prometheus_client's parser, the reference for values, refuses other
things (it validates counter and histogram values) and accepts some of these; the tests check
this module against the real Prometheus.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from vtop.core.frame import ParseError

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
PAIR = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
LABELS = rf"\{{(?:{PAIR}(?:,{PAIR})*)?\}}"
SAMPLE = re.compile(rf"({NAME})({LABELS})? (\S+)(?: ([^\s#]\S*))?(?P<rest> .*)?\Z")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\\n]|\\.)*"')
"""One label pair, its name captured."""
EXEMPLAR = re.compile(rf" # {LABELS} (\S+)(?: (\S+))?\Z")
HELP = re.compile(rf"# HELP {NAME} ")
TYPE = re.compile(
    rf"# TYPE ({NAME}) (counter|gauge|histogram|gaugehistogram|stateset|info|summary|unknown)\Z"
)
UNIT = re.compile(rf"# UNIT ({NAME}) (.*)\Z")
METADATA = re.compile(rf"# (HELP|TYPE|UNIT)(?: ({NAME}))?")
EOF = "# EOF"
WITH_EXEMPLARS = ("_total", "_bucket")
"""The samples Prometheus 2.42 lets carry an exemplar, by their name's suffix (whatever the
family's type)."""


def prometheus_rejection(lines: Iterable[str]) -> ParseError | None:
    """The first line Prometheus's OpenMetrics parser would fail the scrape on, or None (the
    payload's lines as `text.split("\\n")` gives them)."""
    number, line = 0, ""
    numbered = enumerate(lines, 1)
    for number, line in numbered:
        if line.startswith(EOF):
            if line != EOF:
                return ParseError(number, line, "data after # EOF")
            after = next(((n, rest) for n, rest in numbered if rest), None)
            return None if after is None else ParseError(*after, "data after # EOF")
        why = _metadata(line) if line.startswith("#") else _sample(line)
        if why is not None:
            return ParseError(number, line, why)
    return ParseError(number, line, "the payload does not end with # EOF")


def _metadata(line: str) -> str | None:
    """Why a comment line is refused (OpenMetrics has no other comments than these)."""
    found = METADATA.match(line)
    if found is None:
        return "a comment that is not HELP, TYPE, UNIT or EOF"
    keyword, name = found.group(1), found.group(2)
    if name is None:
        return f"no metric name after {keyword}"
    if keyword == "HELP":
        return None if HELP.match(line) else "no text in HELP"
    if keyword == "TYPE":
        return None if TYPE.match(line) else "an invalid metric type"
    unit = UNIT.match(line)
    if unit is None:
        return "no text in UNIT"
    if unit.group(2) and not unit.group(1).endswith("_" + unit.group(2)):
        return f"unit {unit.group(2)!r} is not a suffix of metric {unit.group(1)!r}"
    return None


def _sample(line: str) -> str | None:
    """Why a sample line is refused."""
    if not line:
        return "a blank line"
    found = SAMPLE.match(line)
    if found is None:
        return "not `name{labels} value [timestamp]` with single spaces"
    name, value, timestamp, rest = found.group(1), found.group(3), found.group(4), found.group(5)
    labels = LABEL.findall(found.group(2) or "")
    if len(set(labels)) < len(labels):
        return "a label name given twice"
    if _number(value) is None:
        return f"value {value!r} is not a number"
    if timestamp is not None and not _finite(timestamp):
        return f"timestamp {timestamp!r} is not a finite number"
    if rest is None:
        return None
    return _exemplar(rest, name)


def _exemplar(rest: str, name: str) -> str | None:
    """Why an exemplar (` # {labels} value [timestamp]`) is refused."""
    found = EXEMPLAR.match(rest)
    if found is None:
        return "after the value, only ` # {labels} value [timestamp]` (an exemplar)"
    if _number(found.group(1)) is None:
        return f"exemplar value {found.group(1)!r} is not a number"
    if found.group(2) is not None and not _finite(found.group(2)):
        return f"exemplar timestamp {found.group(2)!r} is not a finite number"
    if not name.endswith(WITH_EXEMPLARS):
        return f"{name} cannot carry an exemplar (only a name ending _total or _bucket)"
    return None


def _number(text: str) -> float | None:
    """A float as Prometheus reads one in OpenMetrics (Go's syntax without hex or `_`)."""
    if any(c in text for c in "pP_xX"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _finite(text: str) -> bool:
    """A finite number (a timestamp)."""
    value = _number(text)
    return value is not None and math.isfinite(value)
