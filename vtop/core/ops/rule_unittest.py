"""Rule tests written as data: input series (promtool notation) -> expected findings at times."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vtop.core.catalog import sample_type
from vtop.core.config.inference import Inferences
from vtop.core.config.server_config import NUMERIC
from vtop.core.frame import Frame, Sample, ScrapeStatus, Series, TargetScrape
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.rules.engine import Engine, Triage
from vtop.core.rules.loader import load_rules
from vtop.core.rules.promql.parser import parse_duration
from vtop.core.rules.rule import Rule, RuleFileError
from vtop.core.rules.rule_file import NODE_LOADER, read_text_file, rule_files
from vtop.core.store.presence import GAP
from vtop.core.store.store import INSTANCE, Store

TARGET = "http://rule-test"
TERM = re.compile(
    r"^(?P<start>_|stale|[-+]?(?:[\d.]+(?:[eE][-+]?\d+)?|Inf|NaN))"
    r"(?:(?P<step>[-+](?:[\d.]+(?:[eE][-+]?\d+)?|Inf|NaN))?x(?P<count>\d+))?$",
    re.IGNORECASE,
)
STALE = "stale"
Point = float | str | None
"""A number, None for a gap (no sample: the last value is looked back to), or STALE (a
staleness marker: the series has no value until its next sample)."""


def expand(values: str) -> list[Point]:
    """promtool's series notation: '1 2 _ 3+2x3 0x2 _x2 stale' -> 1 2 None 3 5 7 9 0 0 0
    None None 'stale' (`_xN` and `stale` as promtool reads them: N gaps; a staleness marker)."""
    out: list[Point] = []
    for term in values.split():
        match = TERM.match(term)
        if match is None:
            raise ValueError(f"bad series term {term!r}")
        count = int(match.group("count") or 0)
        start = match.group("start").lower()
        if start in ("_", STALE):
            if start == STALE and match.group("count"):
                raise ValueError(f"bad series term {term!r}: stale takes no repetition")
            out.extend([None if start == "_" else STALE] * (count if match.group("count") else 1))
            continue
        first, step = float(start), float(match.group("step") or 0)
        out.extend(first + step * i for i in range(count + 1))
    return out


@dataclass
class Outcome:
    """What one test file produced."""

    path: Path
    rule_file: str
    failures: list[str] = field(default_factory=list)
    fired: set[str] = field(default_factory=set)


def case_frames(case: dict[str, Any], interval: float) -> list[Frame]:
    """One frame per tick from the case's series."""
    parser = ExpositionParser()
    columns = {
        parser.parse(f"{head} 0").samples[0].series: expand(str(values))
        for head, values in case["series"].items()
    }
    types = {series.name: sample_type(series.name) for series in columns}
    ticks = max(len(values) for values in columns.values())
    frames = []
    for tick in range(ticks):
        by_target: dict[str, list[Sample]] = {}
        for series, values in columns.items():
            point = values[tick] if tick < len(values) else None
            if point != STALE:
                value = GAP if point is None else float(point)
                target = series.label(INSTANCE) or TARGET
                local = Series(series.name, series.without(frozenset({INSTANCE})))
                by_target.setdefault(target, []).append(Sample(local, value))
        scrapes = tuple(
            TargetScrape(target, ScrapeStatus.OK, samples=tuple(samples), metric_types=types)
            for target, samples in by_target.items()
        )
        frames.append(Frame(tick * interval, scrapes))
    return frames


def _infer(
    inferences: Inferences, store: Store, now: float, config: dict[str, float | None]
) -> dict[str, float]:
    """What the session would infer at `now` (capacity per engine from the case's config)."""
    capacity, engines = config.get("vtop:kv_capacity_tokens"), config.get("vtop:num_engines")
    per_engine = capacity / (engines or 1) if capacity else None
    settings = inferences.update(store, TARGET, now, per_engine)
    return {name: float(setting.value) for name, setting in settings.items()}


