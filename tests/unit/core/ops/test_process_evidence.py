"""A diagnosis with what the server's processes and log say: the stacks where a finding
collects them or the metrics look idle, the last words where the server does not answer."""

from __future__ import annotations

from pathlib import Path

from vtop.core.config.server_config import ServerConfig
from vtop.core.forensics.classify import Activity, EngineWhereabouts
from vtop.core.forensics.processes import NotVisible
from vtop.core.ops.process_evidence import with_process_evidence
from vtop.core.session.diagnose import NO_TRAFFIC, Diagnosis

ROOT = Path(__file__).resolve().parents[4]
CRASH = (ROOT / "tests" / "data" / "vllm-0.32-cpu-logits-processor-crash.log").read_text()
URL = "http://127.0.0.1:8000"


def without_triage(reason: str) -> Diagnosis:
    return Diagnosis(URL, 0.0, 15.0, None, ServerConfig(), None, reason=reason)


def engine(activity: Activity) -> EngineWhereabouts:
    return EngineWhereabouts(activity, None, None, (), 1.5)


def test_an_idle_looking_server_is_critical_only_when_its_stacks_show_it_stuck() -> None:
    looked: list[str] = []

    def spinning(url: str) -> EngineWhereabouts:
        looked.append(url)
        return engine(Activity.SPINNING)

    stuck = with_process_evidence(without_triage(NO_TRAFFIC), URL, None, spinning)
    assert looked == [URL] and stuck.verdict == "critical" and stuck.exit_code == 2
    idle = with_process_evidence(
        without_triage(NO_TRAFFIC), URL, None, lambda _: engine(Activity.WAITING_FOR_WORK)
    )
    assert idle.whereabouts is None and idle.verdict == "unknown" and idle.exit_code == 3
    hidden = with_process_evidence(
        without_triage(NO_TRAFFIC), URL, None, lambda _: NotVisible("another host")
    )
    assert hidden.whereabouts is None and hidden.verdict == "unknown"


def test_a_dead_server_with_its_log_is_critical_with_its_last_words() -> None:
    def never(url: str) -> EngineWhereabouts:
        raise AssertionError("no stacks to read on a server that does not answer")

    dead = with_process_evidence(without_triage("unreachable"), URL, CRASH, never)
    assert dead.verdict == "critical" and dead.last_words is not None
    assert "InjectedFaultError" in dead.last_words.summary
    alone = with_process_evidence(without_triage("unreachable"), URL, "", never)
    assert alone.verdict == "unknown" and alone.last_words is None
    recorded = with_process_evidence(without_triage("unreachable"), None, CRASH, never)
    assert recorded.last_words is None, "a recording's diagnosis reads no live evidence"
