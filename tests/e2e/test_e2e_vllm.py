"""End-to-end on a real vLLM (CPU build, tiny random model): vtop's scrape vs what happened."""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path

import httpx
import pytest

from tests.support.incidents import ADMISSION, SETTLE_S, Load, LoadProcess
from tests.support.prometheus_harness import (
    alerts_fired,
    exported_rules,
    prometheus,
    wait_for_samples,
)
from tests.support.scenarios import LIGHT, SPEC_DECODE, STORM
from tests.support.vllm_harness.server import ServerPool
from tests.support.vtop_cli import vtop
from tests.support.watch import Watcher
from vtop.core.config.cache_config import cache_configs
from vtop.core.config.kv import ModelShape, bytes_per_token, capacity_tokens
from vtop.core.config.server_config import from_log
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.ingest.poller import poll
from vtop.core.ingest.recorder import RecordingReader, RecordingWriter
from vtop.core.ingest.sources.prometheus import past_window
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.manage.bench import Bench, BenchConfig, Lengths
from vtop.core.manage.bench_report import BenchReport
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import (
    DiagnoseOptions,
    diagnose_fleet,
    diagnose_frames,
)
from vtop.text.report import fleet_text_report, json_report

pytestmark = pytest.mark.vllm

STORM_SETTINGS = {
    "max_num_seqs": 16,
    "block_size": 128,
    "kv_capacity_tokens": 1024,
    "num_engines": 1,
}
"""The storm server's settings for the export, so Prometheus gets M1 with every branch."""
# 8 blocks, one kept by vLLM as the null block: 7 usable. A request of 296 tokens holds 3 blocks and
# a preemption frees them at once, so a scrape between steps sees 6/7 or 7/7 at the fullest.
FULLEST_SCRAPE_AT_LEAST = 6 / 7 - 0.01
# Rules hold for a while before they are findings (M1: 5 s; B1, replica imbalance: 10 s) and the
# storm lasts only 10-20 s on this model, so the watch goes on after the load, as an operator's
# diagnosis right after would.
B1_HOLDS_AFTER_S = 12.0


STORM_REQUESTS = 48
"""Two waves of 24 streams: a storm of 10-20 s, so scrapes 0.25 s apart (slower when the machine is
busy) catch the pool at its fullest more than once."""


def storm_load(url: str) -> BenchConfig:
    """24 concurrent streams of ~100+200 tokens: far more than 1,024 KV tokens hold."""
    return BenchConfig(
        url=url,
        concurrency=24,
        num_requests=STORM_REQUESTS,
        prompt_tokens=Lengths(96, 96),
        output_tokens=Lengths(200, 200),
        stall_timeout_s=120,
    )


def assert_the_storm_was_seen(watcher: Watcher, report: BenchReport, started: float) -> None:
    """Waiting, a full pool and preemptions in vtop's scrape, and the server's TTFT tail agrees
    with the client's."""
    assert report.completed == STORM_REQUESTS and report.failed == 0
    assert watcher.peak("waiting") > 0
    assert watcher.peak("kv_usage") >= FULLEST_SCRAPE_AT_LEAST
    assert watcher.peak("preemptions_per_s") > 0
    window = time.time() - started + 1
    store, now = watcher.store, time.time()
    [preempted] = store.sum_by(store.increase, "vllm:num_preemptions_total", now, window).values()
    assert preempted > 0
    # The storm's TTFT is bimodal (the first admitted batch answers in tens of ms, the rest
    # queue for seconds), so the median flips between the modes from run to run; the tail is
    # what the server's histogram and the client both see.
    ttft = "vllm:time_to_first_token_seconds"
    server_ttft = store.histogram_quantile(0.95, ttft, now, window)[()]
    client_ttft = report.ttft.p95
    assert server_ttft is not None and client_ttft is not None
    counted = store.sum_by(store.increase, ttft + "_count", now, window)
    seen = (server_ttft, client_ttft, counted)
    assert client_ttft / 2.5 <= server_ttft <= client_ttft * 2.5, seen


