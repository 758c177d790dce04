"""The fleet by namespace and by model: replicas by state, roll-ups of the merged distribution,
and the worst replica each group opens."""

from __future__ import annotations

import re

import pytest

from tests.support.frames import frame_from_texts
from tests.support.payloads import fixture
from vtop.core.config.effective_config import DiagnoseOptions
from vtop.core.frame import Frame, ScrapeStatus, TargetScrape
from vtop.core.rules.loader import load_rules
from vtop.core.session.fleet import fleet_rows, sort_rows
from vtop.core.session.fleet_groups import NO_VALUE, group_rows, rolled_up
from vtop.core.session.session import Session

SMALL, LARGE, DOWN = "10.2.0.1:8000", "10.2.0.2:8000", "10.2.0.3:8000"


def labelled(text: str, namespace: str, kv: float, capacity_tokens: int) -> str:
    """A real vLLM 0.32 exposition with the namespace Kubernetes discovery adds to every series,
    its KV use and its cache size (cache_config_info's kv_cache_size_tokens) set."""
    lines = []
    for line in text.splitlines():
        if line.startswith("vllm:kv_cache_usage_perc{"):
            line = line.rsplit(" ", 1)[0] + f" {kv}"
        line = re.sub(
            r'kv_cache_size_tokens="\d+"', f'kv_cache_size_tokens="{capacity_tokens}"', line
        )
        if line.startswith("vllm:") and "{" in line:
            line = line.replace("{", f'{{namespace="{namespace}",', 1)
        lines.append(line)
    return "\n".join(lines) + "\n"


def fleet_frames() -> list[Frame]:
    frames = []
    for tick, name in enumerate(("underload", "after", "after")):
        scrapes = frame_from_texts(
            1000.0 + tick,
            {
                SMALL: labelled(fixture(name), "chat", 0.9, 16_000),
                LARGE: labelled(fixture(name), "chat", 0.1, 144_000),
            },
        ).scrapes
        down = TargetScrape(DOWN, ScrapeStatus.UNREACHABLE, error="connection refused")
        frames.append(Frame(1000.0 + tick, (*scrapes, down)))
    return frames


@pytest.fixture
def session() -> Session:
    judged = Session(load_rules(), DiagnoseOptions(15.0, read_gpus=False))
    for frame in fleet_frames():
        judged.ingest(frame)
    return judged


def test_a_namespace_rolls_its_replicas_up_and_opens_the_worst(session: Session) -> None:
    rows = fleet_rows(session, 1002.0)
    groups = {row.target: row for row in group_rows(session, rows, "namespace")}
    assert sorted(groups) == ["namespace (none) (1)", "namespace chat (2)"]
    chat = groups["namespace chat (2)"]
    assert chat.state == "2 live"
    assert chat.summary is not None
    # KV weighted by capacity: (0.9 * 16,000 + 0.1 * 144,000) / 160,000, not the mean 0.5
    assert chat.summary.kv_usage == pytest.approx(0.18), chat.summary
    members = [row for row in rows if row.target in (SMALL, LARGE)]
    assert chat.summary.running == sum(r.summary.running or 0 for r in members if r.summary)
    assert chat.opens == sort_rows(members, "finding", False)[0].target
    lonely = groups[f"namespace {NO_VALUE} (1)"]
    assert lonely.state == "1 unreachable" and lonely.severity == "unknown"
    assert lonely.opens == DOWN and lonely.finding == "1/1: no verdict: unreachable"


def test_by_model_and_back_to_each_server(session: Session) -> None:
    rows = fleet_rows(session, 1002.0)
    by_model = group_rows(session, rows, "model")
    assert len(by_model) == 2  # the fixture's model, and the down server's unknown one
    assert group_rows(session, rows, "server") == rows


def test_the_ttft_of_a_group_is_its_replicas_buckets_merged(session: Session) -> None:
    rows = [row for row in fleet_rows(session, 1002.0) if row.target in (SMALL, LARGE)]
    merged = rolled_up(session, rows, "chat")
    assert merged is not None
    one = rolled_up(session, rows[:1], "one")
    assert one is not None
    assert merged.ttft_p99_s is not None
    # two replicas with the same distribution merge to that distribution
    assert merged.ttft_p99_s == one.ttft_p99_s
