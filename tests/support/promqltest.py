"""A runner for Prometheus's own PromQL test files (the `promqltest` format of
promql/promqltest/testdata in Prometheus's repository): `load` blocks of series in promtool's
notation, `eval instant at T EXPR` / `eval range from A to B step S EXPR` with the expected
samples, `clear`. vtop evaluates every case it can read and each answer is compared with the
file's, as Prometheus's own test compares them (a relative tolerance of 1e-6).

What is out of vtop's subset is counted apart, never as agreement: an expression beyond the
documented subset (vtop's parser refuses an unsupported function, `@`, a subquery, a negative
or computed offset; any other refusal counts as a failure), a case over native histograms
(`{{...}}`, `load_with_nhcb`), one expecting a string, and the files of features behind
Prometheus's feature flags. An expected annotation (a warning, an info) is not checked, the
values beside it are. Order (`expect ordered`) is not checked: vtop's vectors are
maps. A case whose series have no `instance` label is evaluated as the conformance test does,
over one target, and that target's instance label is removed from the answer.

Run over Prometheus's files: `python -m tests.support.promqltest DIR`; the suite runs it over
the cases in tests/data/promqltest (Prometheus's files are not part of this repository).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.promql_oracle import same_samples
from vtop.core.catalog import sample_type
from vtop.core.frame import Frame, Sample, ScrapeStatus, Series, TargetScrape
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.ops.rule_unittest import STALE, TARGET, Point, expand
from vtop.core.rules.promql.evaluator import FLEET, Context, EvaluationError, evaluate_named
from vtop.core.rules.promql.parser import PromQLError, parse, parse_duration
from vtop.core.store.presence import GAP
from vtop.core.store.store import INSTANCE, Store

Labels = frozenset[tuple[str, str]]
Answer = dict[Labels, float]
RELATIVE_TOLERANCE = 1e-6
"""Prometheus's promqltest compares with this epsilon."""
EVAL = re.compile(
    r"^eval(?P<fail>_fail)?(?P<other>_\w+)? +(?:instant +at +(?P<at>\S+)"
    r"|range +from +(?P<start>\S+) +to +(?P<end>\S+) +step +(?P<step>\S+)) +(?P<expr>.+)$"
)
EXPECTED = re.compile(
    r'^(?P<head>[^{\s]*(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?)\s+(?P<values>\S.*)$'
)
"""A series head (its label values may hold braces) and what follows it."""
SCALAR = re.compile(r"^[-+]?(?:[\d.]+(?:[eE][-+]?\d+)?|Inf|NaN)$", re.IGNORECASE)
EXPERIMENTAL = {
    "type_and_unit.test": "type and unit labels",
    "extended_vectors.test": "anchored and smoothed ranges",
    "fill-modifier.test": "fill modifiers",
    "duration_expression.test": "duration expressions",
    "start_timestamps.test": "start timestamps",
    "name_label_dropping.test": "delayed name removal",
}
"""Files for features behind Prometheus's feature flags, off in a Prometheus a user runs
(Prometheus's own test engine turns them all on, delayed name removal included)."""
BEYOND_SUBSET = re.compile(
    r"@|\[[^\]]*:[^\]]*\]|\[[^\]]*[-+*/^()]|offset\s*[-+(]|offset\s+[a-z]|\batan2\b"
    r"|\b(?:topk|bottomk|quantile|stddev|stdvar|count_values|group|limitk|limit_ratio)"
    r"\s*(?:\(|by\b|without\b)|\b(?:fill|fill_left|fill_right)\s*\(|\b(?:smoothed|anchored)\b",
    re.IGNORECASE,
)
"""PromQL beyond vtop's documented subset: `@`, subqueries, negative or computed offsets and
durations, the aggregations and operators vtop does not implement."""
OUTSIDE = ("expect string", "expect range vector")
"""Expectations vtop has no answer for: string results, a raw range vector. An expected
annotation (`expect warn`, `expect info`) is not checked; the values beside it are."""


@dataclass
class Case:
    """One `eval` with what it expects."""

    path: str
    line: int
    expr: str
    times: list[float]
    expect_fail: bool = False
    expected: list[tuple[str, str]] = field(default_factory=list)
    """(series head, values in promtool's notation) lines."""
    outside: str = ""
    """Why the case is outside vtop's subset, or empty."""


