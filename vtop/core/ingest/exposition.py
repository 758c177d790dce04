"""Fast Prometheus / OpenMetrics text parser with prometheus_client as the reference fallback.

Written by hand because prometheus_client's parser re-parses every label set on every scrape:
here the text before the value (name and labels) is looked up in a cache, and a payload with the
same lines as the previous one (only values moved) is read through that one's layout without any
Python code per line.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from vtop.core.config.settings import SAMPLE_LIMIT
from vtop.core.frame import Labels, ParseError, Sample, SampleColumns, Series, picker
from vtop.core.ingest.exposition_lines import (
    head_end,
    parse_label_body,
    parse_number,
    quoted_name,
    type_line,
)
from vtop.core.ingest.openmetrics_strict import prometheus_rejection
from vtop.core.store.rings import KEPT_PREFIXES, OTHER_MAX_SERIES, PROCESS_START, is_kept

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
MAX_CACHED_SERIES = 200_000
SHARED_HEADS_KEPT = 50_000
SHARED_HEADS: dict[str, tuple[str, Series]] = {}
"""The heads of vLLM's (and vtop's own) series every parser of this process shares, with their
series, up to SHARED_HEADS_KEPT (then each parser keeps its own): 100 replicas of a model
expose the same 420 heads, held once instead of 100 times (about 20 MB at 100 servers)."""
KEPT_HEADS = (*KEPT_PREFIXES, PROCESS_START, '{"')
"""Sample lines always parsed: vLLM's (and vtop's own) series, the process start time, and
quoted UTF-8 names (their name is known only once parsed)."""


@dataclass
class ParsedExposition:
    """Samples, declared metric types and per-line errors of one exposition text."""

    samples: list[Sample] | SampleColumns = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)
    errors: list[ParseError] = field(default_factory=list)
    skipped: int = 0
    """Sample lines of series not from vLLM left unparsed: the parser already holds its cap of
    them (the store would drop them anyway; parsing them first would spend the memory)."""
    over_limit: bool = False
    """The text held more samples than the parser's limit: parsing stopped there (the samples
    are a part of the payload, and the scrape is to be refused)."""

    def frozen_samples(self) -> Sequence[Sample]:
        """The samples as an immutable sequence (columns stay columns)."""
        return self.samples if isinstance(self.samples, SampleColumns) else tuple(self.samples)


class _Layout:
    """The line structure of the last clean payload: where its samples are and what they are.

    A server's /metrics keeps the same lines from one scrape to the next, only the values move.
    When a new payload has the same comment lines and sample heads, its values are read without
    any per-line Python code; any difference (or an odd value) falls back to the full parse.
    """

    __slots__ = (
        "heads",
        "heads_length",
        "line_count",
        "other_indices",
        "other_lines",
        "pick_other",
        "pick_samples",
        "sample_indices",
        "series",
    )

    def __init__(
        self, lines: list[str], sample_indices: list[int], series: tuple[Series, ...]
    ) -> None:
        samples = set(sample_indices)
        other = [i for i in range(len(lines)) if i not in samples]
        self.line_count = len(lines)
        self.sample_indices = sample_indices
        self.other_indices = other
        self.pick_samples = picker(sample_indices)
        self.pick_other = picker(other)
        # interned: the servers of a fleet expose the same comment lines and sample heads, so
        # their layouts share one copy (100 vLLM 0.32 servers: 6 MB less)
        self.other_lines = tuple(map(sys.intern, self.pick_other(lines)))
        heads = [line.rpartition(" ")[0] for line in self.pick_samples(lines)]
        self.heads = [sys.intern(head + " ") for head in heads]
        self.heads_length = sum(map(len, self.heads))
        self.series = series

    def read(self, text: str) -> SampleColumns | None:
        """The samples of `text` when it has this layout and plain values; else None."""
        lines = text.split("\n")
        if len(lines) != self.line_count or self.pick_other(lines) != self.other_lines:
            return None
        samples = self.pick_samples(lines)
        values = list(map(str.removeprefix, samples, self.heads))
        # a line without its head keeps it whole, and only then is it longer than head + value
        if sum(map(len, samples)) != sum(map(len, values)) + self.heads_length:
            return None
        value_text = "\n".join(values)
        if "_" in value_text:
            return None
        try:
            numbers = list(map(float, values))
        except ValueError:
            return None
        return SampleColumns(self.series, numbers, self, value_text)

    def text(self, value_text: str) -> str:
        """The payload this layout was made from, with these values (`PayloadLayout`)."""
        lines = [""] * self.line_count
        for index, line in zip(self.other_indices, self.other_lines, strict=True):
            lines[index] = line
        values = value_text.split("\n")
        for index, head, value in zip(self.sample_indices, self.heads, values, strict=True):
            lines[index] = head + value
        return "\n".join(lines)


LINE_BLOCK = 1 << 20
"""Characters split into lines at a time: a large payload never becomes one list of lines."""


def _lines(text: str) -> Iterator[str]:
    """The lines of `text` as `text.split("\\n")` gives them, a block at a time."""
    start, size = 0, len(text)
    while True:
        cut = text.find("\n", start + LINE_BLOCK) if start + LINE_BLOCK < size else -1
        if cut < 0:
            yield from text[start:].split("\n") if start else text.split("\n")
            return
        yield from text[start:cut].split("\n")
        start = cut + 1


def _note_refusal(text: str, parsed: ParsedExposition) -> None:
    """Add the line Prometheus would fail an OpenMetrics scrape on, unless vtop already could
    not read that line."""
    refusal = prometheus_rejection(_lines(text))
    if refusal is not None and all(e.line_number != refusal.line_number for e in parsed.errors):
        parsed.errors.append(dataclasses.replace(refusal, refused_by_prometheus=True))


def layout_of(text: str, parsed: ParsedExposition, heads: dict[str, Series]) -> _Layout | None:
    """The layout of a cleanly parsed text-format payload, None when it has no stable shape."""
    if (
        parsed.errors
        or parsed.skipped
        or any(sample.timestamp is not None for sample in parsed.samples)
    ):
        return None
    lines = text.split("\n")
    indices = [i for i, line in enumerate(lines) if line and line[0] != "#" and not line.isspace()]
    series = [sample.series for sample in parsed.samples]
    if not indices or len(indices) != len(series):
        return None
    for index, known in zip(indices, series, strict=True):
        if heads.get(lines[index].rpartition(" ")[0]) is not known:
            return None
    return _Layout(lines, indices, tuple(series))


SHORTEST_KEPT_LINE = len("vllm:x 1\n")
"""No text shorter than the limit times this can hold more kept samples than the limit: a
real payload is never counted."""


def kept_lines(text: str) -> int:
    """Lines that start with the name of a series vtop keeps (at the C speed of str.count):
    the samples a parse would make, counted before any is made."""
    return sum(text.count("\n" + head) + text.startswith(head) for head in KEPT_HEADS)


class ExpositionParser:
    """Parses exposition text, reusing series identities across calls (one parser per target)."""

    def __init__(self, other_max: int = OTHER_MAX_SERIES, sample_limit: int = SAMPLE_LIMIT) -> None:
        self.other_max = other_max
        """How many series not from vLLM this parser makes; later ones are skipped unparsed."""
        self.sample_limit = sample_limit
        """Samples one text may give; the parse stops past it (`over_limit`)."""
        self._other_made = 0
        self._series_by_head: dict[str, Series] = {}
        self._comments: dict[str, tuple[str, str]] = {}
        """Comment lines seen before: (family, type) of a TYPE line, ("", "") for the rest."""
        self.fallback_lines = 0
        """Lines the fast path could not read but the reference parser could."""
        self._layout: _Layout | None = None
        self._layout_types: dict[str, str] = {}
        """The types of the layout's payload: the same dict for every payload read through it
        (a frame kept for a bundle holds its scrape's types; 600 copies were 1 MB)."""
        self.layout_hits = 0
        """Payloads read through the layout of the previous one."""

    def parse(self, text: str, openmetrics: bool = False) -> ParsedExposition:
        """Parse a whole exposition; bad lines become errors and the rest is kept. A text
        with more kept sample lines than the limit is refused before a series is made."""
        limit = self.sample_limit
        if len(text) > limit * SHORTEST_KEPT_LINE and kept_lines(text) > limit:
            return ParsedExposition(over_limit=True)
        if self._layout is not None and not openmetrics:
            samples = self._layout.read(text)
            if samples is not None:
                self.layout_hits += 1
                return ParsedExposition(samples, self._layout_types)
        parsed = self._parse_lines(text, openmetrics)
        if openmetrics:
            _note_refusal(text, parsed)
        self._layout = None if openmetrics else layout_of(text, parsed, self._series_by_head)
        self._layout_types = parsed.types
        return parsed

    def _parse_lines(self, text: str, openmetrics: bool) -> ParsedExposition:
        """Parse line by line."""
        samples: list[Sample] = []
        result = ParsedExposition(samples)
        heads, append, make = self._series_by_head, samples.append, tuple.__new__
        comments = self._comments
        limit = self.sample_limit
        for number, line in enumerate(_lines(text), 1):
            if not line:
                continue
            if number > limit and len(samples) > limit:
                result.over_limit = True
                break
            if line[0] == "#":
                known = comments.get(line)
                if known is not None:
                    if known[0]:
                        result.types[known[0]] = known[1]
                elif self._comment(line, number, result, openmetrics):
                    break
                continue
            head, _, value = line.rpartition(" ")
            series = heads.get(head) if not openmetrics else None
            if series is not None and "_" not in value:  # fast path: known series, plain value
                try:
                    append(make(Sample, (series, float(value), None)))
                    continue
                except ValueError:
                    pass
            if line.isspace():
                continue
            if self._other_made >= self.other_max and not line.lstrip().startswith(KEPT_HEADS):
                result.skipped += 1
                continue
            try:
                append(self._sample(line.rstrip("\r"), openmetrics))
            except ValueError as error:
                self._fallback(line, number, str(error), samples, result, openmetrics)
        return result

    def _comment(self, line: str, number: int, result: ParsedExposition, openmetrics: bool) -> bool:
        """Record TYPE lines (well-formed ones are remembered); True at an OpenMetrics EOF."""
        parts = line[1:].split(None, 1)
        if parts and parts[0] == "TYPE":
            declared = type_line(parts[1] if len(parts) > 1 else "")
            if declared is None:
                result.errors.append(ParseError(number, line, "malformed TYPE line"))
            else:
                result.types[declared[0]] = declared[1]
                self._remember(line, declared)
        elif line.rstrip() != "# EOF":
            self._remember(line, ("", ""))
        return openmetrics and line.rstrip() == "# EOF"

    def _remember(self, line: str, declared: tuple[str, str]) -> None:
        """Cache a comment line: (family, type) for TYPE lines, ("", "") for others."""
        if len(self._comments) < MAX_CACHED_SERIES:
            self._comments[line] = declared

    def _sample(self, line: str, openmetrics: bool) -> Sample:
        """Parse one sample line: a head, a value, an optional timestamp, an optional exemplar
        (`# {labels} value`, ignored: it never changes the sample's value)."""
        end = head_end(line)
        head, rest = line[:end], line[end:]
        exemplar = rest.find("#")
        if exemplar >= 0:
            rest = rest[:exemplar]
        series = self._series_by_head.get(head)
        if series is None:
            series = self._new_series(head)
        fields = rest.split()
        if len(fields) == 1:
            return Sample(series, parse_number(fields[0]))
        if len(fields) == 2:
            scale = 1.0 if openmetrics else 1000.0
            return Sample(series, parse_number(fields[0]), parse_number(fields[1]) / scale)
        raise ValueError("expected a value and an optional timestamp")

    def _new_series(self, head: str) -> Series:
        """The series of a name-and-labels head, cached: the one another parser made of the
        same head when there is one (the replicas of a model expose the same heads: a fleet
        holds one copy of them, not one per server), else parsed."""
        shared = SHARED_HEADS.get(head)
        if shared is not None:
            head, series = shared
        else:
            series = _parsed_head(head)
            if is_kept(series.name) and len(SHARED_HEADS) < SHARED_HEADS_KEPT:
                SHARED_HEADS[head] = (head, series)
        if len(self._series_by_head) >= MAX_CACHED_SERIES:
            self._series_by_head.clear()
            self._other_made = 0
        self._other_made += not is_kept(series.name)
        self._series_by_head[head] = series
        return series

    def _fallback(
        self,
        line: str,
        number: int,
        message: str,
        samples: list[Sample],
        result: ParsedExposition,
        openmetrics: bool,
    ) -> None:
        """Try the reference parser on a line the fast path rejected."""
        found = reference_line(line, openmetrics)
        if found is None:
            result.errors.append(ParseError(number, line, message))
            return
        self.fallback_lines += 1
        samples.extend(found)


def _parsed_head(head: str) -> Series:
    """Parse a name-and-labels head."""
    brace = head.find("{")
    labels: Labels = ()
    if brace < 0:
        name = head.strip()
    else:
        if not head.endswith("}"):
            raise ValueError("unbalanced braces")
        name, body = head[:brace].strip(), head[brace + 1 : -1]
        if not name:
            name, body = quoted_name(body)
        labels = parse_label_body(body)
    if not name or (not METRIC_NAME.match(name) and not head.lstrip().startswith('{"')):
        raise ValueError(f"invalid metric name {name!r}")
    return Series(name, labels)


def reference_line(line: str, openmetrics: bool) -> list[Sample] | None:
    """Samples of one line per prometheus_client, or None when it rejects the line too."""
    text = line + ("\n# EOF\n" if openmetrics else "\n")
    try:
        return reference_samples(text, openmetrics)
    except (ValueError, IndexError, KeyError, TypeError):
        return None


def reference_samples(text: str, openmetrics: bool = False) -> list[Sample]:
    """Parse with prometheus_client (the reference) into vtop samples (imported here: a clean
    payload never needs it, and the dashboard does not pay its 1.5 MiB until one does)."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
    from prometheus_client.parser import text_string_to_metric_families as text_parse

    parse = om_parse if openmetrics else text_parse
    families = parse(text)
    return [
        Sample(
            Series(s.name, tuple(sorted(s.labels.items()))),
            float(s.value),
            None if s.timestamp is None else float(s.timestamp),
        )
        for family in families
        for s in family.samples
    ]


def is_openmetrics(content_type: str) -> bool:
    """True for an OpenMetrics content type (vLLM's experimental Rust frontend)."""
    return "openmetrics" in content_type.lower()
