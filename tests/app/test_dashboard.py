"""The real Textual app driven by its Pilot: live against a real HTTP server, keys, faults."""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.pilot import Pilot

from tests.support import metrics_process
from tests.support.app import banner, header, replay_app, wait_for
from tests.support.fakes.fake_pynvml import FakeGpu, FakeNvml, NVMLError_GpuIsLost
from tests.support.http_server import Canned, serving
from tests.support.payloads import fixture
from tests.support.storm import storm
from tests.support.vllm_harness.server import free_port
from vtop.core.config.panels import PANELS, widget_id
from vtop.core.config.settings import Settings
from vtop.core.frame import EventKind
from vtop.core.ingest.feeds import LiveFeed, ReplayFeed
from vtop.core.ingest.sources.nvml import NvmlSource
from vtop.core.ingest.sources.process_log import LogTail
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.manage import apply as manage_apply
from vtop.core.manage.process import start, stop
from vtop.core.managed_server import ManagedServer, keep_reaped
from vtop.core.rules.engine import Finding
from vtop.core.rules.loader import load_rules
from vtop.ui import actions as ui_actions
from vtop.ui.app import YOUNG_COLLECTION_EVERY, VtopApp
from vtop.ui.screens.confirm import ConfirmScreen
from vtop.ui.screens.text_screen import TextScreen
from vtop.ui.widgets.banner import Banner
from vtop.ui.widgets.findings import FindingsPanel
from vtop.ui.widgets.header import Header
from vtop.ui.widgets.time_chart import TimeChart

METRICS_PROCESS = Path(metrics_process.__file__)


def live_app(url: str, nvml: NvmlSource | None = None, interval: float = 0.2) -> VtopApp:
    """The dashboard polling one real local endpoint."""
    settings = Settings(urls=(url,), interval_s=interval, timeout_s=2, window_s=1.0)
    source = VllmHttpSource(url, ScrapeOptions(timeout_s=2))
    return VtopApp(settings, LiveFeed([source], nvml, interval), load_rules())


async def test_live_endpoint_shows_state_model_and_gpus() -> None:
    canned = Canned(fixture("underload"), others={"/version": '{"version": "0.32.0"}'})
    with serving(canned) as url:
        app = live_app(url, NvmlSource(FakeNvml([FakeGpu()])))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: "LIVE" in header(app))
            line = header(app)
            assert line.startswith(" LIVE  age ") and "every 0.2s" in line  # state first
            assert url.removeprefix("http://") in line and "vLLM 0.32.0" in line  # GET /version
            assert "engines" not in line  # one engine: said only when there are several
            assert app.session.gpu is not None and app.session.gpu.gpus[0].name == "NVIDIA H200"
            assert banner(app) is None
            await app.feed.close()


async def test_unreachable_endpoint_shows_a_banner_and_recovers() -> None:
    canned = Canned(fixture("underload"))
    with serving(canned) as url:
        app = live_app(url)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: "LIVE" in header(app))
            canned.status = 503
            await wait_for(pilot, lambda: "http error" in (banner(app) or ""))
            assert "retrying in" in (banner(app) or "") and "HTTP ERROR" in header(app)
            canned.status = 200
            await wait_for(pilot, lambda: banner(app) is None, timeout=20)
            assert [m.kind for m in app.session.marks].count(EventKind.RECOVERED) == 1
            await app.feed.close()


async def test_refused_connection_is_unreachable_not_a_crash() -> None:
    with serving(Canned(fixture("underload"))) as url:
        pass
    app = live_app(url)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "unreachable" in (banner(app) or ""))
        said = banner(app) or ""
        assert said.startswith("Nothing answers at ") and "vtop demo" in said, said
        assert "age" not in header(app)  # no answer has an age
        await app.feed.close()


async def test_malformed_lines_are_reported_and_the_rest_is_kept() -> None:
    canned = Canned(fixture("underload") + "vllm:broken{engine= 1\n")
    with serving(canned) as url:
        app = live_app(url)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: "malformed" in (banner(app) or ""))
            assert "1 malformed /metrics line(s) skipped" in (banner(app) or "")
            await wait_for(pilot, lambda: "LIVE" in header(app))
            await app.feed.close()


async def test_restart_is_shown_and_charts_continue() -> None:
    canned = Canned(fixture("after"))
    with serving(canned) as url:
        app = live_app(url)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: "LIVE" in header(app))
            restarted = fixture("idle").replace(
                "process_start_time_seconds 1", "process_start_time_seconds 2"
            )
            canned.body = restarted
            await wait_for(pilot, lambda: "counter_reset" in [m.kind for m in app.session.marks])
            view = app.target
            assert view is not None and len(view.history) >= 2
            await app.feed.close()