def assert_recording_replays_the_same(watcher: Watcher, path: Path) -> None:
    """Record the real frames, read them back: the diagnosis is the same at the same time."""
    with RecordingWriter(path) as writer:
        for frame in watcher.frames:
            writer.write(frame)
    target, rules, options = watcher.source.target, load_rules(), DiagnoseOptions()
    live = json_report(diagnose_frames(target, watcher.frames, rules, options))
    replayed = json_report(diagnose_frames(target, list(RecordingReader(path)), rules, options))
    assert replayed == live
    assert live["findings"], "the storm left no finding"


async def test_a_storm_seen_directly_and_through_prometheus_with_the_imbalance(
    vllm_pool: ServerPool, tmp_path: Path
) -> None:
    """A real Prometheus scraping a storming and an idle real vLLM: vtop's direct scrape sees the
    storm (and records it), the same primary finding comes through Prometheus for the stormy
    one, and B1 (one queues while its peer idles)."""
    stormy, idle = vllm_pool.get(STORM), vllm_pool.get(LIGHT)
    instances = [url.removeprefix("http://") for url in (stormy.url, idle.url)]
    rule_file = exported_rules(tmp_path, STORM_SETTINGS)
    with prometheus(instances, tmp_path / "prometheus", rule_file) as url:
        wait_for_samples(url, "vllm:num_requests_running", 2)
        started, watcher = time.time(), Watcher(stormy.url, interval=0.25)
        report = await watcher.during(Bench(storm_load(stormy.url)).run(), B1_HOLDS_AFTER_S)
        await watcher.close()
        assert_the_storm_was_seen(watcher, report, started)
        assert_recording_replays_the_same(watcher, tmp_path / "storm.vtoprec")
        rules, options = load_rules(), DiagnoseOptions()
        direct = diagnose_frames(watcher.source.target, watcher.frames, rules, options)
        since = time.time() - started + 5
        frames = await past_window(url, since, 1, ScrapeOptions(), time.time())
        fleet = diagnose_fleet(frames, rules, options)
        storm_alerts = alerts_fired(url, "VllmPreemptionStorm", since)
    by_target = {d.target: d for d in fleet.servers}
    assert sorted(by_target) == sorted(instances)
    through_prometheus = by_target[instances[0]].triage
    assert direct.triage is not None and direct.triage.primary is not None
    assert through_prometheus is not None and through_prometheus.primary is not None
    peaks = {field: watcher.peak(field) for field in ("waiting", "running", "kv_usage")}
    seen = (peaks, len(watcher.frames), direct.triage.findings, direct.triage.unchecked)
    assert through_prometheus.primary.rule.id == direct.triage.primary.rule.id == "M1", seen
    assert storm_alerts == [instances[0]]  # the exported M1 fires in Prometheus for that server
    assert by_target[instances[1]].triage is None, by_target[instances[1]].reason  # no traffic
    assert fleet.fleet is not None
    imbalance = [dict(f.labels)["instance"] for f in fleet.fleet.findings if f.rule.id == "B1"]
    assert imbalance == [instances[0]], fleet_text_report(fleet)


async def test_light_load_has_no_preemptions_and_no_waiting(vllm_pool: ServerPool) -> None:
    server = vllm_pool.get(LIGHT)
    watcher = Watcher(server.url)
    config = BenchConfig(
        url=server.url,
        concurrency=2,
        num_requests=10,
        prompt_tokens=Lengths(32, 32),
        output_tokens=Lengths(32, 32),
    )
    report = await watcher.during(Bench(config).run())
    await watcher.close()
    assert report.completed == 10
    assert watcher.peak("waiting") == 0
    assert watcher.peak("preemptions_per_s") == 0
    assert watcher.peak("generation_tokens_per_s") > 0
    store, now = watcher.store, time.time()
    [generated] = store.sum_by(store.increase, "vllm:generation_tokens_total", now, 600).values()
    assert generated == 10 * 32