@dataclass
class Scope:
    """The series loaded since the last `clear`."""

    series: dict[str, tuple[float, list[Point]]] = field(default_factory=dict)
    native: set[str] = field(default_factory=set)
    """Names of native-histogram series (their samples are not loaded; a `load_with_nhcb`
    block's classic series are, its native ones go by the base name)."""
    unread: set[str] = field(default_factory=set)
    """Names of series in a notation promtool's rule tests do not use (not loaded)."""


@dataclass
class Tally:
    """What a run found: counts by outcome and the differences in words."""

    counts: Counter[str] = field(default_factory=Counter)
    differences: list[str] = field(default_factory=list)


def seconds(text: str) -> float:
    """A promqltest time: '0', '50m', '1h5m', '-1m'."""
    sign, body = (-1.0, text[1:]) if text.startswith("-") else (1.0, text)
    if re.fullmatch(r"[\d.]+", body):
        return sign * float(body)
    if not re.search(r"[1-9]", body):
        return 0.0
    return sign * parse_duration(body)


def _series_line(line: str) -> tuple[str, str]:
    found = EXPECTED.match(line.strip())
    if found is None:
        raise ValueError(f"cannot read the series line {line.strip()!r}")
    return found["head"], found["values"]


def read_cases(path: Path) -> Iterator[tuple[Scope, Case]]:
    """Every case of a file, with the series loaded for it."""
    lines = path.read_text().splitlines()
    scope = Scope()
    index = 0
    while index < len(lines):
        text = lines[index].strip()
        index += 1
        if not text or text.startswith("#"):
            continue
        if text == "clear":
            scope = Scope()
        elif text.startswith("load"):
            native = text.startswith("load_with_nhcb")
            step = seconds(text.split()[1])
            while index < len(lines) and lines[index][:1] in (" ", "\t") and lines[index].strip():
                line = lines[index]
                index += 1
                try:
                    head, values = _series_line(line)
                except ValueError:
                    scope.unread.add(line.strip().partition("{")[0])
                    continue
                if native:  # both the classic series and, under the base name, a native one
                    scope.native.add(re.sub(r"_(bucket|count|sum)$", "", head.partition("{")[0]))
                elif "{{" in values:
                    scope.native.add(head.partition("{")[0])
                    continue
                try:
                    scope.series[head] = (step, expand(values))
                except ValueError:
                    scope.unread.add(head.partition("{")[0])
        elif text.startswith("eval"):
            case, index = _case(path, lines, index, text)
            yield Scope(dict(scope.series), set(scope.native), set(scope.unread)), case


def _case(path: Path, lines: list[str], index: int, text: str) -> tuple[Case, int]:
    match = EVAL.match(text)
    if match is None:
        raise ValueError(f"{path}:{index}: cannot read {text!r}")
    if match["at"] is not None:
        times = [seconds(match["at"])]
    else:
        start, end, step = seconds(match["start"]), seconds(match["end"]), seconds(match["step"])
        times = [start + step * i for i in range(round((end - start) / step) + 1)]
    case = Case(str(path.name), index, match["expr"].strip(), times, bool(match["fail"]))
    while index < len(lines) and lines[index][:1] in (" ", "\t") and lines[index].strip():
        line = lines[index].strip()
        index += 1
        if line.startswith("expect fail"):
            case.expect_fail = True
        elif line.startswith(OUTSIDE):
            case.outside = case.outside or line.split()[1]
        elif line.startswith("expect"):
            continue
        elif SCALAR.match(line.split()[0]) and "{" not in line:
            case.expected.append(("", line))
        else:
            found = EXPECTED.match(line)
            if found is None or "{{" in line:
                case.outside = case.outside or "native histogram"
            else:
                case.expected.append((found["head"], found["values"]))
    return case, index


def _parsed_head(head: str) -> Series:
    samples = ExpositionParser().parse(f"{head} 0").samples
    if len(samples) != 1:
        raise ValueError(f"cannot read the series head {head!r}")
    return samples[0].series


def scope_store(scope: Scope) -> Store:
    """The loaded series in a store, a tick wherever any series has a sample."""
    columns = {
        _parsed_head(head): (round(step * 1000), values)
        for head, (step, values) in scope.series.items()
    }
    times_ms = sorted({step * i for step, values in columns.values() for i in range(len(values))})
    types = {series.name: sample_type(series.name) for series in columns}
    store = Store()
    for time_ms in times_ms:
        by_target: dict[str, list[Sample]] = {}
        for series, (step, values) in columns.items():
            slot, off_step = divmod(time_ms, step)
            point = values[slot] if not off_step and slot < len(values) else None
            if point == STALE:
                continue
            target = series.label(INSTANCE) or TARGET
            value = GAP if point is None else float(point)
            by_target.setdefault(target, []).append(Sample(series, value))
        scrapes = tuple(
            TargetScrape(target, ScrapeStatus.OK, samples=tuple(samples), metric_types=types)
            for target, samples in by_target.items()
        )
        time = time_ms / 1000
        store.ingest(Frame(time, scrapes))
    return store


