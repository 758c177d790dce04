"""A canary as a line and as JSON: what a cut stream and a finished one say of their usage and
their silence."""

from __future__ import annotations

from vtop.core.frame import ProbeResult
from vtop.text.probe import canary_json, canary_line

CUT = ProbeResult(
    "http://proxy",
    "completions",
    0.0,
    status=200,
    duration_s=1.01,
    error="the stream ended without data: [DONE] (cut)",
)
FINISHED_WITHOUT_USAGE = ProbeResult(
    "http://proxy",
    "completions",
    0.0,
    status=200,
    duration_s=0.4,
    reads=((0.1, 300), (0.4, 300)),
    first_byte_s=0.1,
    first_token_s=0.1,
    tokens=2,
    finished=True,
)


def test_a_cut_stream_says_nothing_of_its_usage_and_was_silent_until_the_cut() -> None:
    line = canary_line(CUT)
    assert "usage" not in line and "longest silence 1.01 s" in line, line
    shown = canary_json(CUT)
    assert shown["usage_in_stream"] is None and shown["max_silence_s"] == 1.01


def test_a_finished_stream_without_its_usage_says_missing() -> None:
    assert "usage MISSING" in canary_line(FINISHED_WITHOUT_USAGE)
    assert canary_json(FINISHED_WITHOUT_USAGE)["usage_in_stream"] is False


def test_the_json_carries_the_read_gap_the_slow_path_rule_reads() -> None:
    assert (
        canary_json(FINISHED_WITHOUT_USAGE)["read_gap_s"] == FINISHED_WITHOUT_USAGE.mean_read_gap_s
    )
    assert canary_json(CUT)["read_gap_s"] is None
