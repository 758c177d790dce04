"""Misbehaving endpoints: every scrape ends within its deadline and its byte limit, as the CLI."""

from __future__ import annotations

import itertools
import json
import os
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.support.hostile import (
    bomb,
    cut_stream,
    gzip_bomb,
    gzipped,
    hostile,
    huge,
    trickle,
    trickle_chunked,
)
from tests.support.http_server import Canned, QuietHandler, serving, serving_handler
from tests.support.payloads import fixture
from tests.support.terminal import run_in_terminal
from tests.support.vtop_cli import MEASURED, ROOT, Ran, vtop
from vtop.core.ingest.sources.probe import ProbeOptions, ProbeSource
from vtop.core.ingest.sources.vllm_http import MAX_BODY_BYTES, ScrapeOptions, VllmHttpSource
from vtop.core.store.probe_series import failure_kind

TIMEOUT_S = 2.0
STARTUP_S = 4.0
"""Python, vtop's imports and one NVML probe, on a busy 2-core machine."""


def once(url: str) -> Ran:
    """`vtop --plain --once` with a short timeout: one scrape, a line, an exit code."""
    return vtop(
        "--plain", "--once", "--samples", "1", "--insecure", "--timeout", str(TIMEOUT_S), url
    )


@pytest.fixture(scope="module")
def baseline_rss() -> int:
    """Peak RSS of the same command against a well-behaved server."""
    with serving(Canned(body=fixture("underload"))) as url:
        ran = once(url)
    assert ran.code == 0, ran.text
    return ran.peak_rss_bytes


def no_traceback(ran: Ran) -> None:
    assert "Traceback" not in ran.text, ran.text


@pytest.mark.parametrize(
    "behaviour",
    [trickle(sized=True), trickle(sized=False), trickle_chunked],
    ids=["sized", "close", "chunked"],
)
def test_a_trickling_body_times_out_within_the_deadline(behaviour: object) -> None:
    with hostile(behaviour) as url:  # type: ignore[arg-type]
        ran = once(url)
    no_traceback(ran)
    assert ran.code == 3 and "timed out" in ran.out, ran.text
    assert ran.seconds < TIMEOUT_S + STARTUP_S, ran.seconds


def test_a_trickling_body_over_https_times_out_within_the_deadline(tmp_path: Path) -> None:
    with hostile(trickle(sized=True), tls=tmp_path) as url:
        ran = once(url)
    no_traceback(ran)
    assert ran.code == 3 and "timed out" in ran.out, ran.text
    assert ran.seconds < TIMEOUT_S + STARTUP_S, ran.seconds


def test_diagnose_of_a_trickling_endpoint_returns() -> None:
    with hostile(trickle(sized=False)) as url:
        ran = vtop("diagnose", url, "--window", "2", "--timeout", str(TIMEOUT_S), "--no-gpu")
    no_traceback(ran)
    assert ran.code == 3 and "timed out" in ran.out, ran.text
    assert ran.seconds < 2 + 2 * TIMEOUT_S + STARTUP_S, ran.seconds


@pytest.mark.parametrize(
    "behaviour",
    [huge(200 * 1024**2, sized=True), huge(-1, sized=False), bomb],
    ids=["200MB", "endless", "gzip-bomb"],
)
def test_an_oversized_body_is_refused_while_reading(behaviour: object, baseline_rss: int) -> None:
    assert len(gzip_bomb()) < 3 * 1024**2  # made before serving: about 2 MB on the wire
    with hostile(behaviour) as url:  # type: ignore[arg-type]
        ran = once(url)
    no_traceback(ran)
    assert ran.code == 3 and "exceeds" in ran.out, ran.text
    grown = ran.peak_rss_bytes - baseline_rss
    assert grown < 2 * MAX_BODY_BYTES, f"peak RSS grew {grown / 2**20:.0f} MiB"


async def test_a_gzip_body_within_the_limit_is_read() -> None:
    with hostile(gzipped) as url:
        source = VllmHttpSource(url, ScrapeOptions(timeout_s=TIMEOUT_S))
        try:
            scrape = await source.scrape()
        finally:
            await source.close()
    assert scrape.ok and len(scrape.samples) == 420, scrape.error


JUNK_SERIES = 300_000


def junk_payload() -> str:
    """300,000 series not from vLLM ahead of a real vLLM payload (27 MB)."""
    junk = "".join(
        f'junk_metric_total{{shard="{n}",pod="p{n % 97}"}} {n}\n' for n in range(JUNK_SERIES)
    )
    return junk + fixture("underload")


def peak_rss_mib(mode: str, url: str, tmp_path: Path) -> float:
    """Peak RSS of one vtop run on the URL: `--plain`, `diagnose` or the dashboard (in a real
    pseudo-terminal for eight seconds, then `q`), each checked to have read the payload."""
    if mode == "plain":
        ran = vtop("--plain", "--once", "--samples", "2", "--timeout", "20", url, timeout_s=180)
        no_traceback(ran)
        assert ran.code == 0 and "run 4 wait 10" in ran.out, ran.text  # every vLLM series kept
        return ran.peak_rss_bytes / 2**20
    if mode == "diagnose":
        ran = vtop("diagnose", url, "--json", "--window", "2", "--no-gpu", "--timeout", "20")
        no_traceback(ran)
        report = json.loads(ran.out)
        assert report["config"] is not None and ran.code in (0, 1, 2, 3), ran.text
        return ran.peak_rss_bytes / 2**20
    return dashboard_peak_mib(tmp_path, 8.0, url)[0]


