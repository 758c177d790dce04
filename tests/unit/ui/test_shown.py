"""What the dashboard shows, as a value (`vtop/ui/shown.py`, no app): the header's state first,
the action line that never says OK over a problem, the no-server banner, the findings panel's
empty text, and the action line fitted to 80 columns without cutting the flag diff."""

from __future__ import annotations

from tests.support.frames import TARGET, down_frame, steady
from tests.support.storm import storm_frames
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.frame import Frame
from vtop.core.ingest.feed_status import FeedStatus, Mode
from vtop.core.rules.loader import load_rules
from vtop.core.session.session import Session
from vtop.ui.shown import FIRST_CONTACT, Shown, Surroundings, build, fit, fit_action

LIVE = FeedStatus(Mode.LIVE, 1.0)


def shown_after(frames: list[Frame], window_s: float = 5.0) -> Shown:
    """The dashboard's value once a watching session has taken the frames."""
    session = Session(load_rules(), DiagnoseOptions(read_gpus=False, window_s=window_s))
    for frame in frames:
        session.ingest(frame)
    now = frames[-1].timestamp
    return build(session, LIVE, 0, (TARGET,), now, now, Surroundings(window_s))


def flowing(seconds: int, waiting: float) -> list[Frame]:
    return steady(seconds, waiting, kv=0.3)


def test_a_quiet_server_is_ok_after_a_full_window_and_watching_before() -> None:
    early = shown_after(flowing(3, waiting=0))
    assert early.header[0].startswith("WATCHING") and early.action.startswith("WATCHING")
    calm = shown_after(flowing(8, waiting=0))
    assert calm.header[0] == "LIVE" and calm.action.startswith("OK: no warning or critical")
    assert calm.banner is None and calm.no_finding.startswith("No finding")


def test_a_queue_no_rule_has_judged_yet_is_never_ok_on_screen() -> None:
    queued = shown_after(flowing(8, waiting=6))
    assert queued.action.startswith("NOT OK, not judged yet: a queue (6.0 waiting on average)")
    assert "OK: no warning" not in queued.action


def test_a_storm_shows_its_finding_and_its_flag_diff_fits_80_columns() -> None:
    storm = shown_after(storm_frames(16), window_s=15.0)
    assert storm.action.startswith("CRITICAL M1[engine 0] preemption storm")
    assert storm.action_parts is not None
    line = fit_action(storm.action_parts, 80)
    assert len(line) <= 80 and line.startswith("CRITICAL M1") and "--max-num-seqs" in line


def test_a_url_that_never_answered_says_what_to_do_and_shows_no_age() -> None:
    never = shown_after([down_frame(float(t)) for t in range(3)])
    assert never.banner is not None and never.banner.strip().startswith("Nothing answers at")
    assert FIRST_CONTACT in never.banner and not any(p.startswith("age") for p in never.header)
    assert never.no_finding == "No data yet."


def test_the_header_keeps_its_first_parts_when_cut() -> None:
    parts = ("LIVE", "age 1s", "every 1s", "host:8000", "a-model-with-a-long-name", "vLLM 0.32")
    cut = fit(parts, 40)
    assert len(cut) <= 40 and cut.startswith(" LIVE  age 1s  every 1s")
