"""Diagnose report, JSON schema, exit codes and config assembly (no server needed)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time

import pytest

from tests.support.frames import TARGET, down_frame, frame_from_text
from tests.support.frames import frame as numbers_frame
from tests.support.http_server import QuietHandler, serving_handler
from tests.support.payloads import fixture
from tests.support.storm import storm_frames
from tests.support.vtop_cli import vtop
from vtop.core.frame import Event, Frame, InFlightRequest, ScrapeStatus, TargetScrape
from vtop.core.rules.engine import ProposedChange
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import (
    DiagnoseOptions,
    diagnose_frames,
    diagnosis,
    needed_window,
)
from vtop.core.session.session import Session, watching_session
from vtop.core.session.window_session import judged_window
from vtop.core.store.ingest import RingWriter
from vtop.text.report import change_json, json_report, text_report


def test_storm_frames_give_a_critical_primary_with_a_flag_diff() -> None:
    options = DiagnoseOptions(vllm_args="vllm serve ./model --max-num-seqs 16")
    diagnosis = diagnose_frames(TARGET, storm_frames(), load_rules(), options)
    assert diagnosis.exit_code == 2 and diagnosis.verdict == "critical"
    text = text_report(diagnosis)
    assert "PRIMARY" in text and "M1 preemption storm" in text
    assert "  - --max-num-seqs 16" in text and "  + --max-num-seqs 1" in text
    report = json_report(diagnosis)
    assert report["schema"] == "vtop.diagnose/2"
    assert report["primary"]["id"] == "M1"
    assert report["primary"]["changes"][0]["argument"] == "--max-num-seqs 1"
    assert "Q1" in [s["id"] for s in report["primary"]["symptoms"]]
    json.dumps(report)


def test_json_types_every_value_for_a_script() -> None:
    options = DiagnoseOptions(vllm_args="vllm serve ./model --max-num-seqs 16")
    report = json_report(diagnose_frames(TARGET, storm_frames(), load_rules(), options))
    change = report["primary"]["changes"][0] if report["primary"] else None
    every = [c for f in report["findings"] for c in f["changes"]]
    assert all(isinstance(c["proposed"], int | float | bool | str | None) for c in every)
    flags = [c for c in every if not c["advice"]]
    assert all(not isinstance(c["proposed"], str) or " " not in c["proposed"] for c in flags)
    if change is not None and change["flag"] == "--max-num-seqs":
        assert change["current"] == 16 and isinstance(change["current"], int)
    assert report["config"]["max_num_seqs"]["value"] == 16
    assert isinstance(report["config"]["max_num_seqs"]["value"], int)
    assert report["events"] and all(
        set(event) == {"time", "kind", "target", "message"} for event in report["events"]
    )
    assert "preemptions" in {event["kind"] for event in report["events"]}


def test_advice_in_words_is_json_with_its_text_and_no_argument() -> None:
    advice = change_json(
        ProposedChange("--speculative-config", None, "(remove --speculative-config)", "w", "e")
    )
    assert advice["flag"] == "--speculative-config" and advice["advice"] is True
    assert advice["proposed"] == "(remove --speculative-config)" and advice["argument"] is None
    flag = change_json(ProposedChange("--max-num-seqs", 16, 8.0, "w", "e"))
    assert (flag["flag"], flag["proposed"], flag["argument"]) == (
        "--max-num-seqs",
        8,
        "--max-num-seqs 8",
    )
    assert flag["advice"] is False


def test_no_traffic_and_not_vllm_cannot_be_diagnosed() -> None:
    idle = [frame_from_text(float(t), fixture("idle")) for t in range(3)]
    quiet = diagnose_frames(TARGET, idle, load_rules(), DiagnoseOptions())
    assert quiet.exit_code == 3 and "no traffic" in (quiet.reason or "")
    not_vllm = TargetScrape(TARGET, ScrapeStatus.NOT_VLLM, error="no vllm: series")
    frames = [Frame(float(t), (not_vllm,)) for t in range(2)]
    diagnosis = diagnose_frames(TARGET, frames, load_rules(), DiagnoseOptions())
    assert diagnosis.exit_code == 3 and "not a vLLM endpoint" in (diagnosis.reason or "")
    assert json_report(diagnosis)["verdict"] == "unknown"


def test_cli_unreachable_exits_3_with_json_reason() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "vtop",
            "diagnose",
            "http://127.0.0.1:9",
            "--window",
            "0.5",
            "--interval",
            "0.2",
            "--json",
            "--no-gpu",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 3
    report = json.loads(out.stdout)
    assert report["verdict"] == "unknown" and report["reason"].startswith("unreachable")


SPEC_DECODE = """# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {a}
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {d}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} 2
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="m"}} {g}
"""


def spec_decode_frames(seconds: int) -> list[Frame]:
    """A server whose drafts are mostly rejected (SD1 needs 30 s of it)."""
    return [
        frame_from_text(float(t), SPEC_DECODE.format(a=t, d=10 * t, g=50 * t))
        for t in range(seconds)
    ]


def test_a_rule_longer_than_the_window_is_not_checked_rather_than_ok() -> None:
    rules = load_rules()
    short = diagnose_frames(TARGET, spec_decode_frames(16), rules, DiagnoseOptions(read_gpus=False))
    assert short.triage is not None
    unchecked = {u.rule.id: u.how for u in short.triage.unchecked}
    assert "SD1" in unchecked and "--window 35" in unchecked["SD1"], unchecked
    assert "SD1" in text_report(short).split("NOT CHECKED")[1]
    assert "G1" not in unchecked  # no GPU series: its inputs do not exist here
    long = diagnose_frames(TARGET, spec_decode_frames(40), rules, DiagnoseOptions(read_gpus=False))
    assert long.triage is not None and long.triage.primary is not None
    assert long.triage.primary.rule.id == "SD1"
    assert "SD1" not in {u.rule.id for u in long.triage.unchecked}


def test_the_rules_a_first_frame_can_feed_decide_the_window() -> None:
    rules = load_rules()
    window, longer = needed_window(spec_decode_frames(2)[1], rules, DiagnoseOptions())
    assert (window, [r.id for r in longer]) == (35.0, ["SD1"])  # SD2's per-position counts absent
    # drafts exported but none made yet: the mechanism is not shown, the window stays short
    assert needed_window(spec_decode_frames(1)[0], rules, DiagnoseOptions()) == (15.0, ())
    plain = frame_from_text(
        0.0, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 2\n"
    )
    assert needed_window(plain, rules, DiagnoseOptions()) == (15.0, ())  # P2 needs a GPU too


class GrowingDrafts(QuietHandler):
    """A server whose drafts are mostly rejected, counters growing with the clock."""

    started = time.time()

    def do_GET(self) -> None:
        t = time.time() - self.started
        body = SPEC_DECODE.format(a=t, d=10 * t, g=50 * t)
        self.reply(200, body.encode() if self.path == "/metrics" else b"ok")


def test_diagnose_samples_as_long_as_a_rule_the_server_feeds_needs_and_says_so() -> None:
    with serving_handler(GrowingDrafts) as url:
        ran = vtop("diagnose", url, "--no-gpu", "--json", "--no-predict", timeout_s=90)
    assert "up to 35 s, not 15: this server shows what SD1 (30 s)" in ran.err, ran.err
    report = json.loads(ran.out)
    assert report["primary"]["id"] == "SD1", report["primary"]
    assert ran.code == 1 and 35 <= report["window_s"] < 40, (ran.code, report["window_s"])
    assert "SD1" not in {u["id"] for u in report["unchecked"]}


PINNED_TICK = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0"}} 4
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0"}} 20
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0"}} 0.01
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0"}} {g}
# TYPE vllm:request_inference_time_seconds histogram
vllm:request_inference_time_seconds_sum{{engine="0"}} {busy}
# TYPE vllm:request_prefill_time_seconds histogram
vllm:request_prefill_time_seconds_sum{{engine="0"}} {prefill}
# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_sum{{engine="0"}} {p}
vllm:request_prompt_tokens_count{{engine="0"}} {n}
# TYPE vllm:request_generation_tokens histogram
vllm:request_generation_tokens_sum{{engine="0"}} {o}
vllm:request_generation_tokens_count{{engine="0"}} {n}
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="16",engine="0",kv_cache_size_tokens="100000"}} 1.0
"""


