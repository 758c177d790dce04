"""80x24 answers first: the primary finding's action and the state stay on screen, whatever
the size, the mode or the panels hidden (snapshots, each with assertions on what is shown)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual.pilot import Pilot

from tests.support.app import on_screen, screen_text, wait_for
from tests.support.demo import STORM, TARGET, app_on, fleet_app, loaded
from tests.support.frames import down_frame
from vtop.core.config.panels import PANELS
from vtop.core.ingest.feeds import ReplayFeed
from vtop.ui.app import VtopApp
from vtop.ui.screens.text_screen import TextScreen

SnapCompare = Callable[..., bool]
SMALL = (80, 24)
ACTION = "CRITICAL M1[engine 0] preemption storm"
FLAG_DIFF = "--max-num-seqs 16 -> 1"


Step = Callable[[Pilot[int]], Awaitable[None]]


def showing(*needles: str, then: Step | None = None) -> Step:
    """A run_before that loads the frames, acts, then asserts the needles are on screen."""

    async def check(pilot: Pilot[int]) -> None:
        await loaded(pilot)
        if then is not None:
            await then(pilot)
        app = pilot.app
        assert isinstance(app, VtopApp)
        text = screen_text(app)
        for needle in needles:
            assert on_screen(needle, text), (needle, text)

    return check


def test_the_storm_at_80x24_shows_the_fix(snap_compare: SnapCompare) -> None:
    run = showing(" REPLAY ", ACTION, FLAG_DIFF, "e: why")
    assert snap_compare(app_on(STORM), terminal_size=SMALL, run_before=run)


def test_a_paused_replay_at_80x24_shows_its_state_position_and_keys(
    snap_compare: SnapCompare,
) -> None:
    async def pause_and_step(pilot: Pilot[int]) -> None:
        await pilot.press("left_square_bracket")  # steps back, pausing
        # the step's toast ("frame 56 of 57") lasts a few seconds: on a busy host it was gone
        # or not by the snapshot; the snapshot is of the screen under it
        pilot.app.clear_notifications()
        await pilot.pause()

    run = showing(" REPLAY ", "PAUSED", ACTION, FLAG_DIFF, "[ back", "] step", then=pause_and_step)
    assert snap_compare(app_on(STORM), terminal_size=SMALL, run_before=run)


def test_an_unreachable_server_at_80x24_says_the_findings_are_old(
    snap_compare: SnapCompare,
) -> None:
    last = STORM[-1].timestamp
    frames = STORM + [down_frame(last + t, TARGET) for t in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)]
    run = showing(" REPLAY ", "UNREACHABLE, last data", "last seen: CRITICAL M1", FLAG_DIFF)
    assert snap_compare(app_on(frames), terminal_size=SMALL, run_before=run)


def test_all_panels_hidden_gives_the_findings_every_row(snap_compare: SnapCompare) -> None:
    async def hide_all(pilot: Pilot[int]) -> None:
        await pilot.press(*(panel.key for panel in PANELS))

    run = showing(ACTION, FLAG_DIFF, "explains", then=hide_all)
    assert snap_compare(app_on(STORM), terminal_size=SMALL, run_before=run)


def test_the_fleet_table_at_80x24_keeps_the_finding_and_severity(
    snap_compare: SnapCompare,
) -> None:
    run = showing("CRIT M1", "unreachable", "finding")
    assert snap_compare(fleet_app(), terminal_size=SMALL, run_before=run)


async def test_the_action_line_comes_back_after_any_resize() -> None:
    app = app_on(STORM)
    assert isinstance(app.feed, ReplayFeed)
    async with app.run_test(size=(200, 60)) as pilot:
        await wait_for(pilot, lambda: on_screen(ACTION, screen_text(app)))
        for size in ((80, 24), (20, 6), (80, 24)):
            await pilot.resize_terminal(*size)
            await pilot.pause(0.3)
            text = screen_text(app)
            if size != (20, 6):
                assert on_screen(ACTION, text) and on_screen(FLAG_DIFF, text), (size, text)
            else:
                assert "REPLAY" in text  # the state leads the header even at 20x6


async def test_the_explain_screen_ranks_the_fixes_by_the_model_s_prediction() -> None:
    app = app_on(STORM)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, TextScreen))
        screen = app.screen
        assert isinstance(screen, TextScreen)
        body = str(screen.body)
        assert "PREDICTED (scheduler model" in body
        ranked = body[body.index("PREDICTED") :]
        assert ranked.index("--num-gpu-blocks-override") < ranked.index("--max-num-seqs")
