"""Many endpoints: the fleet table (sort, filter, drill-in), engine split, and a poller that no
slow endpoint delays. Real local HTTP servers, the real Textual app driven by its Pilot."""

from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from textual.widgets import DataTable, Static

from tests.support.app import header, on_screen, screen_text, wait_for
from tests.support.frames import frame_from_texts
from tests.support.http_server import Canned, QuietHandler, serving, serving_handler
from tests.support.payloads import fixture, multi_engine
from tests.support.storm_server import IDLE, storm_handler
from tests.support.vllm_harness.server import free_port
from vtop.core.config.settings import Settings
from vtop.core.ingest.feeds import LiveFeed
from vtop.core.ingest.poller import Poller
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions
from vtop.core.session.fleet import fleet_rows, fleet_summary
from vtop.core.session.session import Session
from vtop.ui.app import VtopApp
from vtop.ui.fleet_shown import FleetShown
from vtop.ui.screens.fleet import FleetScreen

SLOW_S = 2.0


def fleet_app(urls: list[str]) -> VtopApp:
    """The dashboard polling several real local endpoints."""
    settings = Settings(urls=tuple(urls), interval_s=0.3, timeout_s=3)
    sources = [VllmHttpSource(url, ScrapeOptions(timeout_s=3)) for url in urls]
    return VtopApp(settings, LiveFeed(sources, None, 0.3), load_rules())


def table_rows(app: VtopApp) -> list[list[str]]:
    """The fleet table's cells as text."""
    table: DataTable[object] = app.screen.query_one(DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


def row_of(app: VtopApp, target: str) -> list[str]:
    """The cells of one server's row (shown without the scheme)."""
    return next(row for row in table_rows(app) if row[0] == shown(target))


def server_order(app: VtopApp) -> list[str]:
    """The servers in the table's order (engine rows left out)."""
    return [row[0] for row in table_rows(app) if not row[0].startswith(" ")]


def shown(url: str) -> str:
    """How the table names a server."""
    return url.removeprefix("http://")


async def test_fleet_table_sorts_filters_splits_engines_and_drills_in() -> None:
    with ExitStack() as stack:
        storm = stack.enter_context(serving_handler(storm_handler(time.time())))
        idle = stack.enter_context(serving(Canned(IDLE)))
        dp = stack.enter_context(serving(Canned(multi_engine(fixture("underload"), 2))))
        down = f"http://127.0.0.1:{free_port()}"
        app = fleet_app([idle, storm, dp, down])
        async with app.run_test(size=(160, 40)) as pilot:
            assert isinstance(app.screen, FleetScreen)
            await wait_for(pilot, lambda: len(table_rows(app)) == 6)  # 4 servers + 2 engines
            servers = [row[0] for row in table_rows(app)]
            assert servers[servers.index(shown(dp)) + 1 : servers.index(shown(dp)) + 3] == [
                "  engine 0",
                "  engine 1",
            ]
            assert row_of(app, down)[1] == "unreachable"
            await wait_for(pilot, lambda: row_of(app, storm)[2].startswith("CRIT M1"))
            assert row_of(app, idle)[2] == "ok"
            assert row_of(app, down)[2] == "no verdict: unreachable"  # never ok without data
            assert app.screen.sort_key == "finding"  # it opens worst first
            # (the rows are sorted as the table refreshes: on a busy host a tick after M1)
            worst = [shown(storm), shown(down)]
            await wait_for(
                pilot, lambda: server_order(app)[:2] == worst, 10, lambda: server_order(app)
            )
            for _ in range(4):  # finding -> target -> state -> running -> waiting
                await pilot.press("s")
            assert app.screen.sort_key == "waiting"
            labels = [str(c.label) for c in app.screen.query_one(DataTable).columns.values()]
            assert "wait ▼" in labels and "run" in labels  # the sorted column is marked
            order = server_order(app)
            assert order == [shown(url) for url in (dp, storm, idle, down)]  # 20, 10, 0, unknown
            await pilot.press("slash", *"unreach")
            await wait_for(pilot, lambda: [r[0] for r in table_rows(app)] == [shown(down)])
            await pilot.press("enter", "escape")
            assert len(table_rows(app)) == 6
            table: DataTable[object] = app.screen.query_one(DataTable)
            table.move_cursor(row=[row[0] for row in table_rows(app)].index(shown(storm)))
            await pilot.press("enter")
            assert not isinstance(app.screen, FleetScreen)
            await wait_for(pilot, lambda: shown(storm) in header(app))
            await pilot.press("escape")
            assert isinstance(app.screen, FleetScreen)


async def test_g_groups_the_fleet_and_enter_opens_the_worst_replica() -> None:
    with ExitStack() as stack:
        storm = stack.enter_context(serving_handler(storm_handler(time.time())))
        idle = stack.enter_context(serving(Canned(IDLE)))
        app = fleet_app([idle, storm])
        async with app.run_test(size=(160, 40)) as pilot:
            assert isinstance(app.screen, FleetScreen)
            await wait_for(pilot, lambda: len(table_rows(app)) == 2)
            await wait_for(pilot, lambda: row_of(app, storm)[2].startswith("CRIT M1"), 20)
            await pilot.press("g")  # by namespace: a direct scrape has none
            labels = [str(c.label) for c in app.screen.query_one(DataTable).columns.values()]
            assert labels[0] == "namespace"
            await wait_for(pilot, lambda: len(table_rows(app)) == 1, 10, lambda: table_rows(app))
            [group] = table_rows(app)
            assert group[0] == "namespace (none) (2)" and group[1] == "2 live", group
            assert group[2].startswith("CRIT 1/2: M1 "), group
            await pilot.press("enter")
            assert not isinstance(app.screen, FleetScreen)
            await wait_for(pilot, lambda: shown(storm) in header(app))
            await pilot.press("escape")
            assert isinstance(app.screen, FleetScreen)
            await pilot.press("g", "g")  # by model, then each server again
            await wait_for(pilot, lambda: len(table_rows(app)) == 2, 10, lambda: table_rows(app))


async def test_a_server_named_by_an_ipv6_address_keeps_its_brackets() -> None:
    """Cells are text, not markup: `[fe80::1]` would read as a style tag and vanish."""
    with serving(Canned(IDLE)) as idle:
        ipv6 = "http://[fe80::1]:9"
        app = fleet_app([idle, ipv6])
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: shown(ipv6) in [row[0] for row in table_rows(app)])
            await pilot.pause()
            assert on_screen(shown(ipv6), screen_text(app)), screen_text(app)


