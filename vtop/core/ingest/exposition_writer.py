"""Samples written back as Prometheus text (format 0.0.4).

Scrapes read from a Prometheus server arrive as query results, not /metrics text, while
recordings and incident bundles store text and parse it again on read. prometheus_client writes
text only from its own registry objects, so this writes the lines directly.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping

from vtop.core.catalog import sample_type
from vtop.core.frame import Sample, Series, TargetScrape

SUFFIXED_TYPES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
TEXT_TYPES = {"counter", "gauge", "histogram", "summary"}
MAX_CACHED_SERIES = 200_000


def exposition_text(scrape: TargetScrape) -> str:
    """The scrape's /metrics text: as received, or written from its samples when it came
    without text (from a Prometheus server)."""
    if scrape.raw_text or not scrape.samples:
        return scrape.raw_text
    return render(scrape.samples, scrape.metric_types)


def parsed_text(scrape: TargetScrape) -> TargetScrape:
    """The scrape with its text held only as far as it was parsed: a payload whose series past
    the cap were left unparsed keeps its parsed samples written as text instead (its junk is
    held no longer than it was read; the frame replays to the same samples)."""
    if not scrape.skipped_series or not scrape.samples:
        return scrape
    return dataclasses.replace(scrape, raw_text=render(scrape.samples, scrape.metric_types))


def render(samples: Iterable[Sample], types: Mapping[str, str]) -> str:
    """Text exposition of samples, one `# TYPE` line per family, families kept together."""
    families: dict[str, list[str]] = {}
    lines_of_name: dict[str, list[str]] = {}
    for sample in samples:
        name = sample.series.name
        lines = lines_of_name.get(name)
        if lines is None:
            family, kind = _family(name, types)
            lines = families.setdefault(family, [f"# TYPE {family} {kind}"])
            lines_of_name[name] = lines
        lines.append(_sample_line(sample))
    return "".join(line + "\n" for lines in families.values() for line in lines)


def _family(name: str, types: Mapping[str, str]) -> tuple[str, str]:
    """The family a sample name is written under, and the family's text type."""
    kind = types.get(name) or sample_type(name)
    kind = kind if kind in TEXT_TYPES else "untyped"
    for suffix in SUFFIXED_TYPES.get(kind, ()):
        if name.endswith(suffix):
            return name.removesuffix(suffix), kind
    return name, kind


def _sample_line(sample: Sample) -> str:
    """`name{labels} value [timestamp_ms]`."""
    value = sample.value
    number = repr(value) if math.isfinite(value) else _special(value)
    line = f"{_series_text(sample.series)} {number}"
    if sample.timestamp is not None:
        line += f" {round(sample.timestamp * 1000)}"
    return line


def _special(value: float) -> str:
    """NaN and the infinities as the text format spells them."""
    if math.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


@functools.lru_cache(maxsize=MAX_CACHED_SERIES)
def _series_text(series: Series) -> str:
    """The series name with its labels, values escaped (remembered: a fleet repeats them)."""
    if not series.labels:
        return series.name
    body = ",".join(f'{name}="{_escaped(value)}"' for name, value in series.labels)
    return f"{series.name}{{{body}}}"


def _escaped(value: str) -> str:
    """A label value with backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