def pinned_frames(seconds: int) -> list[Frame]:
    """Running held at 4 with 20 waiting and KV free; nobody said max-num-seqs."""
    return [
        frame_from_text(
            float(t),
            PINNED_TICK.format(g=100 * t, busy=4 * t, prefill=0.3 * t, p=40 * t, o=256 * t, n=t),
        )
        for t in range(seconds)
    ]


def test_a_one_shot_diagnosis_judges_the_window_with_what_the_whole_window_infers() -> None:
    frames, rules = pinned_frames(13), load_rules()
    diagnosis = diagnose_frames(TARGET, frames, rules, DiagnoseOptions(read_gpus=False))
    assert diagnosis.triage is not None and diagnosis.triage.primary is not None
    assert diagnosis.triage.primary.rule.id == "Q2"
    setting = diagnosis.config.settings["max_num_seqs"]
    assert setting.value == 4 and setting.source.startswith("inferred: running held at 4")
    report = json_report(diagnosis)
    assert report["primary"]["inferred"]["max_num_seqs"]["value"] == 4
    assert "max_num_seqs = 4 is inferred" in text_report(diagnosis)
    # live, the inference comes 10 s in and Q2 has not held its 5 s at 12 s; but Q0 ("no
    # limiter identified") has held its 10 s, and the limiter whose condition holds outranks it
    live = Session(rules, DiagnoseOptions(read_gpus=False))
    for frame in frames:
        live.ingest(frame)
    triage = live.target(TARGET).triage
    assert triage is not None and triage.primary is not None
    assert triage.primary.rule.id == "Q2" and "Q0" not in {f.rule.id for f in triage.findings}
    assert frames[-1].timestamp - triage.primary.since < 5, triage.primary.since