def slow_handler() -> type[BaseHTTPRequestHandler]:
    """A /metrics endpoint that takes SLOW_S seconds to answer."""

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                time.sleep(SLOW_S)
            self.reply(200 if self.path == "/metrics" else 404, IDLE.encode())

    return Handler


async def test_a_slow_endpoint_delays_no_other() -> None:
    with serving(Canned(IDLE)) as fast, serving_handler(slow_handler()) as slow:
        sources = [VllmHttpSource(url, ScrapeOptions(timeout_s=5)) for url in (slow, fast)]
        poller = Poller(sources)
        started = time.monotonic()
        first = await poller.poll(None, time.time(), 0.3)
        assert time.monotonic() - started < SLOW_S / 2
        assert [s.target for s in first.scrapes] == [fast]
        await asyncio.sleep(SLOW_S)
        later = await poller.poll(None, time.time(), 0.3)
        assert sorted(s.target for s in later.scrapes) == sorted([slow, fast])
        assert all(s.ok for s in later.scrapes)
        poller.cancel()
        for source in sources:
            await source.close()


def ttft_text(counts: dict[str, int]) -> str:
    """A TTFT histogram exposition from cumulative bucket counts."""
    lines = ["# TYPE vllm:time_to_first_token_seconds histogram"]
    lines += [
        f'vllm:time_to_first_token_seconds_bucket{{le="{le}"}} {n}' for le, n in counts.items()
    ]
    lines.append(f"vllm:time_to_first_token_seconds_count {counts['+Inf']}")
    return "\n".join(lines) + "\n"


def test_fleet_figures_merge_histograms_by_bucket() -> None:
    session = Session(load_rules(), DiagnoseOptions())
    for t in range(3):
        fast = ttft_text({"0.1": 90 * t, "5.0": 90 * t, "10.0": 90 * t, "+Inf": 90 * t})
        slow = ttft_text({"0.1": 0, "5.0": 0, "10.0": 10 * t, "+Inf": 10 * t})
        session.ingest(frame_from_texts(float(t), {"http://a": fast, "http://b": slow}))
    merged = fleet_summary(session, fleet_rows(session, 2.0))
    # 90 of 100 requests took under 0.1 s: the merged median is there, not between the two
    # servers' medians (0.05 s and 7.5 s), which is what averaging quantiles would give.
    assert merged.ttft_p50_s is not None and merged.ttft_p50_s <= 0.1
    assert merged.ttft_p99_s is not None and 5.0 < merged.ttft_p99_s <= 10.0


async def test_the_fleet_line_lays_the_screen_out_only_when_its_height_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its figures change every tick; it asks for a layout of the screen (the table under it
    moving) only when it wraps anew."""
    with ExitStack() as stack:
        storm = stack.enter_context(serving_handler(storm_handler(time.time())))
        idle = stack.enter_context(serving(Canned(IDLE)))
        app = fleet_app([storm, idle])
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: len(table_rows(app)) == 2)
            screen = app.screen
            assert isinstance(screen, FleetScreen)
            line = screen.query_one("#fleet-summary", Static)
            # past the first ticks, where the line first takes its two rows
            await wait_for(pilot, lambda: "gen - tok/s" not in str(line.render()))
            await pilot.pause(0.5)
            layouts: list[str] = []
            refresh = line.refresh

            def counted(*regions: Any, **options: Any) -> Any:
                if options.get("layout"):
                    layouts.append(str(line.render()))
                return refresh(*regions, **options)

            monkeypatch.setattr(line, "refresh", counted)
            lines = set()
            for _ in range(8):
                await pilot.pause(0.3)
                lines.add(str(line.render()))
            assert len(lines) >= 3, lines  # the figures moved
            assert layouts == []
            await pilot.press("p")  # no tick rewrites the line while it is checked
            await pilot.pause(0.5)
            table = screen.query_one(DataTable)
            top, height = table.region.y, line.region.height
            rows = fleet_rows(app.session, time.time())
            longer = screen._summary + " and a cause long enough to wrap onto a third row"
            screen.show(FleetShown(longer, tuple(rows)))
            await pilot.pause(0.2)
            assert layouts and line.region.height == height + 1
            assert table.region.y == top + 1 and "onto a third row" in screen_text(app)
