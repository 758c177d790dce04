"""A canary as a line and as JSON: what a cut stream and a finished one say of their usage and
their silence."""

from __future__ import annotations

import dataclasses

from vtop.core.frame import ProbeResult, RequestSpan
from vtop.core.ops.front_door import EngineView, FrontDoor, with_canary_spans
from vtop.text.probe import canary_json, canary_line, canary_span_lines

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


def test_each_canary_s_engine_time_beside_what_the_path_added() -> None:
    held = dataclasses.replace(
        FINISHED_WITHOUT_USAGE, first_token_s=2.3, request_id="vtop-canary-1", trace_id="ab" * 16
    )
    lost = dataclasses.replace(held, request_id="vtop-canary-2", trace_id="cd" * 16)
    span = RequestSpan(
        "cmpl-vtop-canary-1-0",
        "ab" * 16,
        "",
        0.0,
        2.4,
        0.002,
        0.3,
        0.05,
        2.0,
        2.05,
        2.4,
        12,
        64,
        64,
    )
    door = FrontDoor("http://proxy", (held, lost), EngineView(None), ())
    none = with_canary_spans(door, [], ["grpc://127.0.0.1:4317"])
    assert "no request span arrived" in "\n".join(canary_span_lines(none))
    lines = canary_span_lines(with_canary_spans(door, [span], ["grpc://127.0.0.1:4317"]))
    assert "vtop-canary-1: first token 300 ms in the engine" in lines[2]
    assert lines[2].endswith("the client's 2.30 s: 2.00 s on the path"), lines
    assert lines[3].endswith("vtop-canary-2: no span arrived for it"), lines
    shown = canary_json(held, with_canary_spans(door, [span], []))
    assert (
        abs(shown["engine_span"]["path_s"] - 2.0) < 1e-9
        and canary_json(lost, door)["engine_span"] is None
    )
