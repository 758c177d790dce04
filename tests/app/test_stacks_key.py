"""`w` in the dashboard: where the engine is, from the real py-spy on a real server process on
this host, shown and kept as an event; in a replay it says why not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import metrics_process
from tests.support.app import replay_app, screen_text, wait_for
from tests.support.storm import storm
from tests.support.vllm_harness.server import free_port
from vtop.core.config.settings import Settings
from vtop.core.frame import EventKind
from vtop.core.ingest.feeds import LiveFeed
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.rules.engine import Finding
from vtop.core.rules.loader import load_rules
from vtop.ui.app import VtopApp
from vtop.ui.keys import UNAVAILABLE
from vtop.ui.screens.text_screen import TextScreen


def standing_in(*flags: str) -> Iterator[tuple[str, int]]:
    """A server process of its own (the storm's /metrics), its URL and pid."""
    port = free_port()
    argv = [sys.executable, str(Path(metrics_process.__file__)), "--port", str(port), *flags]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert process.stdout is not None
        process.stdout.readline()  # "serving ..." once it listens
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/health", timeout=5).status_code == 200
        yield url, process.pid
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture
def stand_in() -> Iterator[tuple[str, int]]:
    yield from standing_in()


@pytest.fixture
def stalled() -> Iterator[tuple[str, int]]:
    """Requests running and every counter still: the stall rule's case."""
    yield from standing_in("--frozen")


def live_app(url: str) -> VtopApp:
    settings = Settings(urls=(url,), interval_s=0.3, timeout_s=2, window_s=1.0)
    feed = LiveFeed([VllmHttpSource(url, ScrapeOptions(timeout_s=2))], None, 0.3)
    return VtopApp(settings, feed, load_rules())


async def test_w_shows_where_the_server_s_process_is_and_keeps_it_as_an_event(
    stand_in: tuple[str, int],
) -> None:
    url, pid = stand_in
    app = live_app(url)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.target is not None)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, TextScreen), 30)
        await pilot.pause(0.2)
        shown = screen_text(app)
        assert "WHERE THE ENGINE IS" in shown and str(pid) in shown, shown
        await wait_for(
            pilot, lambda: any(m.kind is EventKind.STACKS for m in app.session.marks), 10
        )
        [mark] = [m for m in app.session.marks if m.kind is EventKind.STACKS]
        assert mark.target == url and "WHERE THE ENGINE IS" in mark.text
        await app.feed.close()


async def test_a_stall_takes_the_stacks_once_and_its_explanation_shows_them(
    stalled: tuple[str, int],
) -> None:
    url, pid = stalled
    app = live_app(url)
    async with app.run_test(size=(80, 24)) as pilot:

        def stall() -> Finding | None:
            triage = app.target.triage if app.target is not None else None
            return next((f for f in triage.findings if f.rule.id == "S1"), None) if triage else None

        await wait_for(pilot, lambda: stall() is not None, 40)
        await wait_for(pilot, lambda: url in app.actions.whereabouts, 30)
        assert any(str(pid) in line for line in app.actions.whereabouts[url])
        finding = stall()
        assert finding is not None
        assert app.target is not None
        explained = app.actions.explanation(app.session, app.target, finding)
        assert "WHERE THE ENGINE IS" in explained, explained
        await pilot.pause(1.0)  # more frames of the same firing take no more stacks
        taken = [m for m in app.session.marks if m.kind is EventKind.STACKS]
        assert len(taken) == 1, taken
        await app.feed.close()


async def test_w_in_a_replay_says_why_not() -> None:
    app = replay_app([storm(t) for t in range(5)])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.target is not None)
        await pilot.press("w")
        await pilot.pause(0.2)
        said = [str(n.message) for n in app._notifications]
        assert UNAVAILABLE["w"] in said, said