def _check_inferred(expected: dict[str, Any], inferred: dict[str, float], when: float) -> list[str]:
    """Inferred settings: a number, or `none` for no inference."""
    failures = []
    for name, value in expected.items():
        actual = inferred.get(name)
        wanted = None if str(value) == "none" else float(value)
        if actual != wanted:
            failures.append(f"at {when:g}s: inferred {name} is {actual}, expected {wanted}")
    return failures


def _config(case: dict[str, Any]) -> dict[str, float | None]:
    """The case's `config:` as `vtop:` pseudo-metrics; settings it does not give are unknown."""
    config: dict[str, float | None] = {f"vtop:{name}": None for name in NUMERIC}
    config |= {f"vtop:{name}": float(value) for name, value in (case.get("config") or {}).items()}
    return config


def run_case(rules: list[Rule], case: dict[str, Any]) -> tuple[list[str], set[str]]:
    """Run one case: failures and the rule ids that fired at any checked time."""
    interval = parse_duration(str(case.get("interval", "1s")))
    expectations = {parse_duration(str(e["at"])): e for e in case["expect"]}
    store, engine, failures, fired = Store(), Engine(rules), [], set()
    inferences = Inferences() if str(case.get("infer", "")).lower() == "true" else None
    for frame in case_frames(case, interval):
        store.ingest(frame)
        config, inferred = _config(case), {}
        if inferences is not None:
            inferred = _infer(inferences, store, frame.timestamp, config)
            config |= {
                f"vtop:{k}": float(v) for k, v in inferred.items() if config[f"vtop:{k}"] is None
            }
        triage = _both(engine, store, frame.timestamp, config)
        expectation = expectations.get(frame.timestamp)
        if expectation is not None:
            failures += _check(expectation, triage, frame.timestamp)
            failures += _check_inferred(
                expectation.get("inferred") or {}, inferred, frame.timestamp
            )
            fired |= _all_ids(triage)
    missing = sorted(set(expectations) - {f.timestamp for f in case_frames(case, interval)})
    failures += [f"no tick at {t}s (series too short)" for t in missing]
    return failures, fired


def _both(engine: Engine, store: Store, now: float, config: dict[str, float | None]) -> Triage:
    """The default target's triage plus the fleet rules' (series with an `instance` label are
    other servers)."""
    local, fleet = engine.evaluate(store, TARGET, now, config), engine.evaluate_fleet(store, now)
    return Triage(
        local.findings + fleet.findings,
        local.unchecked + fleet.unchecked,
        local.errors + fleet.errors,
        local.pending + fleet.pending,
    )


def _all_ids(triage: Triage) -> set[str]:
    """Ids of findings and their attached symptoms."""
    return {f.rule.id for f in triage.findings} | {
        s.rule.id for f in triage.findings for s in f.symptoms
    }


def _check(expectation: dict[str, Any], triage: Triage, when: float) -> list[str]:
    """Compare one expectation with the triage at its time."""
    ids = _all_ids(triage)
    failures = [
        f"at {when:g}s: {rid} did not fire (fired: {sorted(ids)})"
        for rid in expectation.get("fire", [])
        if rid not in ids
    ]
    failures += [
        f"at {when:g}s: {rid} fired but should not"
        for rid in expectation.get("quiet", [])
        if rid in ids
    ]
    primary = expectation.get("primary")
    actual = triage.primary.rule.id if triage.primary else None
    if primary is not None and primary != actual:
        failures.append(f"at {when:g}s: primary is {actual}, expected {primary}")
    unchecked = {u.rule.id for u in triage.unchecked}
    failures += [
        f"at {when:g}s: {rid} was checked but should be unchecked"
        for rid in expectation.get("unchecked", [])
        if rid not in unchecked
    ]
    failures += _check_changes(expectation.get("changes") or {}, triage, when)
    return failures


