"""`vtop --prometheus` at fleet scale: raw series, `--alerts` and `--judge prometheus`, on a
backfilled Prometheus.

For each fleet size, the real vLLM 0.32 capture (tests/data, 364 `vllm:` series) is written for
every server at 15 s steps over a few minutes, counters growing, as OpenMetrics; `promtool tsdb
create-blocks-from openmetrics` turns it into TSDB blocks; a real Prometheus serves them. One
server in ten also carries the `ALERTS` series Prometheus writes when the exported M1 fires
(written into the backfill: Prometheus evaluates rules only as time passes, never over
backfilled history). vtop then runs its dashboard's tick (the Prometheus feed's query, the
session's ingest and triage under the fleet's rule budget) at the backfill's last steps, in both
modes, and this prints per tick: the bytes of the API answer, vtop's CPU, Prometheus's CPU and
the wall time.

Run: python -m benchmarks.bench_prometheus_fleet [--servers 10,100,1000] [--ticks 4]
(needs Debian's prometheus and promtool on PATH).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tests.support.payloads import fixture
from tests.support.prometheus_harness import prometheus_process
from vtop.core.ingest.exposition import ExpositionParser
from vtop.core.ingest.sources.prometheus import PrometheusClient, PrometheusFeed
from vtop.core.ingest.sources.prometheus_judged import judged_reader
from vtop.core.ingest.sources.vllm_http import ScrapeOptions
from vtop.core.rules.judge import FleetJudge
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions
from vtop.core.session.session import watching_session

STEP_S = 15.0
STEPS = 12
"""Three minutes of history: a `[1m]` rate has four samples, the 5-minute lookback is covered."""
GROWING = ("_total", "_count", "_sum", "_bucket")
ALERT_EVERY = 10
ALERT_LABELS = 'alertname="VllmPreemptionStorm",alertstate="firing",phase="memory",rule_id="M1",'
ALERT_LABELS += 'severity="critical"'


@dataclass(frozen=True)
class TickCost:
    """One mode's average tick."""

    answer_bytes: float
    vtop_cpu_s: float
    prometheus_cpu_s: float
    wall_s: float
    findings: int
    peak_rss_mib: float
    """The process's peak resident memory (its own process: see `ticks_apart`)."""


def instance(server: int) -> str:
    """A distinct host:port per server."""
    return f"10.{server // 250}.{server % 250}.1:8000"


def escaped(value: str) -> str:
    """A label value as OpenMetrics writes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def write_backfill(out: TextIO, servers: int, start: float) -> int:
    """Every server's capture at each step (family by family, as OpenMetrics orders them)
    plus the ALERTS of one server in ten; the number of samples written."""
    parsed = ExpositionParser().parse(fixture("underload"))
    families: dict[str, list[tuple[str, float]]] = {}
    for sample in parsed.samples:
        labels = ",".join(f'{k}="{escaped(v)}"' for k, v in sample.series.labels)
        families.setdefault(sample.series.name, []).append((labels, sample.value))
    written = 0
    for name, series in families.items():
        out.write(f"# TYPE {name} unknown\n")
        grows = name.endswith(GROWING)
        for server in range(servers):
            where = f'instance="{instance(server)}",job="vllm"'
            for labels, value in series:
                both = f"{labels},{where}" if labels else where
                growth = max(1.0, abs(value) * 0.01) if grows else 0.0
                for step in range(STEPS):
                    out.write(f"{name}{{{both}}} {value + step * growth} {start + step * STEP_S}\n")
                    written += 1
    out.write("# TYPE ALERTS unknown\n")
    for server in range(0, servers, ALERT_EVERY):
        labels = f'{ALERT_LABELS},instance="{instance(server)}",job="vllm"'
        for step in range(STEPS):
            out.write(f"ALERTS{{{labels}}} 1 {start + step * STEP_S}\n")
            written += 1
    out.write("# EOF\n")
    return written


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


MODES = ("raw", "alerts", "judged")
MODE_NAMES = {"raw": "raw series", "alerts": "`--alerts`", "judged": "`--judge prometheus`"}


async def ticks(url: str, pid: int, servers: int, mode: str, at: list[float]) -> TickCost:
    """The dashboard's tick at each time in `at` (the first one, which also asks for the
    catalogue and, judged in Prometheus, reads the last minute, not counted)."""
    client = PrometheusClient(url, ScrapeOptions(timeout_s=300))
    rules = load_rules()
    reader = judged_reader(FleetJudge(rules, STEP_S), STEP_S) if mode == "judged" else None
    feed = PrometheusFeed(client, STEP_S, alerts=mode == "alerts", reader=reader)
    from_prometheus = mode != "raw"
    session = watching_session(
        rules, DiagnoseOptions(read_gpus=False), servers, alerts=from_prometheus
    )
    costs: list[tuple[int, float, float, float]] = []
    try:
        for index, now in enumerate(at):
            bytes_before, cpu, theirs, wall = (
                client.bytes_read,
                time.process_time(),
                cpu_seconds(pid),
                time.perf_counter(),
            )
            for frame in await feed.frames(now):
                session.ingest(frame)
            if index:
                costs.append(
                    (
                        client.bytes_read - bytes_before,
                        time.process_time() - cpu,
                        cpu_seconds(pid) - theirs,
                        time.perf_counter() - wall,
                    )
                )
    finally:
        await feed.close()
    findings = sum(len(view.triage.findings) for view in session.targets.values() if view.triage)
    bytes_read, ours, theirs, wall = (sum(c[i] for c in costs) / len(costs) for i in range(4))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return TickCost(bytes_read, ours, theirs, wall, findings, peak)


def ticks_apart(url: str, pid: int, servers: int, mode: str, at: list[float]) -> TickCost:
    """`ticks` in a process of its own (forked), so its peak memory is its mode's alone."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return pool.apply(_ticks, (url, pid, servers, mode, at))


