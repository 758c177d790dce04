"""Prometheus as the oracle for vtop's PromQL: vtop's answers become `promtool test rules`
expectations, and promtool's report of what Prometheus got instead is compared with tolerance
(promtool compares exactly, and a NaN never equals itself there)."""

from __future__ import annotations

import math
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.support.promql_strategies import EVAL_TIMES_S, EXACT_TIMES_S, INTERVAL_S, Case
from vtop.core.ops.rule_unittest import case_frames
from vtop.core.rules.promql.evaluator import FLEET, Context, EvaluationError, evaluate_named
from vtop.core.rules.promql.parser import PromQLError, parse
from vtop.core.store.store import Store

Answer = dict[frozenset[tuple[str, str]], float] | str
"""Samples by label set, or the error message when the expression cannot be evaluated."""
TAG = re.compile(r"# c(?P<case>\d+)t(?P<time>\d+)")
REPORT = re.compile(r'^\s*expr: "(?P<expr>.*)", time: [^,]+,(?P<rest>.*)$')
SAMPLE = re.compile(r"\{(?P<labels>[^}]*)\} (?P<value>[^,\s]+)")
LABEL = re.compile(r'(?P<name>\w+)="(?P<value>(?:[^"\\]|\\.)*)"')
RELATIVE_TOLERANCE = 1e-9
"""Sums in another order (Prometheus adds in its own series order) differ in the last bits."""


@dataclass(frozen=True)
class Disagreement:
    """One expression at one time where vtop and Prometheus differ."""

    case: Case
    time_s: int
    vtop: Answer
    prometheus: Answer

    def __str__(self) -> str:
        series = "\n".join(f"      {head}: {values}" for head, values in self.case.series)
        return (
            f"{self.case.expr} at {self.time_s}s\n    vtop:       {_show(self.vtop)}\n"
            f"    Prometheus: {_show(self.prometheus)}\n    series:\n{series}"
        )


def _show(answer: Answer) -> str:
    if isinstance(answer, str):
        return f"error: {answer}"
    items = sorted((sorted(labels), value) for labels, value in answer.items())
    return ", ".join(f"{dict(labels)} {value!r}" for labels, value in items) or "(empty)"


def vtop_answer(case: Case, time_s: int) -> Answer:
    """What vtop evaluates, over the store the rule tests build from the same notation."""
    store = Store()
    for frame in case_frames({"series": dict(case.series)}, float(INTERVAL_S)):
        store.ingest(frame)
    try:
        value = evaluate_named(
            parse(case.expr),
            Context(store, FLEET, float(time_s), from_first_sample=time_s not in EXACT_TIMES_S),
        )
    except (EvaluationError, PromQLError) as error:
        return str(error)
    if isinstance(value, float):
        return {frozenset(): value}
    return {frozenset(labels): element for labels, element in value.items()}


def _labels_text(labels: frozenset[tuple[str, str]]) -> str:
    return "{" + ", ".join(f'{name}="{value}"' for name, value in sorted(labels)) + "}"


def _yaml_value(value: float) -> float | str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    return value


def promtool_file(cases: list[Case], answers: dict[tuple[int, int], Answer]) -> str:
    """One promtool test file: a group per case, an expectation per evaluation time."""
    groups = []
    for index, case in enumerate(cases):
        tests = []
        for time_s in EVAL_TIMES_S:
            answer = answers[index, time_s]
            samples = [] if isinstance(answer, str) else answer.items()
            tests.append(
                {
                    "expr": f"{case.expr} # c{index}t{time_s}",
                    "eval_time": f"{time_s}s",
                    "exp_samples": [
                        {"labels": _labels_text(labels), "value": _yaml_value(value)}
                        for labels, value in samples
                    ],
                }
            )
        groups.append(
            {
                "interval": f"{INTERVAL_S}s",
                "input_series": [
                    {"series": head, "values": values} for head, values in case.series
                ],
                "promql_expr_test": tests,
            }
        )
    text = yaml.safe_dump({"rule_files": [], "evaluation_interval": "1m", "tests": groups})
    return text.replace("'.nan'", ".nan").replace("'.inf'", ".inf").replace("'-.inf'", "-.inf")


def run_promtool(promtool: str, text: str, workdir: Path) -> str:
    """promtool's report on the file (it exits 1 when any expectation differs)."""
    path = workdir / "conformance_test.yaml"
    path.write_text(text)
    result = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=300
    )
    output = result.stdout + result.stderr
    if result.returncode != 0 and (result.returncode != 1 or "FAILED" not in output):
        raise AssertionError(f"promtool could not run the file:\n{output[-4000:]}")
    return output


