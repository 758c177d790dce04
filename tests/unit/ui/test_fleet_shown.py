"""The fleet table's value (`vtop/ui/fleet_shown.py`, no app): every server's row sorted worst
first, filtered and grouped as the screen chose, and the fleet line's figures across them."""

from __future__ import annotations

from tests.support.frames import frame_from_texts
from tests.support.router import RouterMetrics
from tests.support.storm import CACHE_LABELS, STORM_TICK
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.rules.loader import load_rules
from vtop.core.session.fleet import SORT_KEYS
from vtop.core.session.session import Session, watching_session
from vtop.core.status import Status
from vtop.ui.fleet_shown import TableChoice, build_fleet

STORMY, CALM = "http://10.0.0.1:8000", "http://10.0.0.2:8000"
ROUTER = "http://10.0.0.9:8001"
QUIET = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0
"""


def fleet_after(seconds: int, more: dict[str, str] | None = None) -> tuple[Session, float]:
    session = watching_session(load_rules(), DiagnoseOptions(read_gpus=False), 2)
    for t in range(seconds):
        stormy = STORM_TICK.format(
            p=3 * t, g=300 * t, n=t, ps=96 * t, gs=300 * t, cache_labels=CACHE_LABELS
        )
        texts = {CALM: QUIET, STORMY: stormy, **(more or {})}
        session.ingest(frame_from_texts(float(t), texts))
    return session, float(seconds - 1)


def test_the_worst_server_comes_first_and_the_line_counts_every_server() -> None:
    session, now = fleet_after(20)
    shown = build_fleet(session, now, "every 1s", TableChoice(SORT_KEYS[0]))
    assert [row.target for row in shown.rows] == [STORMY, CALM]
    assert shown.rows[0].severity is Status.CRITICAL and shown.rows[0].finding.startswith("M1")
    assert shown.line.startswith(" 2 servers, 2 live") and "every 1s" in shown.line


def test_the_filter_and_the_grouping_are_the_screen_s_choice() -> None:
    session, now = fleet_after(20)
    calm = build_fleet(session, now, "", TableChoice(SORT_KEYS[0], filter_text="10.0.0.2"))
    assert [row.target for row in calm.rows] == [CALM]
    grouped = build_fleet(session, now, "", TableChoice(SORT_KEYS[0], group_key="model"))
    assert all(row.opens is not None for row in grouped.rows) and not grouped.engines


def test_a_router_is_named_in_the_line_and_not_counted_as_a_server() -> None:
    router = RouterMetrics()
    router.served(STORMY, 2, 1.0, running=4)
    session, now = fleet_after(20, {ROUTER: router.text()})
    shown = build_fleet(session, now, "", TableChoice(SORT_KEYS[0]))
    assert {row.target for row in shown.rows} == {STORMY, CALM, ROUTER}
    assert shown.line.startswith(" 2 servers, 2 live  "), shown.line
    assert "\n 1 router; across servers: " in shown.line, shown.line
