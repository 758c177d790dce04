"""Every key does what the help says or says why not, a burst of keys is not lost, and the
footer fits 80 columns: the real app driven by its Pilot."""

from __future__ import annotations

import dataclasses

from textual.containers import VerticalScroll
from textual.widgets import DataTable

from tests.support.app import replay_app, screen_text, wait_for
from tests.support.demo import app_on, slot_hog_frames
from tests.support.storm import storm
from vtop.core.frame import InFlightRequest, RequestSpan
from vtop.core.ingest.feed_status import FeedStatus, Mode
from vtop.ui.app import VtopApp
from vtop.ui.keys import UNAVAILABLE
from vtop.ui.screens.fleet import FleetScreen
from vtop.ui.screens.requests import RequestsScreen
from vtop.ui.screens.text_screen import TextScreen


def storm_app() -> VtopApp:
    return replay_app([storm(t) for t in range(20)])


def notices(app: VtopApp) -> list[str]:
    """The notifications on screen, newest last."""
    return [str(notification.message) for notification in app._notifications]


async def test_a_burst_of_down_keys_in_a_modal_scrolls_a_line_per_key() -> None:
    app = storm_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.target is not None and app.target.triage is not None)
        await pilot.press("d")
        assert isinstance(app.screen, TextScreen)
        await pilot.pause(0.2)
        scroll = app.screen.query_one(VerticalScroll)
        assert scroll.max_scroll_y >= 12, scroll.max_scroll_y  # the report is longer than 24
        for _ in range(6):  # keys arriving faster than the screen redraws: no refresh between
            app.screen.action_scroll(1)
        await pilot.pause(0.2)
        assert scroll.scroll_y == 6, scroll.scroll_y
        await pilot.press(*["j"] * 3, *["down"] * 3)
        await pilot.pause(0.2)
        assert scroll.scroll_y == 12, scroll.scroll_y
        await pilot.press(*["k"] * 5)
        await pilot.pause(0.2)
        assert scroll.scroll_y == 7, scroll.scroll_y


async def test_the_fleet_key_shows_rows_while_paused_and_esc_leaves_a_one_server_table() -> None:
    app = storm_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.target is not None and app.target.triage is not None)
        await pilot.press("p", "f")
        await pilot.pause(0.3)
        assert isinstance(app.screen, FleetScreen)
        table = app.screen.query_one(DataTable)
        assert table.row_count == 1, "paused, the table was left empty"
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, FleetScreen), "Esc did not leave the one-server table"


async def test_keys_that_do_not_apply_say_why() -> None:
    app = storm_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.target is not None and app.target.triage is not None)
        for key, said in (("a", "a"), ("r", "r"), ("t", "t")):
            await pilot.press(key)
            await pilot.pause(0.1)
            assert UNAVAILABLE[said] in notices(app), (key, notices(app))


async def test_the_footer_fits_80_columns_without_cutting_a_word() -> None:
    app = storm_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.target is not None and app.target.triage is not None)
        await wait_for(pilot, lambda: "palette" in screen_text(app).splitlines()[-1])
        footer = screen_text(app).splitlines()[-1]
        assert "- slow" in footer and "? help" in footer, footer
        assert "…" not in footer, footer


def span(name: str, queued: float, scheduled: float, end: float, prompt: int = 40) -> RequestSpan:
    """A request as vLLM's span tells it (first token 20 ms after it is scheduled)."""
    first = scheduled + 0.02
    return RequestSpan(
        name, name, "", queued, end, scheduled - queued, first - queued, 0.02, end - first,
        end - scheduled, end - queued, prompt, 16, 16,
    )  # fmt: skip


async def test_r_shows_the_recorded_requests_and_who_held_up_whom() -> None:
    frames = [storm(t) for t in range(20)]
    hogs = [span(f"hog-{i}", 1.0, 1.0, 15.0) for i in range(2)]
    hogs = [dataclasses.replace(h, output_tokens=300, max_tokens=300) for h in hogs]
    waited = [span(f"wait-{i}", 2.0 + i, 15.01, 15.4) for i in range(4)]
    calm = [span(f"calm-{i}", 16.0 + i / 4, 16.0 + i / 4, 16.3 + i / 4) for i in range(4)]
    frames[18] = dataclasses.replace(frames[18], spans=(*hogs, *waited, *calm))
    app = replay_app(frames)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.session.now == 19.0 and len(app.session.spans) == 10)
        await pilot.press("R")
        await pilot.pause(0.2)
        assert isinstance(app.screen, RequestsScreen)
        table = app.screen.query_one(DataTable)
        assert table.row_count == 10
        first = [str(cell) for cell in table.get_row_at(0)]
        assert first[0] == "hog-0" or first[0] == "hog-1", first  # the slowest first
        shown = screen_text(app)
        assert "10 request(s) finished" in shown and "slot-hog" in shown, shown
        await pilot.press("s")  # sorted by TTFT: a queued request first
        await pilot.pause(0.1)
        assert str(table.get_row_at(0)[0]).startswith("wait-"), table.get_row_at(0)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, TextScreen)
        timeline = str(app.screen.body)
        assert "scheduled, after" in timeline and "hog-0" in timeline, timeline
        await pilot.press("escape", "escape")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, (RequestsScreen, TextScreen))


async def test_r_on_a_live_server_without_spans_says_how_to_turn_them_on() -> None:
    app = storm_app()
    app.feed.status = lambda now: FeedStatus(Mode.LIVE, 1.0)  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.target is not None)
        await pilot.press("R")
        await pilot.pause(0.2)
        assert isinstance(app.screen, TextScreen)
        assert "--otlp grpc://127.0.0.1:4317" in str(app.screen.body)


async def test_r_lists_the_requests_in_flight_above_the_finished_ones() -> None:
    frames = [storm(t) for t in range(20)]
    hog = InFlightRequest("cmpl-hog-7", "/v1/chat/completions", 312.0, True, 4096, 2918, 90)
    for index in (18, 19):
        scrapes = tuple(dataclasses.replace(s, in_flight=(hog,)) for s in frames[index].scrapes)
        frames[index] = dataclasses.replace(frames[index], scrapes=scrapes)
    frames[18] = dataclasses.replace(frames[18], spans=(span("done-1", 1.0, 1.0, 15.0),))
    app = replay_app(frames)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.session.now == 19.0)
        await pilot.press("R")
        await pilot.pause(0.2)
        assert isinstance(app.screen, RequestsScreen)
        shown = screen_text(app)
        assert "IN FLIGHT (1 running" in shown and "cmpl-hog-7" in shown, shown
        assert "5m12s" in shown and "1 request(s) finished" in shown, shown
        assert app.screen.query_one(DataTable).row_count == 1


async def test_r_on_a_real_recording_names_the_generations_that_held_the_slots() -> None:
    frames = slot_hog_frames()
    app = app_on(frames)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.session.now == frames[-1].timestamp)
        await pilot.press("R")
        await pilot.pause(0.3)
        assert isinstance(app.screen, RequestsScreen)
        assert app.screen.query_one(DataTable).row_count == 16
        first = str(app.screen.query_one(DataTable).get_row_at(0)[0])
        assert first.startswith("cmpl-batch-"), first
        held = "\n".join(app.screen.shown.held_up)
        assert "slot-hog" in held and "cmpl-batch-0-0-0" in held, held