def test_a_one_shot_diagnosis_ingests_each_frame_once(monkeypatch: pytest.MonkeyPatch) -> None:
    frames, rules = pinned_frames(13), load_rules()
    ingested: list[float] = []
    write = RingWriter.ingest

    def counted(writer: RingWriter, frame: Frame) -> list[Event]:
        ingested.append(frame.timestamp)
        return write(writer, frame)

    monkeypatch.setattr(RingWriter, "ingest", counted)
    session = judged_window(frames, rules, DiagnoseOptions(read_gpus=False))
    assert ingested == [frame.timestamp for frame in frames]
    q2 = [m for m in session.marks if m.text.startswith("Q2[engine 0] appeared")]
    # judged with the inferred cap from the first frame: Q2 holds its 5 s from the start
    assert q2 and q2[0].timestamp <= frames[0].timestamp + 6, [m.timestamp for m in q2]


def test_an_endpoint_that_stops_answering_keeps_the_evidence_before_and_says_so() -> None:
    frames = storm_frames()
    end = frames[-1].timestamp
    timed_out = TargetScrape(TARGET, ScrapeStatus.UNREACHABLE, error="no answer within 10 s")
    frames += [Frame(end + 1, (timed_out,)), Frame(end + 2, (timed_out,))]
    options = DiagnoseOptions(vllm_args="vllm serve ./model --max-num-seqs 16")
    diagnosis = diagnose_frames(TARGET, frames, load_rules(), options)
    assert diagnosis.triage is not None and diagnosis.triage.primary is not None
    assert diagnosis.triage.primary.rule.id == "M1" and diagnosis.exit_code == 2
    assert diagnosis.stopped_answering is not None
    assert "last 2 scrape(s)" in diagnosis.stopped_answering
    assert "ENDPOINT STOPPED ANSWERING" in text_report(diagnosis)
    assert "no answer within 10 s" in json_report(diagnosis)["stopped_answering"]


def test_a_healthy_window_whose_end_went_unanswered_is_a_warning() -> None:
    types = {"vllm:num_requests_running": "gauge", "vllm:generation_tokens_total": "counter"}
    frames = [
        numbers_frame(
            t, types, {"vllm:num_requests_running": 1, "vllm:generation_tokens_total": 20 * t}
        )
        for t in range(20)
    ]
    healthy = diagnose_frames(TARGET, frames, load_rules(), DiagnoseOptions())
    assert healthy.verdict == "ok" and healthy.stopped_answering is None
    frames.append(down_frame(20.0))
    diagnosis = diagnose_frames(TARGET, frames, load_rules(), DiagnoseOptions())
    assert diagnosis.verdict == "warning" and diagnosis.exit_code == 1
    assert diagnosis.stopped_answering is not None and "refused" in diagnosis.stopped_answering


def late_queue(seconds: int, starts_at: int) -> list[Frame]:
    """Tokens flow; from `starts_at` on, six requests wait."""
    types = {
        "vllm:num_requests_running": "gauge",
        "vllm:num_requests_waiting": "gauge",
        "vllm:generation_tokens_total": "counter",
    }
    return [
        numbers_frame(
            t,
            types,
            {
                "vllm:num_requests_running": 2,
                "vllm:num_requests_waiting": 6 if t >= starts_at else 0,
                "vllm:generation_tokens_total": 40 * t,
            },
        )
        for t in range(seconds)
    ]


