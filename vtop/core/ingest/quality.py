"""The data quality of one scrape: what the endpoint exposes that no vLLM can, with its line.

The store refuses impossible values (see `Store._write`); this names them for people: malformed
lines, impossible values, series exposed twice, a counter going back without a restart, and
histogram buckets whose cumulative counts fall as `le` grows.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import lt

from vtop.core.frame import Labels, Sample, SampleColumns, Series, TargetScrape, picker
from vtop.core.histogram import optional_float

SHOWN = 120
REFUSED = "Prometheus would refuse this scrape"
"""An OpenMetrics line vtop reads but Prometheus would fail the whole scrape on."""
PickFloats = Callable[[Sequence[float]], tuple[float, ...]]


@dataclass(frozen=True)
class Defect:
    """One thing wrong with a scrape, located where possible."""

    kind: str
    line: int | None
    text: str

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.kind}: {self.text}"


class QualityChecker:
    """Checks one target's scrapes; the histogram layout is worked out once per payload layout."""

    def __init__(self) -> None:
        self._layout: tuple[Series, ...] | None = None
        self._groups: list[list[int]] = []
        self._pick_pairs: tuple[PickFloats, PickFloats] | None = None
        """The lower and the upper bucket of every adjacent pair, picked at C speed."""

    def check(
        self, scrape: TargetScrape, store_defects: dict[str, list[Series]]
    ) -> tuple[Defect, ...]:
        """Every defect of the scrape: parse errors, the store's refusals, bucket order."""
        defects = [
            Defect(
                REFUSED if e.refused_by_prometheus else "malformed line",
                e.line_number,
                f"{e.message}: {_shown(e.line)}" if e.refused_by_prometheus else _shown(e.line),
            )
            for e in scrape.parse_errors
        ]
        lines: list[str] | None = None
        for kind, found in store_defects.items():
            lines = lines if lines is not None else scrape.raw_text.split("\n")
            defects += [_located(kind, series, lines) for series in found]
        for series in self._unordered_buckets(scrape.samples):
            lines = lines if lines is not None else scrape.raw_text.split("\n")
            defects.append(_located("histogram buckets not monotonic", series, lines))
        return tuple(defects)

    def _unordered_buckets(self, samples: Sequence[Sample]) -> list[Series]:
        """The first bucket of each vLLM histogram whose cumulative count falls below the one
        before it."""
        series = (
            samples.series if isinstance(samples, SampleColumns) else tuple(s[0] for s in samples)
        )
        if series is not self._layout:
            self._layout, self._groups = series, _bucket_groups(series)
            self._pick_pairs = _pair_pickers(self._groups)
        values = samples.values if isinstance(samples, SampleColumns) else [s[1] for s in samples]
        if self._pick_pairs is None:
            return []
        lower, upper = self._pick_pairs
        if not any(map(lt, upper(values), lower(values))):
            return []  # the usual case, decided without a loop in Python
        found = []
        for group in self._groups:
            for before, after in itertools.pairwise(group):
                if values[after] < values[before]:
                    found.append(series[after])
                    break
        return found


def _bucket_groups(series: tuple[Series, ...]) -> list[list[int]]:
    """Indices of each vLLM histogram's buckets, by increasing `le`."""
    groups: dict[tuple[str, Labels], list[tuple[float, int]]] = {}
    for index, one in enumerate(series):
        if one.name.startswith("vllm:") and one.name.endswith("_bucket"):
            upper = optional_float(one.label("le"))
            if upper is not None:
                key = (one.name, one.without(frozenset({"le"})))
                groups.setdefault(key, []).append((upper, index))
    return [[index for _, index in sorted(members)] for members in groups.values()]


def _pair_pickers(groups: list[list[int]]) -> tuple[PickFloats, PickFloats] | None:
    """Getters of the lower and the upper bucket of every adjacent pair in the groups."""
    pairs = [pair for group in groups for pair in itertools.pairwise(group)]
    if not pairs:
        return None
    return picker([before for before, _ in pairs]), picker([after for _, after in pairs])


def _located(kind: str, series: Series, lines: list[str]) -> Defect:
    """A defect with the line that exposes the series (its name and every label value; for a
    duplicate, the last such line, which is the one left out)."""
    values = [value for _, value in series.labels]
    numbered = list(enumerate(lines, start=1))
    for number, line in reversed(numbered) if kind == "duplicate series" else numbered:
        if line.startswith(series.name) and all(f'"{value}"' in line for value in values):
            return Defect(kind, number, _shown(line))
    return Defect(kind, None, _shown(series.name))


def _shown(line: str) -> str:
    return line if len(line) <= SHOWN else line[: SHOWN - 3] + "..."
