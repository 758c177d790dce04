"""The plain-text monitor (`vtop URL` until the dashboard lands) against a real local server."""

from __future__ import annotations

from tests.http_server import Canned, serving
from tests.payloads import fixture
from vtop.core.sources.vllm_http import ScrapeOptions
from vtop.monitor import run_monitor


async def test_monitor_prints_one_line_per_target_per_tick() -> None:
    lines: list[str] = []
    with serving(Canned(body=fixture("underload"))) as good, serving(Canned(status=500)) as bad:
        code = await run_monitor(
            [good, bad], ScrapeOptions(timeout_s=2), 0.05, 15.0, 2, lines.append
        )
    assert code == 3  # one target failed
    assert len(lines) == 4
    ok_line = next(line for line in lines if good in line)
    assert "run 4 wait 10 kv 100.0%" in ok_line
    assert any(bad in line and "http error: HTTP 500" in line for line in lines)


async def test_monitor_reports_bad_lines_without_losing_the_scrape() -> None:
    lines: list[str] = []
    body = fixture("underload") + "vllm:broken{ 1\n"
    with serving(Canned(body=body)) as url:
        code = await run_monitor([url], ScrapeOptions(timeout_s=2), 0.05, 15.0, 1, lines.append)
    assert code == 0
    assert "run 4 wait 10" in lines[0] and "1 bad lines: line" in lines[0]