def test_a_rule_holding_for_less_than_its_for_is_pending_not_ok() -> None:
    rules, options = load_rules(), DiagnoseOptions(read_gpus=False)
    early = diagnose_frames(TARGET, late_queue(6, starts_at=3), rules, options)  # 2 of 2.5 s
    assert early.triage is not None and "Q0" not in {f.rule.id for f in early.triage.findings}
    pending = {p.rule.id: p.held_s for p in early.triage.pending}
    assert "Q0" in pending and 0 < pending["Q0"] < 2.5, pending
    assert "Q0 requests wait" in text_report(early).split("PENDING")[1]
    held = {p["id"]: p for p in json_report(early)["pending"]}["Q0"]
    assert held["severity"] == "warning" and held["for_s"] == 10 and held["held_s"] < 2.5
    assert early.verdict == "incomplete" and early.exit_code == 4, early.not_judged
    later = diagnose_frames(TARGET, late_queue(9, starts_at=3), rules, options)
    assert later.triage is not None and later.triage.primary is not None
    assert later.triage.primary.rule.id == "Q0" and not later.triage.pending


def test_a_short_window_judges_a_storm_that_held_through_most_of_it() -> None:
    rules, options = load_rules(), DiagnoseOptions(read_gpus=False)
    short = diagnose_frames(TARGET, storm_frames()[:5], rules, options)
    assert short.triage is not None and short.triage.primary is not None
    assert short.triage.primary.rule.id == "M1" and short.exit_code == 2, short.not_judged
    assert "held 3 s of the 4 s window (its for: is 5 s)" in text_report(short)
    live = Session(rules, options)
    for frame in storm_frames()[:5]:
        live.ingest(frame)
    triage = live.target(TARGET).triage
    assert triage is not None and "M1" in {p.rule.id for p in triage.pending}


def watching(frames: list[Frame]) -> Session:
    """A session as the dashboard keeps one: its store holds what its rules read."""
    rules, options = load_rules(), DiagnoseOptions(read_gpus=False)
    session = watching_session(rules, options, 1)
    for shot in frames:
        session.ingest(shot)
    return session


def busy(t: float) -> Frame:
    types = {"vllm:num_requests_running": "gauge", "vllm:generation_tokens_total": "counter"}
    return numbers_frame(
        t, types, {"vllm:num_requests_running": 1, "vllm:generation_tokens_total": 20 * t}
    )


def test_a_watching_session_judges_the_window_its_store_holds_not_its_uptime() -> None:
    session = watching([busy(float(t)) for t in range(0, 1500, 2)])
    assert session.store.retention_s == 600.0
    found = diagnosis(session, TARGET)
    held_since = session.store.held_since()
    assert held_since is not None and 0 < held_since <= 1498 - 600, held_since
    assert found.window_s == 1498 - held_since and found.summary is not None
    assert found.summary.generation_tokens_per_s == pytest.approx(20.0)


def test_a_server_down_for_longer_than_the_history_held_says_so() -> None:
    frames = [busy(float(t)) for t in range(0, 60, 2)]
    session = watching([*frames, *(down_frame(float(t)) for t in range(60, 1000, 2))])
    found = diagnosis(session, TARGET)
    assert found.triage is None and found.reason is not None
    assert "its last answer came 940 s ago" in found.reason, found.reason


def test_the_requests_in_flight_at_the_last_answer_are_in_the_report() -> None:
    hog = InFlightRequest("cmpl-hog-7", "/v1/completions", 312.0, True, 4096, 2918, 90)
    frames = storm_frames()
    last = frames[-1]
    frames[-1] = dataclasses.replace(
        last, scrapes=tuple(dataclasses.replace(s, in_flight=(hog,)) for s in last.scrapes)
    )
    diagnosis = diagnose_frames(TARGET, frames, load_rules(), DiagnoseOptions())
    text = text_report(diagnosis)
    assert "IN FLIGHT (1 running, the oldest first)" in text and "cmpl-hog-7" in text, text
    assert json_report(diagnosis)["in_flight"][0]["age_s"] == 312.0
    plain = diagnose_frames(TARGET, storm_frames(), load_rules(), DiagnoseOptions())
    assert "IN FLIGHT" not in text_report(plain) and json_report(plain)["in_flight"] is None
