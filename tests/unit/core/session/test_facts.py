"""What every view says of one server: its facts from the session (state, model, engines, age,
findings with the fleet's about it) and the dashboard's detail (TTFT buckets, what no rule
judged), read from real-shaped frames."""

from __future__ import annotations

import dataclasses

from tests.support.frames import TARGET, down_frame, steady
from tests.support.storm import storm_frames
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.frame import Frame
from vtop.core.rules.engine import Triage
from vtop.core.rules.loader import load_rules
from vtop.core.session.facts import target_detail, target_facts
from vtop.core.session.session import Session


def session_of(frames: list[Frame]) -> Session:
    session = Session(load_rules(), DiagnoseOptions(read_gpus=False, window_s=5.0))
    for frame in frames:
        session.ingest(frame)
    return session


def test_a_storming_server_is_live_with_its_model_findings_and_buckets() -> None:
    frames = storm_frames(16)
    session = session_of(frames)
    now = frames[-1].timestamp
    facts = target_facts(session, session.targets[TARGET], now)
    assert facts.state == "live" and facts.current and facts.last_ok == now
    assert facts.model != "?" and facts.engines == 1
    assert facts.watched_s == now - frames[0].timestamp
    assert facts.triage is not None and facts.triage.primary is not None
    assert facts.triage.primary.rule.id == "M1" and facts.exited is None
    detail = target_detail(session, facts, now, 5.0)
    assert detail.unjudged == "" and detail.last_probe is None  # M1 judged it: nothing unjudged


def test_a_server_that_stopped_answering_keeps_its_last_answer() -> None:
    frames = storm_frames(8)
    frames += [down_frame(8.0 + t) for t in range(3)]
    session = session_of(frames)
    facts = target_facts(session, session.targets[TARGET], frames[-1].timestamp)
    assert facts.state == "unreachable" and not facts.current
    assert facts.last_ok == 7.0 and facts.model != "?"


def test_a_fleet_finding_about_the_server_follows_its_own() -> None:
    frames = storm_frames(16)
    session = session_of(frames)
    own = session.targets[TARGET].triage
    assert own is not None and own.findings
    about = dataclasses.replace(own.findings[0], labels=(("instance", TARGET),))
    session.fleet.triage = Triage((about,), ())
    facts = target_facts(session, session.targets[TARGET], frames[-1].timestamp)
    assert facts.fleet_about == (about,)
    assert facts.triage is not None and facts.triage.findings[-1] is about


def test_a_queue_no_rule_judged_yet_is_in_the_detail() -> None:
    frames = steady(8, waiting=6.0, kv=0.3)
    session = session_of(frames)
    facts = target_facts(session, session.targets[TARGET], frames[-1].timestamp)
    detail = target_detail(session, facts, frames[-1].timestamp, 5.0)
    assert "waiting" in detail.unjudged or "pending" in detail.unjudged, detail.unjudged