def dashboard_peak_mib(tmp_path: Path, seconds: float, *args: str) -> tuple[float, str]:
    """Peak RSS of the dashboard on ARGS in a real 80x24 pseudo-terminal for `seconds`, then
    `q` (it must exit cleanly), and what it drew."""
    peak = tmp_path / f"dashboard-{seconds:.0f}.rss"
    argv = [sys.executable, "-c", MEASURED, str(peak), sys.executable, "-m", "vtop", *args]
    env = {**os.environ, "NO_COLOR": "1", "VTOP_STATE_DIR": str(tmp_path / "state")}
    shown = run_in_terminal(argv, env=env, cwd=ROOT, keys=[(seconds, b"q")], exit_within_s=40)
    assert shown.returncode == 0 and "Traceback" not in shown.text, shown.text[-2000:]
    return int(peak.read_text()) / 2**20, shown.text


@pytest.mark.parametrize("mode", ["plain", "diagnose", "dashboard"])
def test_300k_junk_series_cost_under_three_times_a_clean_payload_s_memory(
    mode: str, tmp_path: Path
) -> None:
    peaks = {}
    for name, body in (("clean", fixture("underload")), ("junk", junk_payload())):
        with serving(Canned(body=body)) as url:
            peaks[name] = peak_rss_mib(mode, url, tmp_path)
    print(f"{mode}: peak RSS in MiB: {peaks}")
    assert peaks["junk"] < 3 * peaks["clean"], f"{mode}: peak RSS in MiB: {peaks}"


def exploded_payload() -> str:
    """A real vLLM payload behind 300,000 series of a vLLM family whose labels explode (a
    label per request, say): every one of them a series vtop would keep."""
    exploded = "".join(f'vllm:junk_total{{request="{n}"}} {n}\n' for n in range(JUNK_SERIES))
    return exploded + fixture("underload")


@pytest.mark.parametrize("mode", ["plain", "diagnose"])
def test_a_scrape_over_the_sample_limit_is_refused_in_bounded_memory(
    mode: str, tmp_path: Path
) -> None:
    with serving(Canned(body=fixture("underload"))) as url:
        clean = peak_rss_mib(mode, url, tmp_path)
    with serving(Canned(body=exploded_payload())) as url:
        if mode == "plain":
            ran = vtop("--plain", "--once", "--samples", "2", "--timeout", "20", url)
        else:
            ran = vtop("diagnose", url, "--window", "2", "--no-gpu", "--timeout", "20")
    no_traceback(ran)
    said = " ".join(ran.text.split())
    assert "holds more than 50,000 samples" in said and "sample_limit" in said, ran.text
    assert ran.code == 3 if mode == "diagnose" else ran.code != 0, ran.text
    exploded = ran.peak_rss_bytes / 2**20
    print(f"{mode}: peak RSS in MiB: clean {clean:.0f}, 300,000 exploded series {exploded:.0f}")
    assert exploded < 3 * clean, f"{mode}: clean {clean:.0f} MiB, exploded {exploded:.0f} MiB"


CHURNED_PER_SCRAPE = 20_000


def churning_handler() -> type[BaseHTTPRequestHandler]:
    """A /metrics whose 20,000 junk series are new at every scrape (a label per scrape), ahead
    of a real vLLM payload."""
    scrapes = itertools.count()

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            n = next(scrapes)
            junk = "".join(
                f'churn_total{{scrape="{n}",i="{i}"}} {i}\n' for i in range(CHURNED_PER_SCRAPE)
            )
            self.reply(200, (junk + fixture("underload")).encode())

    return Handler


def test_junk_series_that_change_every_scrape_hold_memory_flat() -> None:
    peaks = {}
    with serving_handler(churning_handler()) as url:
        for samples in (3, 15):
            ran = vtop(
                "--plain",
                "--once",
                "--samples",
                str(samples),
                "--interval",
                "0.3",
                url,
                timeout_s=240,
            )
            no_traceback(ran)
            assert ran.code == 0 and "run 4 wait 10" in ran.out, ran.text
            peaks[samples] = ran.peak_rss_bytes / 2**20
    print(f"peak RSS in MiB by scrapes taken: {peaks}")
    assert peaks[15] < 1.2 * peaks[3], f"peak RSS in MiB by scrapes taken: {peaks}"


def test_the_dashboard_holds_memory_flat_under_junk_series_that_change_every_scrape(
    tmp_path: Path,
) -> None:
    peaks = {}
    with serving_handler(churning_handler()) as url:
        for seconds in (6.0, 20.0):
            peak, drawn = dashboard_peak_mib(tmp_path, seconds, "--interval", "0.3", url)
            # it read the payload: watching its first window, then live
            assert "WATCHING" in drawn or "LIVE" in drawn, drawn[-2000:]
            peaks[seconds] = peak
    print(f"dashboard peak RSS in MiB by seconds shown: {peaks}")
    assert peaks[20.0] < 1.2 * peaks[6.0], f"dashboard peak RSS in MiB by seconds: {peaks}"


async def test_a_stream_cut_after_its_head_is_a_cut_with_what_arrived() -> None:
    with hostile(cut_stream) as url:
        source = ProbeSource(url, ProbeOptions(timeout_s=TIMEOUT_S))
        try:
            probe = await source.probe()
        finally:
            await source.close()
    assert probe.status == 200 and not probe.finished, probe
    assert probe.tokens == 2 and probe.reads and probe.first_token_s is not None, probe
    assert "(cut)" in probe.error and failure_kind(probe) == "cut", probe


def test_a_bare_type_line_is_a_parse_error_not_a_traceback() -> None:
    with serving(Canned(body="# TYPE\n" + fixture("underload"))) as url:
        ran = vtop("diagnose", url, "--window", "1", "--no-gpu", "--timeout", str(TIMEOUT_S))
    no_traceback(ran)
    assert ran.code in (0, 1, 2), ran.text
