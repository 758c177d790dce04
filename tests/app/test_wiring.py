"""Each command wired to what the user configured: seeks keep the session's sizing, outages
reach the screen, controls survive --record, settings and --rules reach every command."""

from __future__ import annotations

import asyncio
import json
import socketserver
from pathlib import Path

from tests.support.app import banner, screen_text, wait_for
from tests.support.demo import STORM
from tests.support.hostile import BODY, HEAD, hostile
from tests.support.http_server import Canned, serving
from tests.support.vtop_cli import vtop
from vtop.core.config.settings import Settings
from vtop.core.frame import EventKind
from vtop.core.ingest.feed_status import Control
from vtop.core.ingest.feeds import LiveFeed, RecordingFeed, ReplayFeed
from vtop.core.ingest.recorder import RecordingWriter
from vtop.core.ingest.sources.prometheus import PrometheusClient, PrometheusFeed
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.rules.loader import load_rules
from vtop.core.session.session import RULE_BUDGET, store_ticks_for
from vtop.ui.app import VtopApp

DEMO = Path(__file__).resolve().parents[2] / "vtop" / "demo" / "storm.vtoprec"
URLS = tuple(f"http://10.0.0.{n}:8000" for n in range(1, 40))
FIRES_ALWAYS = """\
rules:
  - id: X9
    title: always fires
    phase: queue
    severity: warning
    expr: vector(1)
    diagnosis: a rule from a --rules directory
"""


async def test_a_replay_seek_keeps_the_rule_budget_history_size_and_retention() -> None:
    settings = Settings(urls=URLS)
    app = VtopApp(settings, ReplayFeed(STORM, speed=0), load_rules(), fleet=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.session.now is not None)
        app.control(Control.JUMP, -30)
        await pilot.pause(0.1)
        assert app.session.rule_budget == RULE_BUDGET
        assert app.session.store.capacity == store_ticks_for(len(URLS))
        assert app.session.store.retention_s == 600.0  # the shipped rules' widest [10m]


async def test_a_prometheus_outage_reaches_the_banner_and_the_event_log() -> None:
    client = PrometheusClient("http://127.0.0.1:9", ScrapeOptions(timeout_s=0.5))
    feed = PrometheusFeed(client, interval=1.0)
    app = VtopApp(Settings(prometheus="http://127.0.0.1:9"), feed, load_rules())
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: bool(app.session.marks))
        assert EventKind.PROMETHEUS_DOWN in {mark.kind for mark in app.session.marks}
        await wait_for(pilot, lambda: "Prometheus unreachable" in screen_text(app))
        await pilot.press("f")
        await wait_for(pilot, lambda: "Prometheus unreachable" in (banner(app) or ""))


def test_recording_keeps_the_live_feeds_speed_keys_and_retry_delay(tmp_path: Path) -> None:
    async def run() -> None:
        source = VllmHttpSource("http://127.0.0.1:9", ScrapeOptions(timeout_s=0.5))
        inner = LiveFeed([source], None, interval=1.0)
        feed = RecordingFeed(inner, RecordingWriter(tmp_path / "r.vtoprec"))
        await feed.frames(1000.0)
        assert feed.status(1000.0).retry_in_s > 0
        assert feed.control(Control.SLOWER).changed and feed.status(1000.0).interval_s > 1.0
        await feed.close()

    asyncio.run(run())


def test_the_api_key_and_verify_tls_settings_are_used(tmp_path: Path) -> None:
    canned = Canned(body=BODY.decode())
    config = tmp_path / "config.toml"
    with serving(canned) as url:
        config.write_text('api_key = "s3cret-key"\n')
        ran = vtop("diagnose", url, "--window", "1", "--no-gpu", env={"VTOP_CONFIG": str(config)})
    sent = {headers.get("Authorization") for headers in canned.seen_headers}
    assert "Bearer s3cret-key" in sent and "s3cret-key" not in ran.text, ran.text
    with hostile(answers, tls=tmp_path) as url:
        checked = vtop("diagnose", url, "--window", "1", "--no-gpu")
        config.write_text("verify_tls = false\n")
        trusted = vtop(
            "diagnose", url, "--window", "1", "--no-gpu", env={"VTOP_CONFIG": str(config)}
        )
    assert checked.code == 3 and "certificate" in checked.out.lower(), checked.text
    assert trusted.code != 3, trusted.text


def answers(handler: socketserver.StreamRequestHandler) -> None:
    """A whole, valid /metrics response."""
    while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
        pass
    head = f"{HEAD}Content-Length: {len(BODY)}\r\n\r\n".encode()
    handler.wfile.write(head + BODY)


def test_bundle_and_tune_take_rules_and_every_command_repeats_it(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "x9.yaml").write_text(FIRES_ALWAYS)
    bundle = tmp_path / "b.tar.gz"
    ran = vtop("bundle", str(DEMO), "-o", str(bundle), "--no-gpu", "--rules", str(extra))
    assert ran.code in (0, 1, 2) and bundle.exists(), ran.text
    opened = vtop("diagnose", str(bundle), "--json", "--no-gpu", "--rules", str(extra))
    assert "X9" in {finding["id"] for finding in json.loads(opened.out)["findings"]}
    missing = str(tmp_path / "missing")
    for command in ("bundle", "tune", "diagnose", "serve", "demo"):
        refused = vtop(*command.split(), "--rules", str(extra), "--rules", missing, "--help")
        assert refused.code == 0 and "--rules" in refused.out, (command, refused.text)
    watching = vtop("--rules", str(extra), "--rules", missing, "--help")
    assert watching.code == 0 and "repeatable" in watching.out
    tuned = vtop("tune", "nothing-managed", "--rules", missing)
    assert tuned.code == 64 and "missing" in tuned.err, tuned.text