async def test_kv_model_reproduces_the_servers_own_kv_cache_size(vllm_pool: ServerPool) -> None:
    server = vllm_pool.get(LIGHT)
    logged, _ = from_log(server.log_text())
    frame = await poll([VllmHttpSource(server.url, ScrapeOptions())], None, time.time())
    [config] = cache_configs(frame.scrapes[0].samples)
    shape = json.loads((server.model_path / "config.json").read_text())
    per_token = bytes_per_token(ModelShape.from_path(server.model_path))
    head_dim = shape["hidden_size"] // shape["num_attention_heads"]
    layers, kv_heads = shape["num_hidden_layers"], shape["num_key_value_heads"]
    assert per_token == layers * kv_heads * head_dim * 2 * 2  # (K,V) x bf16
    served = {name: value for name, value, _ in frame.scrapes[0].server_settings}
    assert served["model_layers"] == layers  # read from config.json by the source, carried
    budget = LIGHT.kv_cache_space_gib * 2**30  # VLLM_CPU_KVCACHE_SPACE on the CPU build
    computed = capacity_tokens(budget, per_token, config.block_size or 16)
    assert computed == logged["kv_capacity_tokens"].value == config.kv_capacity_tokens
    _, facts = from_log(server.log_text())  # GET /version agrees with the startup log
    assert facts.version is not None and frame.scrapes[0].server_version == facts.version


def rejected(url: str) -> float:
    """vllm:admission_rejections_total summed over its reasons, read off /metrics."""
    text = httpx.get(url + "/metrics", timeout=10).text
    lines = [line for line in text.splitlines() if line.startswith(REJECTIONS)]
    return math.fsum(float(line.rsplit(" ", 1)[1]) for line in lines)


REJECTIONS = "vllm:admission_rejections_total"


async def test_work_turned_away_at_admission_is_critical_never_under_loaded(
    vllm_pool: ServerPool,
) -> None:
    """Last, so that its server only replaces ones no later test needs."""
    server = vllm_pool.get(ADMISSION.spec)
    assert ADMISSION.spec.max_num_queued_reqs is not None
    load = LoadProcess(ADMISSION.load, server.url, 100)
    try:
        await asyncio.sleep(SETTLE_S)
        before, deadline = rejected(server.url), time.monotonic() + 45
        while rejected(server.url) <= before and time.monotonic() < deadline:
            await asyncio.sleep(1)
        # the precondition, on vLLM's own counter: requests are turned away
        assert rejected(server.url) > before, f"no request turned away in 45 s ({before})"
        ran = vtop("diagnose", server.url, "--window", "15", "--no-gpu", "--json", "--no-predict")
    finally:
        load.stop()
    report = json.loads(ran.out)
    ids = {f["id"] for f in report["findings"]}
    assert report["primary"]["id"] == "F5" and ran.code == 2, report
    assert not ids & {"P1", "P9", "M7"}, ids  # never "under-loaded" while work is turned away


def deferred_waiting(url: str) -> float:
    """vLLM's own count of requests deferred (LoRA slots, KV transfers), summed over engines."""
    text = httpx.get(url + "/metrics", timeout=10).text
    parsed = ExpositionParser().parse(text)
    return sum(
        s.value
        for s in parsed.samples
        if s.series.name == "vllm:num_requests_waiting_by_reason"
        and s.series.label("reason") == "deferred"
    )