def _parse_got(text: str) -> Answer:
    if text.strip() == "nil":
        return {}
    answer: dict[frozenset[tuple[str, str]], float] = {}
    for sample in SAMPLE.finditer(text):
        labels = frozenset((m["name"], m["value"]) for m in LABEL.finditer(sample["labels"]))
        answer[labels] = float(sample["value"].replace("+Inf", "inf").replace("-Inf", "-inf"))
    return answer


def prometheus_reports(output: str) -> dict[tuple[int, int], Answer]:
    """What Prometheus got for every expectation promtool reported as different."""
    reports: dict[tuple[int, int], Answer] = {}
    lines = output.splitlines()
    for number, line in enumerate(lines):
        report = REPORT.match(line)
        tag = TAG.search(line)
        if report is None or tag is None:
            continue
        key = (int(tag["case"]), int(tag["time"]))
        if "err:" in report["rest"]:
            reports[key] = report["rest"].split("err:", 1)[1].strip()
            continue
        got = next(
            (rest.split("got:", 1)[1] for rest in lines[number + 1 : number + 3] if "got:" in rest),
            None,
        )
        if got is None:
            raise AssertionError(f"cannot read promtool's report:\n{line}")
        reports[key] = _parse_got(got)
    return reports


def same(vtop: Answer, prometheus: Answer) -> bool:
    """Both errors, or the same label sets with values equal within the tolerance (NaN = NaN)."""
    if isinstance(vtop, str) or isinstance(prometheus, str):
        return isinstance(vtop, str) and isinstance(prometheus, str)
    return same_samples(vtop, prometheus, RELATIVE_TOLERANCE)


Samples = dict[frozenset[tuple[str, str]], float]


def same_samples(first: Samples, second: Samples, tolerance: float) -> bool:
    """The same label sets with values equal within a relative tolerance (NaN equals NaN)."""
    if first.keys() != second.keys():
        return False
    return all(_close(first[labels], second[labels], tolerance) for labels in first)


def _close(a: float, b: float, tolerance: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=tolerance, abs_tol=1e-12)


def disagreements(
    cases: list[Case], answers: dict[tuple[int, int], Answer], output: str
) -> list[Disagreement]:
    """Every expectation where Prometheus's answer differs from vtop's."""
    reports = prometheus_reports(output)
    found = []
    for (index, time_s), answer in answers.items():
        prometheus = reports.get((index, time_s))
        if prometheus is None:
            if isinstance(answer, str):
                found.append(Disagreement(cases[index], time_s, answer, {}))
            continue
        if not same(answer, prometheus):
            found.append(Disagreement(cases[index], time_s, answer, prometheus))
    return found


AMBIGUOUS_MATCH = "multiple matches for labels"
"""vtop's error where a match is ambiguous before a comparison filters it (Prometheus 3)."""
COMPARISON = re.compile(r"(==|!=|>=|<=|>(?!=)|<(?!=))(?!\s*bool\b)", re.IGNORECASE)
BRACES = re.compile(r"(\{[^}]*\})")


def with_bool(expr: str) -> str:
    """The expression with every comparison given `bool` (label matchers left alone): it then
    filters nothing, so Prometheus 2.42 checks every match as Prometheus 3 does before
    filtering."""
    parts = BRACES.split(expr)
    return "".join(p if p.startswith("{") else COMPARISON.sub(r"\1 bool", p) for p in parts)


def ambiguous_in_prometheus_3(
    found: list[Disagreement], promtool: str, scratch: Path
) -> list[Disagreement]:
    """The disagreements that are Prometheus 3's stricter matching, proven by Prometheus 2.42
    itself: vtop refuses an ambiguous match that 2.42 let pass because a comparison filtered
    one side, and 2.42 fails the same expression once its comparisons filter nothing."""
    candidates = [
        d
        for d in found
        if isinstance(d.vtop, str)
        and d.vtop.startswith(AMBIGUOUS_MATCH)
        and not isinstance(d.prometheus, str)
    ]
    if not candidates:
        return []
    cases = [Case(d.case.series, with_bool(d.case.expr)) for d in candidates]
    empty: dict[tuple[int, int], Answer] = {
        (index, time_s): {} for index in range(len(cases)) for time_s in EVAL_TIMES_S
    }
    reports = prometheus_reports(run_promtool(promtool, promtool_file(cases, empty), scratch))
    return [
        d
        for index, d in enumerate(candidates)
        if isinstance(reports.get((index, d.time_s)), str)
        and AMBIGUOUS_MATCH in str(reports[index, d.time_s])
    ]
