"""The recording shipped as `vtop demo`, and its storm part."""

from __future__ import annotations

import dataclasses
import time
from importlib import resources
from pathlib import Path

from textual.pilot import Pilot

from vtop.core.config.settings import Settings
from vtop.core.frame import Frame, ScrapeStatus, TargetScrape
from vtop.core.ingest.feeds import ReplayFeed
from vtop.core.ingest.recorder import RecordingReader
from vtop.core.rules.loader import load_rules
from vtop.ui.app import VtopApp


def demo_frames() -> list[Frame]:
    """The recording shipped as `vtop demo`."""
    with resources.as_file(resources.files("vtop.demo") / "storm.vtoprec") as path:
        return list(RecordingReader(Path(path)))


SLOT_HOGS_RECORDING = Path(__file__).parents[1] / "data" / "vllm-0.32-cpu-slot-hogs.vtoprec"
"""A real vLLM 0.32 (CPU, two slots) recorded with its request spans while two rounds of two
400-token generations held both slots and six short requests each waited behind them."""


def slot_hog_frames() -> list[Frame]:
    """The slot-hog recording's frames."""
    return list(RecordingReader(SLOT_HOGS_RECORDING))


FRAMES = demo_frames()
APPLIED = next(i for i, f in enumerate(FRAMES) if any(e.kind == "applied" for e in f.events))
STORM = FRAMES[: APPLIED - 10]
TARGET = STORM[-1].scrapes[0].target


def app_on(frames: list[Frame]) -> VtopApp:
    """The dashboard on frames, clock fixed at the last one."""
    clock = frames[-1].timestamp
    settings = Settings(urls=(frames[-1].scrapes[0].target,))
    return VtopApp(settings, ReplayFeed(frames, speed=0), load_rules(), clock=lambda: clock)


async def loaded(pilot: Pilot[int]) -> None:
    """Wait until every frame is ingested and drawn."""
    app = pilot.app
    assert isinstance(app, VtopApp) and isinstance(app.feed, ReplayFeed)
    deadline = time.monotonic() + 30.0
    while not (app.feed.finished and app.session.now == app.feed.recorded[-1].timestamp):
        assert time.monotonic() < deadline, "the replayed frames were not all ingested in 30 s"
        await pilot.pause(0.02)
    await settled(pilot)


async def settled(pilot: Pilot[int]) -> None:
    """Wait until two renders 0.1 s apart are the same (a table's header takes its columns'
    widths a refresh after its rows do)."""
    shown = pilot.app.export_screenshot()
    for _ in range(30):
        await pilot.pause(0.1)
        again = pilot.app.export_screenshot()
        if again == shown:
            return
        shown = again


def fleet_frames() -> list[Frame]:
    """The storm seen on two replicas, plus a third that refuses connections."""
    down = TargetScrape("http://10.0.0.3:8000", ScrapeStatus.UNREACHABLE, error="refused")
    return [
        dataclasses.replace(
            frame,
            scrapes=(
                frame.scrapes[0],
                dataclasses.replace(frame.scrapes[0], target="http://10.0.0.2:8000"),
                down,
            ),
        )
        for frame in STORM
    ]


def fleet_app() -> VtopApp:
    """The fleet table on three servers."""
    frames = fleet_frames()
    clock = frames[-1].timestamp
    feed = ReplayFeed(frames, speed=0)
    return VtopApp(Settings(urls=(TARGET,)), feed, load_rules(), clock=lambda: clock, fleet=True)