def _ticks(url: str, pid: int, servers: int, mode: str, at: list[float]) -> TickCost:
    return asyncio.run(ticks(url, pid, servers, mode, at))


@dataclass(frozen=True)
class Backfilled:
    """A Prometheus serving a backfilled fleet."""

    url: str
    pid: int
    end: float
    samples: int


@contextmanager
def backfilled(servers: int, scratch: Path) -> Iterator[Backfilled]:
    """Write, backfill and serve `servers` servers' history ending a minute ago."""
    start = time.time() - 60 - (STEPS - 1) * STEP_S
    source = scratch / "fleet.om"
    with source.open("w") as out:
        samples = write_backfill(out, servers, start)
    data = scratch / "prometheus" / "data"
    data.mkdir(parents=True)
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        check=True,
        capture_output=True,
    )
    source.unlink()
    with prometheus_process([], scratch / "prometheus") as (url, pid):
        yield Backfilled(url, pid, start + (STEPS - 1) * STEP_S, samples)


def measure(servers: int, tick_count: int) -> list[str]:
    """Table rows for one fleet size: raw series, then alerts."""
    rows = []
    with tempfile.TemporaryDirectory() as scratch, backfilled(servers, Path(scratch)) as served:
        at = [served.end - (tick_count - i) * STEP_S for i in range(tick_count + 1)]
        for mode in MODES:
            cost = ticks_apart(served.url, served.pid, servers, mode, at)
            rows.append(
                f"| {servers} | {MODE_NAMES[mode]} | {cost.answer_bytes / 1e6:.2f} MB "
                f"| {cost.vtop_cpu_s * 1000:.0f} ms | {cost.prometheus_cpu_s * 1000:.0f} ms "
                f"| {cost.wall_s * 1000:.0f} ms | {cost.peak_rss_mib:.0f} MiB | {cost.findings} |"
            )
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    """Every size in turn."""
    for tool in ("prometheus", "promtool"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found: install the Debian package prometheus")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--servers", default="10,100,1000")
    parser.add_argument("--ticks", type=int, default=4)
    args = parser.parse_args()
    header = (
        "| servers | mode | answer per tick | vtop CPU per tick | Prometheus CPU per tick "
        "| wall per tick | vtop peak memory | findings |\n|---|---|---|---|---|---|---|---|"
    )
    print(header, flush=True)
    rows = [row for size in args.servers.split(",") for row in measure(int(size), args.ticks)]
    print("\n" + header + "\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
