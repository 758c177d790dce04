"""A fleet never reads green while a server has no verdict, and shows its worst first."""

from __future__ import annotations

from tests.support.frames import TARGET
from tests.support.storm import storm_frames
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.config.server_config import ServerConfig
from vtop.core.frame import Frame, ScrapeStatus, TargetScrape
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import Diagnosis, FleetDiagnosis, diagnose_fleet
from vtop.core.session.fleet import fleet_rows, sort_rows
from vtop.core.session.fleet_verdicts import worst_first
from vtop.core.session.session import Session
from vtop.text.report import fleet_json_report

DOWN = "http://127.0.0.1:9"


def with_a_dead_server(frames: list[Frame]) -> list[Frame]:
    """The frames plus, in each, a server that never answers."""
    dead = TargetScrape(DOWN, ScrapeStatus.UNREACHABLE, error="connection refused")
    return [Frame(f.timestamp, (*f.scrapes, dead), f.gpu) for f in frames]


def test_a_server_without_a_verdict_keeps_the_fleet_exit_code_off_zero() -> None:
    healthy = Diagnosis("a", 0.0, 15.0, None, ServerConfig(), None, reason="unreachable")
    fleet = FleetDiagnosis([healthy], None)
    assert fleet.exit_code == 3
    frames = with_a_dead_server(storm_frames(seconds=20))
    judged = diagnose_fleet(frames, load_rules(), DiagnoseOptions(15.0, read_gpus=False))
    verdicts = {d.target: d.verdict for d in judged.servers}
    assert verdicts[DOWN] == "unknown" and verdicts[TARGET] == "critical", verdicts
    assert judged.exit_code == 2
    assert [d.target for d in worst_first(judged.servers)] == [TARGET, DOWN]
    assert [s["target"] for s in fleet_json_report(judged)["servers"]] == [TARGET, DOWN]


def test_the_table_s_rows_put_the_worst_first_and_never_call_no_data_ok() -> None:
    session = Session(load_rules(), DiagnoseOptions(15.0, read_gpus=False))
    frames = with_a_dead_server(storm_frames(seconds=20))
    for frame in frames:
        session.ingest(frame)
    rows = sort_rows(fleet_rows(session, frames[-1].timestamp), "finding", False)
    assert [row.target for row in rows] == [TARGET, DOWN]
    down = rows[1]
    assert down.severity == "unknown" and down.finding == "no verdict: unreachable", down
