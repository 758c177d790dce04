"""Plain-text lines (`vtop --plain`): live feed -> session -> lines, against real local servers."""

from __future__ import annotations

from tests.support.http_server import Canned, serving
from tests.support.payloads import fixture
from tests.support.storm import storm
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.ingest.feeds import LiveFeed, ReplayFeed
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.rules.loader import load_rules
from vtop.text.plain import run_plain


def feed_of(*urls: str, interval: float = 0.05) -> LiveFeed:
    """A live feed of real local servers (with several, a tick waits 80% of the interval)."""
    sources = [VllmHttpSource(url, ScrapeOptions(timeout_s=2)) for url in urls]
    return LiveFeed(sources, None, interval)


async def test_plain_prints_one_line_per_target_per_tick() -> None:
    lines: list[str] = []
    with serving(Canned(body=fixture("underload"))) as good, serving(Canned(status=500)) as bad:
        feed = feed_of(good, bad, interval=0.5)
        code = await run_plain(feed, load_rules(), DiagnoseOptions(), 2, lines.append)
    assert code == 3  # one target failed
    assert len(lines) == 4
    ok_line = next(line for line in lines if good in line)
    assert "run 4 wait 10 kv 100.0%" in ok_line
    assert any(bad in line and "http error: HTTP 500" in line for line in lines)


async def test_plain_reports_bad_lines_without_losing_the_scrape() -> None:
    lines: list[str] = []
    body = fixture("underload") + "vllm:broken{ 1\n"
    with serving(Canned(body=body)) as url:
        code = await run_plain(feed_of(url), load_rules(), DiagnoseOptions(), 1, lines.append)
    assert code == 0
    assert "run 4 wait 10" in lines[0] and "1 bad lines: line" in lines[0]


async def test_plain_lines_carry_the_primary_finding_and_its_flag() -> None:
    lines: list[str] = []
    feed = ReplayFeed([storm(t) for t in range(20)], speed=0)
    await run_plain(feed, load_rules(), DiagnoseOptions(), None, lines.append)
    assert len(lines) == 20 and "| CRITICAL" not in lines[0]  # a finding holds 5 s first
    assert "| NOT OK, not judged yet: a queue" in lines[0]  # but a queue is never OK
    assert "| CRITICAL M1[engine 0] preemption storm" in lines[-1]
    assert lines[-1].endswith(": --max-num-seqs 1")
