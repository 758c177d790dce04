"""What Prometheus would refuse in an OpenMetrics payload: the line and the reason, the values
vtop reads unchanged (the real Prometheus judges in tests/e2e/test_openmetrics_refusals.py)."""

from __future__ import annotations

import pytest

from tests.support.frames import frame_from_text
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.ingest.openmetrics_strict import prometheus_rejection
from vtop.core.ingest.quality import REFUSED, QualityChecker


def refusal(text: str) -> tuple[int, str] | None:
    found = prometheus_rejection(text.split("\n"))
    return None if found is None else (found.line_number, found.message)


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("a 1\n\n# EOF\n", 2, "a blank line"),
        ("a 1\n", 2, "a blank line"),
        ("a 1", 1, "the payload does not end with # EOF"),
        ("a 1\n# EOF\nmore", 3, "data after # EOF"),
        ("a 1\n# EOFx\n", 2, "data after # EOF"),
        ("# HELP a\n# EOF\n", 1, "no text in HELP"),
        ("# HELP\n# EOF\n", 1, "no metric name after HELP"),
        ("# TYPE a untyped\n# EOF\n", 1, "an invalid metric type"),
        ("# UNIT a seconds\n# EOF\n", 1, "unit 'seconds' is not a suffix of metric 'a'"),
        ("# note\n# EOF\n", 1, "a comment that is not HELP, TYPE, UNIT or EOF"),
        ("a  1\n# EOF\n", 1, "not `name{labels} value [timestamp]` with single spaces"),
        ('a{x="1",} 1\n# EOF\n', 1, "not `name{labels} value [timestamp]` with single spaces"),
        ('a{x="1",x="2"} 1\n# EOF\n', 1, "a label name given twice"),
        ("a 0x1p3\n# EOF\n", 1, "value '0x1p3' is not a number"),
        ("a 1 -Inf\n# EOF\n", 1, "timestamp '-Inf' is not a finite number"),
        (
            'a 1 # {i="1"} 1\n# EOF\n',
            1,
            "a cannot carry an exemplar (only a name ending _total or _bucket)",
        ),
        (
            'a_total 1 # {i="1"} 1 NaN\n# EOF\n',
            1,
            "exemplar timestamp 'NaN' is not a finite number",
        ),
    ],
)
def test_the_first_line_prometheus_would_fail_the_scrape_on(
    text: str, line: int, reason: str
) -> None:
    assert refusal(text) == (line, reason)


@pytest.mark.parametrize(
    "text",
    [
        '# TYPE a counter\n# HELP a counts\n# UNIT a_s s\na_total{x="1"} 3 # {i="7"} 1 5\n# EOF',
        "# UNIT a_seconds \n# HELP b \nb 1 17\n# EOF",
        '# TYPE g_bucket gauge\ng_bucket 1 # {a="b"} 1\n# EOF\n',
    ],
)
def test_what_prometheus_takes_is_not_flagged(text: str) -> None:
    assert refusal(text) is None
    assert ExpositionParser().parse(text, openmetrics=True).errors == []


def test_a_refused_payload_keeps_its_values_and_is_a_data_quality_defect() -> None:
    text = (
        '# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 4 # {i="1"} 1\n# EOF\n'
    )
    parsed = ExpositionParser().parse(text, openmetrics=True)
    assert [(s.series.name, s.value) for s in parsed.samples] == [
        ("vllm:num_requests_waiting", 4.0)
    ]
    assert [(e.line_number, e.refused_by_prometheus) for e in parsed.errors] == [(2, True)]
    frame = frame_from_text(0.0, text, openmetrics=True)
    defects = QualityChecker().check(frame.scrapes[0], {})
    assert [(d.kind, d.line) for d in defects] == [(REFUSED, 2)]
    assert "cannot carry an exemplar" in defects[0].text


def test_a_line_vtop_cannot_read_is_not_reported_twice() -> None:
    parsed = ExpositionParser().parse("a{x 1\n# EOF\n", openmetrics=True)
    assert [(e.line_number, e.refused_by_prometheus) for e in parsed.errors] == [(1, False)]
