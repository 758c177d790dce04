"""The Prometheus source against a real Prometheus server scraping local /metrics servers."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.support.http_server import Canned, serving, serving_handler
from tests.support.payloads import fixture
from tests.support.prometheus_harness import (
    alerts_fired,
    exported_rules,
    prometheus,
    wait_for_samples,
)
from tests.support.storm_server import IDLE, storm_handler
from vtop.cli import main
from vtop.core.frame import Frame, ScrapeStatus, TargetScrape
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.ingest.recorder import RecordingReader, RecordingWriter
from vtop.core.ingest.sources.prometheus import (
    PrometheusClient,
    PrometheusError,
    PrometheusFeed,
    history_frames,
    past_window,
)
from vtop.core.ingest.sources.vllm_http import ScrapeOptions
from vtop.core.rules.engine import Triage
from vtop.core.rules.export import alert_name
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions, diagnose_fleet
from vtop.core.session.session import Session
from vtop.text.report import fleet_json_report


def host_port(url: str) -> str:
    """http://127.0.0.1:8000 -> 127.0.0.1:8000 (Prometheus' instance label)."""
    return url.removeprefix("http://")


def own_samples(scrape: TargetScrape) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A scrape's samples as {(name, labels): value}."""
    return {(s.series.name, s.series.labels): s.value for s in scrape.samples}


async def live_frame(url: str) -> dict[str, TargetScrape]:
    """One live frame from Prometheus, scrapes by target."""
    feed = PrometheusFeed(PrometheusClient(url, ScrapeOptions()), 1.0)
    try:
        return await next_scrapes(feed)
    finally:
        await feed.close()


async def next_scrapes(feed: PrometheusFeed) -> dict[str, TargetScrape]:
    """The feed's next frame, scrapes by target."""
    [frame] = await feed.frames(time.time())
    return {scrape.target: scrape for scrape in frame.scrapes}


async def until_down(
    url: str, target: str, stop: Callable[[], object], timeout_s: float
) -> TargetScrape:
    """See `target` up, `stop` it, then poll the same feed until Prometheus has it down."""
    feed = PrometheusFeed(PrometheusClient(url, ScrapeOptions()), 1.0)
    try:
        assert (await next_scrapes(feed))[target].ok
        stop()
        deadline = time.time() + timeout_s
        while (state := (await next_scrapes(feed))[target]).ok and time.time() < deadline:
            await asyncio.sleep(0.5)
        return state
    finally:
        await feed.close()


async def history(url: str, since_s: float) -> list[Frame]:
    """The frames of the last `since_s` seconds, one per second, from Prometheus."""
    client = PrometheusClient(url, ScrapeOptions())
    try:
        now = time.time()
        return await history_frames(client, now - since_s, now, 1)
    finally:
        await client.close()


async def ticks(url: str, alerts: bool, count: int = 3) -> tuple[Session, int]:
    """A session fed `count` ticks of the Prometheus feed (alerts or raw), and the bytes read."""
    client = PrometheusClient(url, ScrapeOptions())
    feed = PrometheusFeed(client, 1.0, alerts=alerts)
    session = Session(load_rules(), DiagnoseOptions(), alerts=alerts)
    try:
        for _ in range(count):
            for frame in await feed.frames(time.time()):
                session.ingest(frame)
            await asyncio.sleep(1.0)
    finally:
        await feed.close()
    return session, client.bytes_read


def assert_alerts_mode_shows_what_prometheus_fires(
    url: str, names: list[str], raw: dict[str, Triage | None]
) -> None:
    """`vtop --prometheus URL --alerts`: the findings are the alerts Prometheus fires for the
    exported rules (the same primary as vtop's own triage of the raw series), read at a
    fraction of the bytes of every raw series."""
    session, alerts_bytes = asyncio.run(ticks(url, alerts=True))
    _, raw_bytes = asyncio.run(ticks(url, alerts=False))
    triages = {name: session.target(name).triage for name in names}
    stormy, idle, frozen = (triages[name] for name in names)
    assert stormy is not None and stormy.primary is not None, triages
    assert stormy.primary.rule.id == "M1" and "VllmPreemptionStorm" in stormy.primary.diagnosis
    assert idle is None or not idle.findings, idle
    # the canned payload never changes: requests "running" with no token is a stalled engine
    frozen_raw = raw[names[2]]
    assert frozen is not None and frozen.primary is not None, triages
    assert frozen_raw is not None and frozen_raw.primary is not None
    assert frozen.primary.rule.id == frozen_raw.primary.rule.id == "S1"
    assert session.fleet.triage is not None
    imbalance = [dict(f.labels)["instance"] for f in session.fleet.triage.findings]
    assert imbalance == [names[0]]  # B1, a fleet rule, about the stormy server
    summary = session.target(names[2]).summary
    assert summary is not None and summary.running is not None  # headline figures still read
    assert alerts_bytes < raw_bytes / 3, (alerts_bytes, raw_bytes)