def vtop_answer(store: Store, expr: str, when: float) -> Answer:
    """vtop's answer at one time (raises EvaluationError or PromQLError as vtop does)."""
    value = evaluate_named(parse(expr), Context(store, FLEET, when, from_first_sample=False))
    if isinstance(value, float):
        return {frozenset(): value}
    return {
        frozenset(pair for pair in labels if pair != (INSTANCE, TARGET)): element
        for labels, element in value.items()
    }


def expected_answers(case: Case) -> list[Answer]:
    """The file's expected answer at each of the case's times."""
    answers: list[Answer] = [{} for _ in case.times]
    for head, values in case.expected:
        labels = frozenset() if not head else frozenset(_labels_of(head))
        points = expand(values) if len(case.times) > 1 else [float(values.split()[0])]
        for position, point in enumerate(points[: len(case.times)]):
            if point is not None and point != STALE:
                answers[position][labels] = float(point)
    return answers


def _labels_of(head: str) -> Iterator[tuple[str, str]]:
    if head == "{}":
        return
    series = _parsed_head(head if head.partition("{")[0] else "x" + head)
    if head.partition("{")[0]:
        yield ("__name__", series.name)
    yield from series.labels


def _outside(scope: Scope, case: Case) -> str:
    if case.outside:
        return case.outside
    if case.path in EXPERIMENTAL:
        return EXPERIMENTAL[case.path]
    for names, why in ((scope.native, "native histogram"), (scope.unread, "series notation")):
        used = any(name and re.search(rf"\b{re.escape(name)}\b", case.expr) for name in names)
        nameless = "__name__" in case.expr or re.search(r"(?<![\w:])\{", case.expr)
        if names and (used or nameless):
            return why
    return ""


def judge(scope: Scope, case: Case) -> tuple[str, str]:
    """(outcome, what differs): agree, differ, refused (vtop cannot read the expression),
    or outside (the case needs what vtop's subset has not)."""
    why = _outside(scope, case)
    if why:
        return f"outside ({why})", ""
    try:
        parse(case.expr)
    except PromQLError as error:
        if str(error).startswith("unsupported function") or BEYOND_SUBSET.search(case.expr):
            return "outside (beyond the subset)", ""
        return ("agree", "") if case.expect_fail else ("refused", str(error))
    try:
        store, expected = scope_store(scope), expected_answers(case)
    except ValueError:
        return "outside (series notation)", ""
    got: list[Answer] = []
    try:
        got = [vtop_answer(store, case.expr, when) for when in case.times]
    except (EvaluationError, PromQLError) as error:
        return ("agree", "") if case.expect_fail else ("differ", f"vtop: error {error}")
    if case.expect_fail:
        return "differ", "Prometheus fails, vtop answers"
    for when, vtop, wanted in zip(case.times, got, expected, strict=True):
        if not same_samples(vtop, wanted, RELATIVE_TOLERANCE):
            return "differ", f"at {when:g}s vtop {_show(vtop)}; Prometheus {_show(wanted)}"
    return "agree", ""


def _show(answer: Answer) -> str:
    items = sorted((sorted(labels), value) for labels, value in answer.items())
    return ", ".join(f"{dict(labels)} {value!r}" for labels, value in items) or "(empty)"


def run(paths: list[Path]) -> Tally:
    """Judge every case of the files."""
    tally = Tally()
    for path in paths:
        for scope, case in read_cases(path):
            outcome, difference = judge(scope, case)
            tally.counts[outcome] += 1
            if outcome in ("differ", "refused"):
                tally.differences.append(
                    f"{case.path}:{case.line} {outcome}: {case.expr}\n    {difference}"
                )
    return tally


def main(argv: list[str] | None = None) -> int:
    """Report how vtop's answers compare with a folder of promqltest files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    tally = run(sorted(args.folder.glob("*.test")))
    for line in tally.differences:
        print(line)
    for outcome, count in sorted(tally.counts.items()):
        print(f"{outcome}: {count}")
    return 1 if tally.counts["differ"] or tally.counts["refused"] else 0


if __name__ == "__main__":
    sys.exit(main())
