"""One window of a feed: it ends at the first frame that shows no vLLM to judge."""

from __future__ import annotations

import asyncio

from tests.support.frames import TARGET
from vtop.core.frame import Frame, ScrapeStatus, TargetScrape
from vtop.core.ingest.feeds import ReplayFeed
from vtop.core.ingest.sources.vllm_http import never_vllm
from vtop.core.ingest.window import window_frames


def test_a_window_ends_at_the_first_frame_that_shows_no_vllm() -> None:
    html = TargetScrape(TARGET, ScrapeStatus.NOT_VLLM, error="no vllm: series")
    refused = TargetScrape(TARGET, ScrapeStatus.HTTP_ERROR, error="HTTP 401", http_status=401)
    busy = TargetScrape(TARGET, ScrapeStatus.HTTP_ERROR, error="HTTP 503", http_status=503)
    assert never_vllm(html) and never_vllm(refused) and not never_vllm(busy)
    frames = [Frame(float(t), (html,)) for t in range(5)]
    got = asyncio.run(window_frames(ReplayFeed(frames, speed=0), 15.0))
    assert len(got) == 1