def assert_recording_replays_the_same(url: str, path: Path) -> None:
    """Frames from Prometheus (query results, no /metrics text) recorded and read back give the
    same fleet diagnosis: the recording holds their samples as text."""
    frames = asyncio.run(history(url, 60))
    with RecordingWriter(path) as writer:
        for frame in frames:
            writer.write(frame)
    replayed = list(RecordingReader(path))
    assert [len(s.samples) for f in replayed for s in f.scrapes] == [
        len(s.samples) for f in frames for s in f.scrapes
    ]
    rules, options = load_rules(), DiagnoseOptions()
    live = fleet_json_report(diagnose_fleet(frames, rules, options))
    assert live["fleet"]["findings"], "the storm left no fleet finding"
    assert fleet_json_report(diagnose_fleet(replayed, rules, options)) == live


def test_prometheus_gives_the_fleet_what_direct_scrapes_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ExitStack() as stack:
        storm = stack.enter_context(serving_handler(storm_handler(time.time())))
        idle_stack = stack.enter_context(ExitStack())
        idle = idle_stack.enter_context(serving(Canned(IDLE)))
        real = stack.enter_context(serving(Canned(fixture("underload"))))
        names = [host_port(url) for url in (storm, idle, real)]
        rule_file = exported_rules(tmp_path, {})
        url = stack.enter_context(prometheus(names, tmp_path / "prometheus", rule_file))
        wait_for_samples(url, "vllm:num_requests_running", 3)

        scrapes = asyncio.run(live_frame(url))
        assert sorted(scrapes) == sorted(names)
        assert all(scrape.ok for scrape in scrapes.values())
        direct = ExpositionParser().parse(fixture("underload"))
        expected = {
            (s.series.name, s.series.labels): s.value
            for s in direct.samples
            if s.series.name.startswith("vllm:") or s.series.name == "process_start_time_seconds"
        }
        assert own_samples(scrapes[names[2]]) == expected
        assert scrapes[names[2]].metric_types["vllm:num_preemptions_total"] == "counter"

        time.sleep(14)  # B1 must hold 10 s
        frames = asyncio.run(past_window(url, 60, 1, ScrapeOptions(), time.time()))
        fleet = diagnose_fleet(frames, load_rules(), DiagnoseOptions())
        by_target = {d.target: d for d in fleet.servers}
        stormy = by_target[names[0]].triage
        assert stormy is not None and stormy.primary is not None
        assert stormy.primary.rule.id == "M1"
        alert = alert_name(stormy.primary.rule)
        assert alerts_fired(url, alert, 60) == [names[0]]  # Prometheus agrees
        raw = {target: diagnosis.triage for target, diagnosis in by_target.items()}
        assert_alerts_mode_shows_what_prometheus_fires(url, names, raw)
        assert by_target[names[1]].triage is None  # idle: no traffic, nothing to diagnose
        assert fleet.fleet is not None
        imbalance = [f for f in fleet.fleet.findings if f.rule.id == "B1"]
        assert [dict(f.labels)["instance"] for f in imbalance] == [names[0]]
        assert fleet.exit_code == 2
        assert_recording_replays_the_same(url, tmp_path / "fleet.vtoprec")
        argv = ["diagnose", "--prometheus", url, "--since", "60s", "--step", "1s"]
        assert main([*argv, "--json"]) == 2
        report = json.loads(capsys.readouterr().out)
        assert report["schema"] == "vtop.fleet/2"
        assert [f["id"] for f in report["fleet"]["findings"]] == ["B1"]
        assert main(argv) == 2
        text = capsys.readouterr().out
        assert "ACROSS SERVERS" in text and "B1 uneven load across replicas" in text

        state = asyncio.run(until_down(url, names[1], idle_stack.close, 15))
        assert state.status is ScrapeStatus.UNREACHABLE and "up == 0" in state.error
        # A vtop started now, with that server already down, still lists it (from the last hour).
        fresh = asyncio.run(live_frame(url))
        assert sorted(fresh) == sorted(names)
        assert (
            fresh[names[1]].status is ScrapeStatus.UNREACHABLE
            and "up == 0" in fresh[names[1]].error
        )


def test_not_prometheus_and_unreachable_are_clear_errors() -> None:
    async def ask(url: str) -> None:
        client = PrometheusClient(url, ScrapeOptions(timeout_s=2))
        try:
            await client.query("up", time.time())
        finally:
            await client.close()

    not_prometheus = Canned("<html>nope</html>", status=404, content_type="text/html")
    with (
        serving(not_prometheus) as url,
        pytest.raises(PrometheusError, match="not a Prometheus API answer"),
    ):
        asyncio.run(ask(url))
    with pytest.raises(PrometheusError, match=r"127\.0\.0\.1:9"):
        asyncio.run(ask("http://127.0.0.1:9"))


def test_diagnose_cli_without_prometheus_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["diagnose", "--prometheus", "http://127.0.0.1:9", "--since", "5m"])
    assert code == 3
    assert "vtop: error: http://127.0.0.1:9" in capsys.readouterr().err