async def test_nvml_failing_mid_run_is_shown_in_the_gpu_panel() -> None:
    gpu = FakeGpu()
    with serving(Canned(fixture("underload"))) as url:
        app = live_app(url, NvmlSource(FakeNvml([gpu])))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: app.session.gpu is not None)
            gpu.temperature = NVMLError_GpuIsLost
            gpu.util = NVMLError_GpuIsLost
            await wait_for(pilot, lambda: bool(app.session.gpu and app.session.gpu.gpus[0].errors))
            await wait_for(pilot, lambda: "LIVE" in header(app))
            await app.feed.close()


async def test_keys_help_pause_interval_panels_and_palette() -> None:
    app = replay_app([storm(t) for t in range(20)])
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.target is not None and app.target.triage is not None)
        await pilot.press("question_mark")
        assert isinstance(app.screen, TextScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, TextScreen)
        await pilot.press("p")
        feed = app.feed
        assert isinstance(feed, ReplayFeed) and feed.paused and "PAUSED" in header(app)
        await pilot.press("p", "minus", "minus")  # a replay's + and - change its speed
        assert not feed.paused and feed.speed == 10.0 and "x10" in header(app)
        await pilot.press("plus")
        assert feed.speed == 30.0
        for panel in PANELS:  # each key hides its own panel and nothing else, then shows it
            widget = app.query_one(f"#{widget_id(panel)}")
            others = [app.query_one(f"#{widget_id(p)}") for p in PANELS if p != panel]
            await pilot.press(panel.key)
            assert not widget.display and all(other.display for other in others), panel
            await pilot.press(panel.key)
            assert widget.display, panel
        await pilot.press("ctrl+p")  # Textual's own palette key (no binding shadows it)
        assert isinstance(app.screen, CommandPalette)
        await pilot.press("escape")


async def test_findings_explain_and_diagnosis_screens() -> None:
    app = replay_app([storm(t) for t in range(20)])
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: bool(app.query_one(FindingsPanel).findings))
        panel = app.query_one(FindingsPanel)
        assert panel.findings[0].rule.id == "M1" and panel.selected is panel.findings[0]
        await pilot.press("e")
        assert isinstance(app.screen, TextScreen) and app.screen.title_text.startswith("M1")
        assert "rules/memory.yaml" in str(app.screen.body) or "memory.yaml" in str(app.screen.body)
        await pilot.press("escape", "d")
        assert isinstance(app.screen, TextScreen) and "VERDICT: CRITICAL" in str(app.screen.body)


@pytest.mark.parametrize("size", [(80, 24), (60, 20), (200, 60), (20, 6)])
async def test_any_terminal_size_renders_and_resizes(size: tuple[int, int]) -> None:
    app = replay_app([storm(t) for t in range(20)])
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.target is not None)
        assert app.screen.has_class("-narrow") == (size[0] < 110)
        await pilot.resize_terminal(130, 40)
        await pilot.pause(0.1)
        assert not app.screen.has_class("-narrow")
        await pilot.resize_terminal(*size)
        await pilot.pause(0.1)


async def test_no_color_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = replay_app([storm(t) for t in range(5)])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.1)
        assert app.no_color


async def test_replay_keys_step_jump_and_speed_match_a_fresh_replay() -> None:
    frames = [storm(t) for t in range(40)]
    app = VtopApp(Settings(), ReplayFeed(frames, speed=1.0), load_rules(), clock=time.time)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.target is not None)
        await pilot.press("right_curly_bracket")
        feed = app.feed
        assert isinstance(feed, ReplayFeed) and feed.position == 40
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert feed.paused and feed.position == 38
        expected = replay_app(frames[:38])
        async with expected.run_test() as other:
            await wait_for(other, lambda: expected.session.now == frames[37].timestamp)
            assert [f.key for f in primary_findings(expected)] == [
                f.key for f in primary_findings(app)
            ]
        await pilot.press("right_square_bracket")
        assert feed.position == 39 and app.session.now == frames[38].timestamp
        await pilot.press("s")
        assert feed.speed == 10.0
        await pilot.press("s", "s")
        assert feed.speed == 1.0


def primary_findings(app: VtopApp) -> list[Finding]:
    target = app.target
    assert target is not None and target.triage is not None
    return list(target.triage.findings)


