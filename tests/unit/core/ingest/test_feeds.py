"""Live feed backoff against a real local server; replay pacing, outages and gaps."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.frames import down_frame, frame
from tests.support.http_server import Canned, serving
from tests.support.otlp_exports import export
from tests.support.payloads import fixture
from vtop.core.config.settings import Settings
from vtop.core.ingest.feed_status import Control
from vtop.core.ingest.feeds import (
    MAX_BACKOFF_S,
    REBUILD_S,
    Backoff,
    LiveFeed,
    RecordingFeed,
    ReplayFeed,
)
from vtop.core.ingest.open_feed import open_feed
from vtop.core.ingest.recorder import RecordingReader, RecordingWriter
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource

GAUGE = {"vllm:num_requests_running": "gauge"}
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def test_backoff_doubles_to_a_cap_and_resets_on_success() -> None:
    backoff = Backoff()
    delays = []
    for tick in range(8):
        backoff.record(False, 100.0 + tick, 1.0)
        delays.append(backoff.waiting(100.0 + tick))
    assert delays[:4] == [1.0, 2.0, 4.0, 8.0] and delays[-1] == MAX_BACKOFF_S
    backoff.record(True, 200.0, 1.0)
    assert backoff.waiting(200.0) == 0.0


async def test_live_feed_backs_off_while_down_and_resumes() -> None:
    canned = Canned(fixture("underload"))
    with serving(canned) as url:
        feed = LiveFeed([VllmHttpSource(url, ScrapeOptions(timeout_s=2))], None, 1.0)
        [ok] = await feed.frames(1000.0)
        assert ok.scrapes[0].ok
        canned.status = 503
        [failed] = await feed.frames(1001.0)
        assert not failed.scrapes[0].ok
        assert await feed.frames(1001.5) == []  # backing off: no poll
        canned.status = 200
        [again] = await feed.frames(1002.0)
        assert again.scrapes[0].ok and feed.backoff.failures == 0
        await feed.close()


async def test_replay_paces_frames_by_recorded_time_and_speed() -> None:
    frames = [frame(float(t), GAUGE, {"vllm:num_requests_running": t}) for t in range(10)]
    feed = ReplayFeed(frames, speed=2.0)
    assert [f.timestamp for f in await feed.frames(500.0)] == [0.0]
    assert [f.timestamp for f in await feed.frames(501.0)] == [1.0, 2.0]
    feed.paused = True
    assert await feed.frames(510.0) == []
    feed.paused = False
    assert [f.timestamp for f in await feed.frames(520.0)] == [3.0]  # re-anchored after a pause
    assert [f.timestamp for f in feed.control(Control.STEP, 1).frames] == [4.0]
    assert feed.paused  # stepping pauses
    fast = ReplayFeed(frames, speed=0)
    assert len(await fast.frames(0.0)) == 10 and fast.finished


async def test_replay_passes_through_outages_and_recording_gaps() -> None:
    frames = [frame(0.0, GAUGE, {"vllm:num_requests_running": 1})]
    frames += [down_frame(float(t)) for t in range(1, 30)]
    frames += [frame(30.0, GAUGE, {"vllm:num_requests_running": 2})]
    frames += [frame(500.0, GAUGE, {"vllm:num_requests_running": 3})]
    feed = ReplayFeed(frames, speed=1.0)
    first = await feed.frames(0.0)
    assert len(first) == 30 and not first[-1].scrapes[0].ok  # the outage follows at once
    assert [f.timestamp for f in await feed.frames(0.1)] == [30.0]
    assert [f.timestamp for f in await feed.frames(0.7)] == [500.0]  # a 470 s gap is skipped


def test_seek_forward_is_incremental_and_backward_rebuilds_a_window() -> None:
    frames = [frame(float(t), GAUGE, {"vllm:num_requests_running": t}) for t in range(1000)]
    feed = ReplayFeed(frames)
    moved = feed.seek(10)
    assert not moved.fresh and [f.timestamp for f in moved.frames] == [float(t) for t in range(10)]
    moved = feed.seek(5)
    assert moved.fresh and moved.frames[-1].timestamp == 4.0 and feed.position == 5
    moved = feed.seek(900)
    assert moved.fresh and moved.frames[-1].timestamp == 899.0
    assert moved.frames[0].timestamp == 899.0 - REBUILD_S
    assert feed.index_at(99.5) == 100


async def test_recording_feed_writes_what_it_passes(tmp_path: Path) -> None:
    with serving(Canned(fixture("underload"))) as url:
        live = LiveFeed([VllmHttpSource(url, ScrapeOptions(timeout_s=2))], None, 1.0)
        feed = RecordingFeed(live, RecordingWriter(tmp_path / "r.vtoprec"))
        passed = await feed.frames(1.0) + await feed.frames(2.0)
        await feed.close()
    recorded = list(RecordingReader(tmp_path / "r.vtoprec"))
    assert [f.timestamp for f in recorded] == [f.timestamp for f in passed] == [1.0, 2.0]
    assert recorded[0].scrapes[0].raw_text == passed[0].scrapes[0].raw_text


async def test_a_live_feed_carries_the_spans_received_since_its_last_frame(tmp_path: Path) -> None:
    with serving(Canned(fixture("underload"))) as url:
        settings = Settings(urls=(url,), otlp=("http://127.0.0.1:0",))
        feed = open_feed(settings, gpus=False, spans=True)
        try:
            assert isinstance(feed, LiveFeed) and feed.spans is not None
            [address] = feed.spans.bound
            traces = f"{address}/v1/traces"
            for name in ("one", "two"):
                body = export((name, 0.5, 0.1, 0.4, 1.0))
                reply = httpx.post(traces, content=body, headers=PROTOBUF, timeout=5)
                assert reply.status_code == 200, reply.text
            [first] = await feed.frames(1000.0)
            [second] = await feed.frames(1001.0)
        finally:
            await feed.close()
        with pytest.raises(httpx.ConnectError):  # closed with the feed
            httpx.post(traces, content=export(("three", 0.5, 0.1, 0.4, 1.0)), headers=PROTOBUF)
    assert [s.request_id for s in first.spans] == ["one", "two"] and second.spans == ()
    path = tmp_path / "spans.vtoprec"
    with RecordingWriter(path) as writer:
        writer.write(first)
    [kept] = list(RecordingReader(path))
    assert kept.spans == first.spans  # a recording holds them as they came
