"""A real Prometheus server (Debian package `prometheus`) started by a test on given targets."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.vllm_harness.server import free_port
from vtop.core.rules.export import ExportOptions, export_rules
from vtop.core.rules.loader import load_rules

SCRAPE_INTERVAL_S = 1


def prometheus_binary() -> str:
    """The prometheus executable; the test fails (never skips) without it."""
    found = shutil.which("prometheus")
    if found is None:
        pytest.fail("no `prometheus` on PATH: install the Debian package (scripts/test does)")
    return found


def config_text(targets: list[str], rule_file: Path | None = None) -> str:
    """A scrape config: every target (host:port) in job `vllm`, scraped each second, and the
    rule file evaluated each second."""
    listed = ", ".join(f'"{target}"' for target in targets)
    rules = f"rule_files: ['{rule_file}']\n" if rule_file is not None else ""
    return (
        "global:\n"
        f"  scrape_interval: {SCRAPE_INTERVAL_S}s\n"
        f"  evaluation_interval: {SCRAPE_INTERVAL_S}s\n"
        f"{rules}"
        "scrape_configs:\n"
        "  - job_name: vllm\n"
        f"    static_configs:\n      - targets: [{listed}]\n"
    )


@contextmanager
def prometheus(targets: list[str], workdir: Path, rule_file: Path | None = None) -> Iterator[str]:
    """Run Prometheus on a free loopback port scraping `targets` (and evaluating the rules in
    `rule_file`); yield its URL; always stop it."""
    with prometheus_process(targets, workdir, rule_file) as (url, _):
        yield url


@contextmanager
def prometheus_process(
    targets: list[str],
    workdir: Path,
    rule_file: Path | None = None,
    scrape_config: str | None = None,
) -> Iterator[tuple[str, int]]:
    """As `prometheus`, yielding its URL and pid (its TSDB is `workdir/data`, which may hold
    backfilled blocks already); `scrape_config`, when given, is the whole configuration."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(scrape_config or config_text(targets, rule_file))
    port = free_port()
    argv = [
        prometheus_binary(),
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    with (workdir / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, workdir / "prometheus.log")
        yield url, process.pid
    finally:
        _stop(process)


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Wait for /-/ready; fail with the log if Prometheus exits or never gets ready."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited ({process.returncode}): {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/-/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"prometheus not ready after 60 s: {log.read_text()[-2000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group we started, then SIGKILL if it lingers."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def wait_for_samples(url: str, query: str, count: int, timeout_s: float = 30.0) -> None:
    """Wait until `query` returns at least `count` series (scrapes have landed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answer = httpx.get(url + "/api/v1/query", params={"query": query}, timeout=5).json()
        if len(answer["data"]["result"]) >= count:
            return
        time.sleep(0.5)
    pytest.fail(f"Prometheus never had {count} series for {query}")


def exported_rules(workdir: Path, settings: Mapping[str, float]) -> Path:
    """`vtop rules export` for this Prometheus (1 s scrapes and evaluations), as a file."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "vtop.rules.yml"
    options = ExportOptions(SCRAPE_INTERVAL_S, SCRAPE_INTERVAL_S, settings)
    path.write_text(yaml.safe_dump(export_rules(load_rules(), options), sort_keys=False))
    return path


def alerts_fired(url: str, alert: str, seconds: float) -> list[str]:
    """The instances `alert` fired for in Prometheus during the last `seconds`."""
    query = f'max_over_time(ALERTS{{alertname="{alert}", alertstate="firing"}}[{int(seconds)}s])'
    answer = httpx.get(url + "/api/v1/query", params={"query": query}, timeout=5).json()
    return sorted(item["metric"]["instance"] for item in answer["data"]["result"])


def target_health(url: str) -> dict[str, tuple[str, str]]:
    """Every active target's (health, last error), by scrape URL."""
    answer = httpx.get(url + "/api/v1/targets", timeout=5).json()
    return {
        target["scrapeUrl"]: (target["health"], target["lastError"])
        for target in answer["data"]["activeTargets"]
    }