async def test_apply_key_restarts_measures_and_rolls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VTOP_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(ui_actions, "DRAIN_TIMEOUT_S", 1.0)  # the stand-in never drains
    port = free_port()
    argv = [sys.executable, str(METRICS_PROCESS), "--port", str(port), "--max-num-seqs", "16"]
    state, child = start("fake", argv, tmp_path)
    keep_reaped(state, child)
    settings = Settings(urls=(state.url,), interval_s=0.5, window_s=4.0)  # jitter / window small
    source = VllmHttpSource(state.url, ScrapeOptions(timeout_s=2))
    feed = LiveFeed([source], None, 0.5, LogTail(state), state)
    app = VtopApp(settings, feed, load_rules(), server=state)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            panel = app.query_one(FindingsPanel)
            await wait_for(
                pilot, lambda: bool(panel.findings) and panel.findings[0].rule.id == "M1", 40
            )
            await pilot.press("a")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            question = app.screen
            assert isinstance(question, ConfirmScreen)
            assert "- --max-num-seqs 16" in question.body and "+ --max-num-seqs 1" in question.body
            assert "predicted: " in question.body  # the model's figures, or why it has none
            await pilot.press("y")
            await wait_for(pilot, lambda: isinstance(app.screen, TextScreen), timeout=60)
            shown = app.screen
            assert isinstance(shown, TextScreen)
            result = str(shown.body)
            assert "rolled back to the previous flags" in result and "preemptions/s" in result
            assert app.server is not None and app.server.argv == state.argv
            assert app.server.pid != state.pid
            await app.feed.close()
        entries = [json.loads(line) for line in (tmp_path / "audit.log").open()]
        assert [entry["action"] for entry in entries] == ["apply", "verify", "rollback"]
        assert "prediction" in entries[0] and "predicted" in entries[1]  # next to "after"
    finally:
        if app.server is not None:
            stop(app.server, timeout=5)
        stop(state, timeout=5)


async def test_readonly_and_unmanaged_servers_refuse_actions() -> None:
    app = replay_app([storm(t) for t in range(20)])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: bool(app.query_one(FindingsPanel).findings))
        await pilot.press("a")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ConfirmScreen)
        app.actions.server = ManagedServer("x", 1, 1, (), 8000, "", 0.0, None)
        app.actions.readonly = True
        await pilot.press("r")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ConfirmScreen)


async def test_charts_are_rebuilt_when_a_dot_has_passed_and_forced_by_a_step() -> None:
    frames = [storm(t) for t in range(40)]
    app = VtopApp(Settings(), ReplayFeed(frames, speed=0), load_rules(), clock=lambda: 39.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session.now == 39.0)
        chart = app.query_one("#chart-requests", TimeChart)
        target = app.target.target if app.target else ""
        chart.show([([0.0], [1.0])], 60.0, (39.0, target))
        assert not chart.due(40.0, 60.0, target)  # 1 s later: not even a dot (or 2 s) moved
        assert chart.due(41.0, 60.0, target) and chart.due(38.0, 60.0, target)  # time went back
        assert chart.due(40.0, 60.0, "another endpoint")
        await pilot.press("left_square_bracket", "left_square_bracket", "right_square_bracket")
        now = app.session.now or 0.0  # one step forward, 1 s: redrawn because the user stepped
        assert now == 38.0 and not chart.due(now + 1.0, 60.0, target)


async def test_a_dashboard_run_tunes_the_collector_once_its_store_is_built() -> None:
    frames = [storm(t) for t in range(8)]
    clock = frames[-1].timestamp
    app = VtopApp(Settings(), ReplayFeed(frames, speed=0), load_rules(), clock=lambda: clock)
    app.tune_gc = True
    threshold = gc.get_threshold()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.frames_ingested >= 8)
            assert gc.get_freeze_count() > 0
            assert gc.get_threshold()[0] == YOUNG_COLLECTION_EVERY
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


async def test_frames_arriving_while_the_app_shuts_down_are_ignored() -> None:
    app = replay_app([storm(t) for t in range(3)])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.target is not None)
        header_widget = app.query_one(Header)
        app._running = False  # what App._shutdown does first, before it prunes the screens
        await header_widget.remove()
        app.refresh_views()  # a FramesReady handled in that window must not raise
        app._running = True


def broken(*_: object, **__: object) -> None:
    raise RuntimeError("the disk is full")


async def banner_says(app: VtopApp, pilot: Pilot[int], text: str) -> None:
    """The dashboard is still running and its banner carries `text`."""
    banner = app.dashboard.query_one(Banner)
    await wait_for(pilot, lambda: text in str(banner.text or ""), 20)
    assert app.is_running and app.screen is not None


@pytest.mark.parametrize("action", ["apply", "restart", "bundle"])
async def test_a_failing_worker_is_a_banner_never_the_end_of_the_app(
    action: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ui_actions, "DRAIN_TIMEOUT_S", 0.1)
    monkeypatch.setattr(manage_apply, "apply_and_verify", broken)  # imported when used
    monkeypatch.setattr(manage_apply, "switch", broken)
    monkeypatch.setattr(ui_actions, "write_bundle", broken)
    monkeypatch.setattr(ui_actions, "audit", lambda *_, **__: None)
    monkeypatch.setenv("VTOP_STATE_DIR", str(tmp_path))
    app = replay_app([storm(t) for t in range(20)], Settings(bundle_dir=str(tmp_path)))
    app.actions.server = ManagedServer(
        "x", 1, 1, ("vllm", "serve", "--max-num-seqs", "16"), 8000, "", 0.0, None
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: bool(app.query_one(FindingsPanel).findings))
        await pilot.press({"apply": "a", "restart": "r", "bundle": "b"}[action])
        if action != "bundle":
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
        await banner_says(app, pilot, f"{action} failed: the disk is full")
