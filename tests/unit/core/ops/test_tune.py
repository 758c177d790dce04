"""What `vtop tune` acts on: the primary's change; an info finding's only when named; and what it
says when it acts on nothing."""

from __future__ import annotations

import dataclasses

from tests.support.demo import APPLIED, FRAMES
from tests.support.frames import TARGET
from tests.support.frames import frame as numbers_frame
from tests.support.storm import storm
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.ops.tune import pick, why_nothing
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import judged_diagnosis


def test_tune_acts_on_what_calls_for_action_and_on_a_note_only_when_named() -> None:
    frames = FRAMES[: APPLIED - 5]
    target = frames[-1].scrapes[0].target
    diagnosis, _ = judged_diagnosis(target, frames, load_rules(), DiagnoseOptions(read_gpus=False))
    assert diagnosis.triage is not None
    picked = pick(diagnosis, None)
    assert picked is not None and picked[0].rule.id == "M1"
    notes = tuple(f for f in diagnosis.triage.findings if f.rule.severity == "info")
    assert notes and any(change.as_flag() for f in notes for change in f.changes)
    only_notes = dataclasses.replace(
        diagnosis, triage=dataclasses.replace(diagnosis.triage, findings=notes)
    )
    assert pick(only_notes, None) is None  # a note's change is never applied unasked
    named = pick(only_notes, notes[0].rule.id)
    assert named is not None and named[0].rule.id == notes[0].rule.id


def test_a_baseline_that_holds_a_storm_too_briefly_says_so_rather_than_nothing() -> None:
    # a quiet baseline whose storm began in its last 2 s: M1 holds, not yet for what the 9 s
    # window asks (4.5 s), and nothing else fired that it would explain
    types = {"vllm:num_requests_running": "gauge", "vllm:generation_tokens_total": "counter"}
    quiet = [
        numbers_frame(t, types, {"vllm:num_requests_running": 1, "vllm:generation_tokens_total": t})
        for t in range(8)
    ]
    frames = [*quiet, storm(8, start=8), storm(9, start=8)]
    diagnosis, _ = judged_diagnosis(TARGET, frames, load_rules(), DiagnoseOptions(read_gpus=False))
    assert pick(diagnosis, "M1") is None  # M1 holds, not yet for what the window asks
    reason = why_nothing(diagnosis, "M1")
    assert reason.startswith("no finding M1 with a computable change (verdict incomplete"), reason
    assert "M1 pending: held" in reason and "of its 5 s" in reason, reason
    assert "Q1 pending" in reason  # nothing fired: the window is too young for any of them
