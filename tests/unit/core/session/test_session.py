"""The session: findings and marks over time, log-derived config, replay equals live."""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import replace

from tests.support.frames import TARGET, down_frame, frame, frame_from_text, frame_from_texts
from tests.support.payloads import fixture
from tests.support.storm import storm
from vtop.core.catalog import family_of
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.frame import Frame, ScrapeStatus, TargetScrape
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.rules.loader import load_rules
from vtop.core.session.recent import KeptValues
from vtop.core.session.session import (
    RULE_BUDGET,
    Session,
    store_ticks_for,
    watching_retention_s,
    watching_session,
)

LOG = (
    "INFO 11-29 06:48:42 [api_utils.py:286] non-default args: "
    "{'model': './model', 'max_num_seqs': %d, 'block_size': 128}"
)


def kinds(session: Session) -> list[str]:
    return [mark.kind for mark in session.marks]


def test_storm_gives_findings_marks_and_history() -> None:
    session = Session(load_rules(), DiagnoseOptions())
    for t in range(20):
        session.ingest(storm(t))
    view = session.targets["http://127.0.0.1:8000"]
    assert view.triage is not None and view.triage.primary is not None
    assert view.triage.primary.rule.id == "M1"
    assert len(view.history) == 20 and view.summary is not None
    assert kinds(session).count("preemptions") == 1  # one burst, not one mark per tick
    assert kinds(session).count("kv") == 1
    assert any(m.kind == "finding" and m.text.startswith("M1") for m in session.marks)


def test_outage_is_marked_once_and_recovery_once() -> None:
    session = Session(load_rules(), DiagnoseOptions())
    session.ingest(storm(0))
    for t in range(1, 6):
        session.ingest(down_frame(float(t)))
    session.ingest(storm(6))
    assert kinds(session).count("unreachable") == 1
    assert kinds(session).count("recovered") == 1


def test_log_lines_in_frames_set_the_config_and_a_new_startup_replaces_it() -> None:
    session = Session(load_rules(), DiagnoseOptions())
    first = storm(0)
    session.ingest(Frame(first.timestamp, first.scrapes, log_lines=(LOG % 16,)))
    view = session.targets["http://127.0.0.1:8000"]
    assert view.config.number("max_num_seqs") == 16
    again = storm(1)
    session.ingest(Frame(again.timestamp, again.scrapes, log_lines=("noise", LOG % 1)))
    assert view.config.number("max_num_seqs") == 1
    assert session.startup_log[0].endswith("'block_size': 128}")


def test_restart_is_marked_and_findings_clear() -> None:
    session = Session(load_rules(), DiagnoseOptions())
    for t in range(20):
        session.ingest(storm(t))
    quiet = {"vllm:num_requests_running": "gauge", "process_start_time_seconds": "gauge"}
    for t in range(20, 100):
        session.ingest(
            frame(
                float(t), quiet, {"vllm:num_requests_running": 0, "process_start_time_seconds": 99}
            )
        )
    assert "cleared" in kinds(session)
    view = session.targets["http://127.0.0.1:8000"]
    assert view.triage is not None and all(f.rule.id != "M1" for f in view.triage.findings)


def test_a_rule_budget_judges_servers_in_turn_and_the_focused_one_always() -> None:
    session = Session(load_rules(), DiagnoseOptions(), rule_budget=2)
    names = [f"http://{letter}" for letter in "abcde"]
    judged: dict[str, list[object]] = {name: [] for name in names}
    for t in range(6):
        text = storm(t).scrapes[0].raw_text
        session.ingest(frame_from_texts(float(t), dict.fromkeys(names, text)), focus="http://e")
        for name in names:
            triage = session.targets[name].triage
            if triage is not None and not any(seen is triage for seen in judged[name]):
                judged[name].append(triage)
    assert len(judged["http://e"]) == 6  # the focused server every frame
    assert all(1 <= len(judged[name]) <= 3 for name in names[:4])  # the others in turn
    view = session.targets["http://a"]
    running = [value for _, value in view.history.points("running", 0.0, math.inf)]
    assert len(running) == len(view.history) and set(running) == {4}  # gauges every frame
    assert view.summary is not None and view.summary.preemptions_per_s is not None


