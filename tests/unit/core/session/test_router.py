"""A router in front of the fleet is not a server: its view of each backend, beside the
engine's own latency."""

from __future__ import annotations

import json

from tests.support.frames import frame_from_texts
from tests.support.payloads import fixture
from tests.support.router import EngineMetrics, RouterMetrics
from vtop.core.frame import Frame
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions, diagnose_fleet
from vtop.core.session.fleet import fleet_rows, fleet_summary
from vtop.core.session.session import Session
from vtop.text.report import fleet_json_report, fleet_text_report

ROUTER = "10.0.0.1:8080"
SLOW_PATH = "http://10.0.0.2:8000"
"""A backend 12 s at the router while its engine answers in 2 s."""
HEALTHY = "http://10.0.0.3:8000"
"""A backend 2.2 s at the router, 2 s in its engine."""


def fleet_frames(seconds: int = 20) -> list[Frame]:
    router, slow, healthy = RouterMetrics(), EngineMetrics(), EngineMetrics()
    frames = []
    for tick in range(seconds):
        router.served(SLOW_PATH, 2, 12.0, running=4)
        router.served(HEALTHY, 2, 2.2, running=4)
        slow.served(2, 2.0, running=4)
        healthy.served(2, 2.0, running=4)
        texts = {
            ROUTER: router.text(),
            "10.0.0.2:8000": slow.text(),
            "10.0.0.3:8000": healthy.text(),
        }
        frames.append(frame_from_texts(1000.0 + tick, texts))
    return frames


def test_the_router_is_no_server_and_sees_a_backend_slow_on_the_path() -> None:
    fleet = diagnose_fleet(fleet_frames(), load_rules(), DiagnoseOptions())
    assert sorted(d.target for d in fleet.servers) == ["10.0.0.2:8000", "10.0.0.3:8000"]
    [router] = fleet.routers
    assert router.target == ROUTER
    views = {b.backend: b for b in router.backends}
    assert sorted(views) == [SLOW_PATH, HEALTHY]
    slow, healthy = views[SLOW_PATH], views[HEALTHY]
    assert slow.target == "10.0.0.2:8000" and healthy.target == "10.0.0.3:8000"
    assert slow.router_p99_s is not None and 10 <= slow.router_p99_s <= 30, slow
    assert slow.engine_p99_s is not None and 1.5 <= slow.engine_p99_s <= 2.0, slow
    assert slow.slow_on_the_path and not healthy.slow_on_the_path, (slow, healthy)
    assert slow.qps == 2 and slow.running == 4 and slow.errors_per_s == 0
    assert fleet.exit_code >= 1  # a warning at least, never OK
    text = fleet_text_report(fleet)
    assert "2 vLLM server(s), 1 router(s)" in text
    assert f"ROUTER {ROUTER}" in text and "slow at the router, not in the engine" in text
    report = json.loads(json.dumps(fleet_json_report(fleet)))
    [shown] = report["routers"]
    assert [b["slow_on_the_path"] for b in shown["backends"]] == [True, False]  # by URL


def test_a_vllm_server_is_never_a_router() -> None:
    # real vLLM 0.32 expositions (idle, under load, after) as three servers
    names = ("idle", "underload", "after")
    frames = [
        frame_from_texts(
            1000.0 + tick, {f"10.0.1.{n}:8000": fixture(name) for n, name in enumerate(names)}
        )
        for tick in range(3)
    ]
    fleet = diagnose_fleet(frames, load_rules(), DiagnoseOptions())
    assert len(fleet.servers) == 3 and fleet.routers == []


def test_the_fleet_table_shows_the_router_as_a_router_and_adds_none_of_its_figures() -> None:
    session = Session(load_rules(), DiagnoseOptions(15.0, read_gpus=False))
    frames = fleet_frames()
    for frame in frames:
        session.ingest(frame)
    rows = {row.target: row for row in fleet_rows(session, frames[-1].timestamp)}
    router = rows[ROUTER]
    assert router.state == "router" and router.summary is None, router
    assert router.severity == "warning", router
    assert router.finding == "router of 2 backend(s); 1 slow on the path, not in the engine"
    # the fleet's running is the two engines' 4 + 4, not the router's per-backend copies
    assert fleet_summary(session, list(rows.values())).running == 8
