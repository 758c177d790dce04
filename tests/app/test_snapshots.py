"""Snapshots of every screen and state, from the real recorded storm (fixed clock, UTC)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator

import pytest
from textual.pilot import Pilot

from tests.support.demo import APPLIED, FRAMES, STORM, TARGET, app_on, fleet_app, loaded
from tests.support.fakes.fake_pynvml import FakeGpu, FakeNvml
from tests.support.frames import down_frame
from vtop.core.frame import Frame, GpuSnapshot, GpuStatus
from vtop.core.ingest.sources.nvml import NvmlSource

SnapCompare = Callable[..., bool]
WIDE = (160, 48)
MEDIUM = (120, 36)
SMALL = (80, 24)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clock times in the header and event log do not depend on the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def with_gpu(frame: Frame, snapshot: GpuSnapshot) -> Frame:
    """A frame with GPU readings added."""
    return dataclasses.replace(frame, gpu=snapshot)


def test_storm(snap_compare: SnapCompare) -> None:
    assert snap_compare(app_on(STORM), terminal_size=WIDE, run_before=loaded)


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
    none = GpuSnapshot(GpuStatus.NO_GPU, message="NVML library not found")
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


def test_fleet_table(snap_compare: SnapCompare) -> None:
    assert snap_compare(fleet_app(), terminal_size=MEDIUM, run_before=loaded)
