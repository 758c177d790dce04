"""What `vtop tune` acts on: the primary's change; an info finding's only when named."""

from __future__ import annotations

import dataclasses

from tests.support.demo import APPLIED, FRAMES
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.ops.tune import pick
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