def test_recent_frames_keep_text_not_samples_and_stay_under_the_bound() -> None:
    """The text comes back as it came; the bound counts the compressed bytes held. Nothing
    else keeps a payload's text or samples once ingested (the store holds the values)."""
    text = fixture("underload")
    session = Session(load_rules(), DiagnoseOptions())
    packed = len(zlib.compress(text.encode(), 1))
    session.recent_frames.max_bytes = 3 * packed
    for t in range(6):
        session.ingest(frame_from_text(float(t), text))
    frames = session.recent_frames.frames()
    assert [kept.timestamp for kept in frames] == [3.0, 4.0, 5.0]
    assert all(s.raw_text == text and not s.samples for s in frames[-1].scrapes)
    assert packed < len(text) / 5  # what holding it compressed is for
    last = session.target(TARGET).last_ok_scrape
    assert last is not None and last.ok and not last.samples and not last.raw_text


def test_payloads_read_through_a_layout_come_back_exactly_and_count_it_once() -> None:
    """A scrape read through the previous payload's layout is kept as its values, compressed
    against the first such payload's, and that layout: the text comes back byte for byte, and
    the layout and the dictionary count against the bound once while frames use them, and no
    longer once the last of them is dropped."""
    text = fixture("underload")
    texts = [re.sub(r"(_total\{[^}]*\}) (\S+)", rf"\1 {t}.25", text) for t in range(6)]
    assert len(set(texts)) == 6  # the values really move
    parser = ExpositionParser()
    session = Session(load_rules(), DiagnoseOptions())
    recent = session.recent_frames

    def ingest(t: int) -> None:
        parsed = parser.parse(texts[t])
        scrape = TargetScrape(TARGET, ScrapeStatus.OK, texts[t], parsed.frozen_samples())
        session.ingest(Frame(float(t), (scrape,)))

    for t in range(5):
        ingest(t)
    assert parser.layout_hits == 4  # the first payload made the layout
    held = recent.snapshot()
    kinds = [type(p.texts[0]).__name__ for p in held]
    assert kinds == ["bytes"] + ["KeptValues"] * 4
    assert [s.raw_text for f in recent.frames() for s in f.scrapes] == texts[:5]
    values = [p.texts[0] for p in held[1:] if isinstance(p.texts[0], KeptValues)]
    dictionary = values[0].dictionary  # the first payload kept as values: shared, counted once
    assert all(kept.dictionary is dictionary for kept in values)
    layout = 2 * len(texts[1]) + len(dictionary)
    assert recent.counted_bytes == sum(p.size for p in held) + layout
    assert 20 * max(p.size for p in held[1:]) < len(text)  # what keeping values is for
    recent.max_frames = 1
    parser.parse(text + "# a comment line changes the layout\n")
    ingest(5)  # read whole (the layout changed just before): compressed, no layout left
    [last] = recent.snapshot()
    assert isinstance(last.texts[0], bytes) and recent.counted_bytes == last.size


def test_frames_that_came_without_text_are_kept_as_their_samples_written_out() -> None:
    """Prometheus frames carry samples only; a bundle of them must still hold the data."""
    parsed = frame_from_text(1.0, fixture("underload"))
    [scrape] = parsed.scrapes
    types = {
        s.series.name: family_of(s.series.name, scrape.metric_types)[1] for s in scrape.samples
    }
    untexted = replace(scrape, raw_text="", metric_types=types)
    session = Session(load_rules(), DiagnoseOptions())
    session.ingest(replace(parsed, scrapes=(untexted,)))
    [kept] = session.recent_frames.frames()[-1].scrapes
    assert not kept.samples
    again = ExpositionParser().parse(kept.raw_text).samples
    assert sorted(again) == sorted(scrape.samples)


def test_every_watching_view_gets_one_session_shape() -> None:
    rules, options = load_rules(), DiagnoseOptions(read_gpus=False)
    one, fleet = watching_session(rules, options, 1), watching_session(rules, options, 40)
    assert one.rule_budget is None and fleet.rule_budget == RULE_BUDGET
    assert fleet.store.capacity == store_ticks_for(40) < one.store.capacity
    assert one.store.retention_s == watching_retention_s(rules, options)