async def test_lora_adapter_slots_are_found_with_the_url_alone_never_a_sequence_cap(
    vllm_pool: ServerPool,
) -> None:
    """Three adapters' clients on one adapter slot (--max-loras 1), two sequence slots: requests
    of the adapters not in the step wait deferred. After the admission test, on its server."""
    server = vllm_pool.get(ADMISSION.spec)
    assert ADMISSION.spec.lora_adapters == 3 and ADMISSION.spec.max_loras == 1
    loads = [
        LoadProcess(Load(1, 64, 64, model=f"lora-{index}"), server.url, 100) for index in range(3)
    ]
    try:
        # the precondition, on vLLM's own gauge: requests wait deferred, not for capacity
        seen: list[float] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(seen) < 3 or min(seen[-3:]) < 1):
            await asyncio.sleep(1)
            seen.append(deferred_waiting(server.url))
        assert len(seen) >= 3 and min(seen[-3:]) >= 1, f"no deferred requests: {seen}"
        for load in loads:
            assert load.process.poll() is None, load.process.communicate()[1][-2000:]
        ran = vtop("diagnose", server.url, "--window", "15", "--no-gpu", "--json", "--no-predict")
    finally:
        for load in loads:
            load.stop()
    report = json.loads(ran.out)
    ids = {f["id"] for f in report["findings"]}
    assert report["primary"]["id"] == "LR1", report
    [change] = report["primary"]["changes"]
    assert (change["flag"], change["current"], change["proposed"]) == ("--max-loras", 1, 3), change
    assert "Q2" not in ids and "Q0" not in ids, ids  # a LoRA queue is no sequence cap


DRAFTED = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"


def draft_counts(url: str) -> tuple[float, float]:
    """vLLM's own (draft tokens, accepted tokens) totals, summed over engines."""
    parsed = ExpositionParser().parse(httpx.get(url + "/metrics", timeout=10).text)
    totals = dict.fromkeys((DRAFTED, ACCEPTED), 0.0)
    for sample in parsed.samples:
        if sample.series.name in totals:
            totals[sample.series.name] += sample.value
    return totals[DRAFTED], totals[ACCEPTED]


async def test_speculative_drafts_that_are_never_accepted_are_found_by_one_shot_diagnose(
    vllm_pool: ServerPool,
) -> None:
    """vLLM's n-gram drafter on sampled text: drafts proposed, almost none accepted. One
    `vtop diagnose URL` (no window given) samples as long as SD1 needs, says so at the start,
    and finds it with the acceptance vLLM counts and plain decoding as the fix."""
    server = vllm_pool.get(SPEC_DECODE)
    # the load outlasts any diagnosis on a slow host; it is stopped as soon as diagnose returns
    load = LoadProcess(Load(4, 256, 64), server.url, 600)
    started = time.monotonic()
    try:
        await asyncio.sleep(SETTLE_S)
        drafted, accepted = draft_counts(server.url)
        await asyncio.sleep(10)
        drafted_now, accepted_now = draft_counts(server.url)
        # the precondition, on vLLM's own counters: drafts proposed, fewer than one in ten kept
        drafts = drafted_now - drafted
        assert drafts >= 100, f"{drafts:.0f} draft tokens in 10 s"
        measured = (accepted_now - accepted) / drafts
        assert measured < 0.05, f"{measured:.1%} of {drafts:.0f} draft tokens accepted"
        ran = vtop("diagnose", server.url, "--no-gpu", "--json", "--no-predict")
        drafted_end, accepted_end = draft_counts(server.url)
        elapsed_s = time.monotonic() - started
        assert load.process.poll() is None, (elapsed_s, load.process.communicate()[1][-2000:])
    finally:
        load.stop()
    assert "up to 35 s, not 15: this server shows what SD1 (30 s)" in ran.err, ran.err
    report = json.loads(ran.out)
    assert report["primary"]["id"] == "SD1" and ran.code == 1, report
    window = (accepted_end - accepted) / (drafted_end - drafted)
    assert report["primary"]["evidence"]["acceptance"] == pytest.approx(window, abs=0.05)
    [change] = report["primary"]["changes"]
    assert change["proposed"] == "(remove --speculative-config)", change
    assert "SD1" not in {u["id"] for u in report["unchecked"]}, report["unchecked"]