def _check_changes(expected: dict[str, dict[str, Any]], triage: Triage, when: float) -> list[str]:
    """Proposed flag values, per rule id."""
    findings = {f.rule.id: f for f in triage.findings}
    findings |= {s.rule.id: s for f in triage.findings for s in f.symptoms}
    failures = []
    for rule_id, flags in expected.items():
        finding = findings.get(rule_id)
        for flag, value in flags.items():
            proposed = (
                next((c.proposed for c in finding.changes if c.flag == flag), "absent")
                if finding
                else "no finding"
            )
            if str(proposed) != value and not _same_number(proposed, value):
                failures.append(
                    f"at {when:g}s: {rule_id} proposes {flag} {proposed}, expected {value}"
                )
    return failures


def _same_number(actual: object, expected: str) -> bool:
    """True when `actual` is the number `expected` spells."""
    try:
        return isinstance(actual, float) and abs(actual - float(expected)) < 1e-9
    except ValueError:
        return False


def run_test_file(path: Path, rules: list[Rule]) -> Outcome:
    """Run every case of one test file; a file or case that is not a test is a failure naming
    the file and line, never an exception."""
    outcome = Outcome(path, "")
    try:
        text = read_text_file(path)
        document = yaml.load(text, Loader=yaml.BaseLoader)
        lines = _case_lines(text)
    except RuleFileError as error:
        outcome.failures.append(str(error))
        return outcome
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        outcome.failures.append(f"{path}:{line}: invalid YAML: {error}")
        return outcome
    cases = document.get("tests") if isinstance(document, dict) else None
    if not isinstance(cases, list):
        outcome.failures.append(f"{path}:1: expected a mapping with a 'tests' list")
        return outcome
    outcome.rule_file = str(document.get("rule_file", ""))
    for index, case in enumerate(cases):
        where = f"{path}:{lines[index] if index < len(lines) else 1}"
        problem = _case_problem(case)
        if problem is not None:
            outcome.failures.append(f"{where}: {problem}")
            continue
        try:
            failures, fired = run_case(rules, case)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            outcome.failures.append(f"{where}: [{case.get('name', '?')}] not a valid case: {error}")
            continue
        outcome.failures += [f"{path.name} [{case.get('name', '?')}]: {f}" for f in failures]
        outcome.fired |= fired
    return outcome


def _case_lines(text: str) -> list[int]:
    """The line each test case starts on."""
    root = yaml.compose(text, Loader=NODE_LOADER)
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if key.value == "tests" and isinstance(value, yaml.SequenceNode):
            return [node.start_mark.line + 1 for node in value.value]
    return []


def _case_problem(case: Any) -> str | None:
    """What a test case lacks (None when it has what a case needs)."""
    if not isinstance(case, dict):
        return "a test case must be a mapping"
    name = case.get("name", "?")
    for key in ("series", "expect"):
        if not case.get(key):
            return f"test case {name!r} has no {key!r}"
    if not isinstance(case["expect"], list) or not all(
        isinstance(e, dict) and "at" in e for e in case["expect"]
    ):
        return f"test case {name!r}: 'expect' must be a list of entries with 'at'"
    if not isinstance(case["series"], dict):
        return f"test case {name!r}: 'series' must map series to values"
    return None


def run_rule_tests(rules_dir: Path) -> tuple[list[str], list[Outcome]]:
    """All tests in rules_dir/tests; also fails for rule files or rules without a test (a file
    of records only is tested through the rules that use them)."""
    rules = load_rules([rules_dir])
    outcomes = [run_test_file(p, rules) for p in sorted((rules_dir / "tests").glob("*.yaml"))]
    problems = [failure for outcome in outcomes for failure in outcome.failures]
    tested_files = {outcome.rule_file for outcome in outcomes}
    with_rules = {Path(rule.path).name for rule in rules}
    problems += [
        f"{p}: rule file has no test in {rules_dir / 'tests'}"
        for p in rule_files(rules_dir)
        if p.name not in tested_files and p.name in with_rules
    ]
    fired = set().union(*(o.fired for o in outcomes)) if outcomes else set()
    problems += [
        f"{r.path}:{r.line}: rule {r.id} never fires in any test"
        for r in rules
        if r.id not in fired
    ]
    return problems, outcomes
