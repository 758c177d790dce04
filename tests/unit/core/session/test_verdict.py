"""The verdict: early when decisive, refused from the first answer, never OK over a problem no
rule judged, and the mechanism a rule judges before the window waits for it (no server: frames
made here and the real vLLM 0.32 captures)."""

from __future__ import annotations

from tests.support.frames import TARGET, frame_from_text, steady
from tests.support.payloads import fixture
from tests.support.storm import storm_frames
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.frame import Frame
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import (
    MIN_DECISIVE_S,
    EarlyVerdict,
    diagnose_frames,
    needed_window,
)
from vtop.core.session.session import Session
from vtop.core.session.unjudged import problems_seen, watch_note
from vtop.core.session.window_session import one_shot_hold_s
from vtop.text.plain import describe_frame
from vtop.text.report import json_report, text_report


def queued(seconds: int, waiting: float = 6.0) -> list[Frame]:
    """Requests wait behind two running, tokens flow, the cache half full: no rule holds yet
    in a few seconds (Q0 needs 10 s), but the queue is there."""
    return steady(seconds, waiting)


def test_a_queue_no_rule_has_judged_yet_is_incomplete_never_ok() -> None:
    rules, options = load_rules(), DiagnoseOptions(read_gpus=False)
    found = diagnose_frames(TARGET, queued(2), rules, options)  # 1 s: no rule can hold yet
    assert found.verdict == "incomplete" and found.exit_code == 4, found.not_judged
    assert found.not_judged[0].startswith("seen: a queue (6.0 waiting on average"), found
    held = diagnose_frames(TARGET, queued(5), rules, options)  # Q0 holds 4 s of the 4 s window
    assert held.verdict == "warning" and held.triage is not None and held.triage.primary
    assert held.triage.primary.rule.id == "Q0"
    text = text_report(found)
    assert "VERDICT: INCOMPLETE" in text and "seen: a queue" in text and "OK" not in text
    assert json_report(found)["not_judged"] == found.not_judged
    calm = diagnose_frames(TARGET, queued(20, waiting=0), rules, options)
    assert calm.verdict == "ok" and calm.exit_code == 0, calm.not_judged


def test_the_dashboard_and_plain_lines_never_say_ok_over_a_queue() -> None:
    session = Session(load_rules(), DiagnoseOptions(read_gpus=False, window_s=5))
    frames = queued(5)
    for shot in frames:
        session.ingest(shot)
    view = session.target(TARGET)
    now = frames[-1].timestamp
    note = watch_note(view.triage, session.store, TARGET, now, 5)
    assert note == "a queue (6.0 waiting on average); Q0 pending 4 s of 10", note
    (line,) = describe_frame(session, frames[-1])
    assert "| NOT OK, not judged yet: a queue" in line, line
    seen = [str(s) for s in problems_seen(session.store, TARGET, now, 5)]
    assert seen == [note.split(";")[0]]


def test_a_short_hold_asks_half_the_window_or_the_window_less_5_s_never_under_2() -> None:
    assert [one_shot_hold_s(span) for span in (1, 3, 6, 14, 35)] == [2, 2, 3, 9, 30]


def test_a_storm_is_decided_early_and_a_calm_window_is_not() -> None:
    rules, options = load_rules(), DiagnoseOptions(read_gpus=False)
    early = EarlyVerdict(rules, options)
    frames = storm_frames(16)
    decided_at = next(i for i in range(1, len(frames) + 1) if early(frames[:i]))
    span = frames[decided_at - 1].timestamp - frames[0].timestamp
    assert MIN_DECISIVE_S <= span <= 6, span  # M1 twice in a row, from 3 s on
    calm = EarlyVerdict(rules, options)
    assert not any(calm(queued(i, waiting=0)) for i in range(1, 16))
    waiting = EarlyVerdict(rules, options)  # a queue with no limiter decided: the whole window
    assert not any(waiting(queued(i)) for i in range(1, 12))


MM_ZERO = """# TYPE vllm:mm_cache_queries counter
vllm:mm_cache_queries_total{engine="0"} 0
# TYPE vllm:mm_cache_hits counter
vllm:mm_cache_hits_total{engine="0"} 0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 2
"""


def test_a_text_only_model_is_not_held_for_the_multimodal_cache() -> None:
    rules = load_rules()
    text_only = frame_from_text(0.0, MM_ZERO)
    assert needed_window(text_only, rules, DiagnoseOptions()) == (15.0, ())
    images = frame_from_text(0.0, MM_ZERO.replace('_total{engine="0"} 0', '_total{engine="0"} 9'))
    window, longer = needed_window(images, rules, DiagnoseOptions())
    assert window == 35.0 and [r.id for r in longer] == ["MM1"]
    captured = frame_from_text(0.0, fixture("underload"))  # a real text-only vLLM 0.32
    assert "MM1" not in [r.id for r in needed_window(captured, rules, DiagnoseOptions())[1]]
