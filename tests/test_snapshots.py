"""Snapshots of every screen and state, from the real recorded storm (fixed clock, UTC)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path

import pytest
from textual.pilot import Pilot

from tests.fakes.fake_pynvml import FakeGpu, FakeNvml
from tests.frames import down_frame
from vtop.core.feeds import ReplayFeed
from vtop.core.frame import Frame, GpuSnapshot, GpuState, ScrapeStatus, TargetScrape
from vtop.core.recorder import RecordingReader
from vtop.core.rules import load_rules
from vtop.core.settings import Settings
from vtop.core.sources.nvml import NvmlSource
from vtop.ui.app import VtopApp

SnapCompare = Callable[..., bool]
WIDE = (160, 48)
MEDIUM = (120, 36)
SMALL = (80, 24)


def demo_frames() -> list[Frame]:
    """The recording shipped as `vtop demo`."""
    with resources.as_file(resources.files("vtop.demo") / "storm.vtoprec") as path:
        return list(RecordingReader(Path(path)))


FRAMES = demo_frames()
APPLIED = next(i for i, f in enumerate(FRAMES) if any(e.kind == "applied" for e in f.events))
STORM = FRAMES[: APPLIED - 10]
TARGET = STORM[-1].scrapes[0].target


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clock times in the header and event log do not depend on the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def app_on(frames: list[Frame]) -> VtopApp:
    """The dashboard on frames, clock fixed at the last one."""
    clock = frames[-1].timestamp
    settings = Settings(urls=(TARGET,))
    return VtopApp(settings, ReplayFeed(frames, speed=0), load_rules(), clock=lambda: clock)


async def loaded(pilot: Pilot[int]) -> None:
    """Wait until every frame is ingested and drawn."""
    app = pilot.app
    assert isinstance(app, VtopApp) and isinstance(app.feed, ReplayFeed)
    for _ in range(100):
        await pilot.pause(0.02)
        if app.feed.finished and app.session.now == app.feed.recorded[-1].timestamp:
            break
    await pilot.pause(0.2)


def with_gpu(frame: Frame, snapshot: GpuSnapshot) -> Frame:
    """A frame with GPU readings added."""
    return dataclasses.replace(frame, gpu=snapshot)


def test_storm(snap_compare: SnapCompare) -> None:
    assert snap_compare(app_on(STORM), terminal_size=WIDE, run_before=loaded)


def test_storm_at_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(app_on(STORM), terminal_size=SMALL, run_before=loaded)


def test_storm_no_color(snap_compare: SnapCompare, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(app_on(STORM), terminal_size=MEDIUM, run_before=loaded)


def test_idle_before_the_load(snap_compare: SnapCompare) -> None:
    assert snap_compare(app_on(FRAMES[:10]), terminal_size=MEDIUM, run_before=loaded)


def test_restarted_with_the_fix(snap_compare: SnapCompare) -> None:
    assert snap_compare(app_on(FRAMES[: APPLIED + 4]), terminal_size=WIDE, run_before=loaded)


def test_after_the_fix(snap_compare: SnapCompare) -> None:
    assert snap_compare(app_on(FRAMES), terminal_size=WIDE, run_before=loaded)


def test_unreachable(snap_compare: SnapCompare) -> None:
    last = STORM[-1].timestamp
    frames = STORM + [down_frame(last + t, TARGET) for t in (1.0, 2.0, 3.0)]
    assert snap_compare(app_on(frames), terminal_size=MEDIUM, run_before=loaded)


def test_no_gpu(snap_compare: SnapCompare) -> None:
    none = GpuSnapshot(GpuState.NO_GPU, message="NVML library not found")
    frames = [*STORM[:-1], with_gpu(STORM[-1], none)]
    assert snap_compare(app_on(frames), terminal_size=WIDE, run_before=loaded)


def test_gpus_with_throttling(snap_compare: SnapCompare) -> None:
    gpus = [FakeGpu(reasons=0x4 | 0x40), FakeGpu(util=12, processes=[])]
    snapshot = NvmlSource(FakeNvml(gpus)).read()
    frames = [*STORM[:-1], with_gpu(STORM[-1], snapshot)]
    assert snap_compare(app_on(frames), terminal_size=WIDE, run_before=loaded)


def test_help_screen(snap_compare: SnapCompare) -> None:
    assert snap_compare(app_on(STORM), press=["question_mark"], terminal_size=SMALL)


def test_explain_screen(snap_compare: SnapCompare) -> None:
    async def explain(pilot: Pilot[int]) -> None:
        await loaded(pilot)
        await pilot.press("e")

    assert snap_compare(app_on(STORM), terminal_size=MEDIUM, run_before=explain)


def test_diagnosis_screen(snap_compare: SnapCompare) -> None:
    async def diagnosis(pilot: Pilot[int]) -> None:
        await loaded(pilot)
        await pilot.press("d")

    assert snap_compare(app_on(STORM), terminal_size=MEDIUM, run_before=diagnosis)


def test_no_snapshot_depends_on_the_local_zone() -> None:
    assert os.environ["TZ"] == "UTC" and time.localtime(0).tm_hour == 0


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


def test_fleet_table(snap_compare: SnapCompare) -> None:
    assert snap_compare(fleet_app(), terminal_size=MEDIUM, run_before=loaded)


def test_fleet_table_at_80x24(snap_compare: SnapCompare) -> None:
    assert snap_compare(fleet_app(), terminal_size=SMALL, run_before=loaded)
