"""Fleet scale: 10 / 50 / 100 local endpoints serving the real vLLM 0.32 capture.

Part 1 times vtop's tick in this process (poll every endpoint + ingest + rules within the
budget + the fleet table's rows): wall and CPU per tick at 1 s.
Part 2 runs vtop's dashboard (fleet table, tmux 80x24), vllm-htop and vllmstat (PyPI; both poll
several URLs) side by side on the same endpoints at 1 s and prints each one's share of a core.
Part 3 runs vtop's dashboard alone: on a small machine the three tools and the endpoints contend
for the same cores, which makes each one's CPU time per tick larger.
The endpoints live in another process (benchmarks.endpoint_farm), loopback only.

Run: python -m benchmarks.bench_fleet [--sizes 10,50,100] [--seconds 30] [--parts 1,2,3]
[--repeat N] [--warm-up S] (needs tmux; vllm-htop and vllmstat on PATH or VLLM_HTOP=/path,
VLLMSTAT=/path). Parts 2 and 3 count CPU after a warm-up of 10 s by default, while vtop's rings
are still short; at 100 servers they are full after 400 s, so `--warm-up 420` measures the
steady state (each tool's RSS at the end is printed beside its share).
Side by side on a small machine the ratio moves from run to run (the tools and the endpoints
contend for the same cores); `--repeat N` runs part 2 N times at each size and prints the
median and the range of vtop's ratio to each tool.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench_dashboard_cpu import STARTUP_S, Tmux, usage, vllmstat_command
from vtop.core.ingest.feeds import LiveFeed
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions
from vtop.core.session.fleet import fleet_rows
from vtop.core.session.session import watching_session

WARM_TICKS = 5


@contextmanager
def endpoints(count: int) -> Iterator[list[str]]:
    """`count` local endpoints in a child process; stopped (by its pid) on exit."""
    with tempfile.TemporaryDirectory() as scratch:
        ports = Path(scratch) / "ports"
        farm = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.endpoint_farm", str(count), str(ports)]
        )
        try:
            while not ports.exists() or len(ports.read_text().split()) < count:
                if farm.poll() is not None:
                    raise SystemExit("the endpoint farm exited")
                time.sleep(0.1)
            yield [f"http://127.0.0.1:{port}" for port in ports.read_text().split()]
        finally:
            farm.terminate()
            farm.wait(timeout=10)


async def tick_costs(urls: list[str], ticks: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each 1-s tick, after a warm-up."""
    feed = LiveFeed([VllmHttpSource(url, ScrapeOptions()) for url in urls], None, 1.0)
    rules, options = load_rules(), DiagnoseOptions()
    session = watching_session(rules, options, len(urls))
    walls, cpus = [], []
    try:
        for tick in range(WARM_TICKS + ticks):
            started, cpu = time.perf_counter(), time.process_time()
            for frame in await feed.frames(time.time()):
                session.ingest(frame)
            fleet_rows(session, time.time())
            if tick >= WARM_TICKS:
                walls.append(time.perf_counter() - started)
                cpus.append(time.process_time() - cpu)
            await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - started)))
    finally:
        await feed.close()
    return walls, cpus


def print_ticks(count: int, walls: list[float], cpus: list[float]) -> None:
    """One line of tick figures."""
    p95 = sorted(walls)[int(0.95 * (len(walls) - 1))]
    cpu = statistics.mean(cpus)
    print(
        f"{count:4d} endpoints: tick wall mean {statistics.mean(walls) * 1000:6.0f} ms, "
        f"p95 {p95 * 1000:6.0f} ms; CPU {cpu * 1000:6.0f} ms per tick = {cpu * 100:5.1f}% "
        f"of a core at 1 Hz ({cpu / count * 1000:.2f} ms per endpoint)"
    )


def htop_command() -> str:
    """The vllm-htop executable."""
    found = os.environ.get("VLLM_HTOP") or shutil.which("vllm-htop")
    if not found:
        raise SystemExit("vllm-htop not found: pip install vllm-htop, or set VLLM_HTOP")
    return found


def tool_commands(urls: list[str], config: Path) -> dict[str, list[str]]:
    """The three tools polling every endpoint each second."""
    return {
        "vtop": [sys.executable, "-m", "vtop", *urls, "--interval", "1"],
        "vllm-htop": [htop_command(), "--url", *urls, "--interval", "1", "--no-gpu-detect"],
        "vllmstat": [vllmstat_command(), *[arg for url in urls for arg in ("-u", url)], "-i", "1"],
    }


@dataclass(frozen=True)
class ToolShare:
    """A tool's share of one core over the measurement, and its RSS at the end of it."""

    share: float
    rss_mib: float


async def tools_cpu(
    urls: list[str], seconds: float, alone: bool = False, warm_up_s: float = STARTUP_S
) -> dict[str, ToolShare]:
    """Each tool's share of one core over `seconds` after `warm_up_s`, all running at once (or
    vtop `alone`)."""
    tmux = Tmux()
    with tempfile.TemporaryDirectory() as scratch:
        commands = tool_commands(urls, Path(scratch))
        if alone:
            commands = {"vtop": commands["vtop"]}
        try:
            pids = {name: tmux.start(name, command) for name, command in commands.items()}
            await asyncio.sleep(warm_up_s)
            before = {name: usage(pid) for name, pid in pids.items()}
            await asyncio.sleep(seconds)
            after = {name: usage(pid) for name, pid in pids.items()}
            alive = {name: bool(tmux.screen(name).strip()) for name in commands}
        finally:
            tmux.stop()
    return {
        name: ToolShare((after[name].cpu_s - before[name].cpu_s) / seconds, after[name].rss_mib)
        for name in after
        if alive[name]
    }


def print_tools(count: int, tools: dict[str, ToolShare], flush: bool = False) -> None:
    """One line per size: each tool's % of a core (and RSS) and vtop's ratio to it."""
    cells = [f"{name} {t.share * 100:5.1f}% {t.rss_mib:4.0f} MiB" for name, t in tools.items()]
    vtop = tools["vtop"].share if "vtop" in tools else 0.0
    ratios = [
        f"vtop/{name} {vtop / t.share:.2f}x"
        for name, t in tools.items()
        if name != "vtop" and t.share
    ]
    print(
        f"{count:4d} endpoints: " + "; ".join(filter(None, [", ".join(cells), ", ".join(ratios)])),
        flush=flush,
    )


def print_spread(count: int, runs: list[dict[str, ToolShare]]) -> None:
    """The median and the range of vtop's ratio to each tool over repeated side-by-side runs."""
    tools = [name for name in runs[0] if name != "vtop"]
    cells = []
    for name in tools:
        ratios = sorted(
            run["vtop"].share / run[name].share
            for run in runs
            if name in run and run[name].share and "vtop" in run
        )
        if ratios:
            cells.append(
                f"vtop/{name} median {statistics.median(ratios):.2f}x "
                f"({ratios[0]:.2f}x to {ratios[-1]:.2f}x)"
            )
    print(f"{count:4d} endpoints, {len(runs)} runs: " + "; ".join(cells))


def main() -> None:
    """The parts asked for at each size."""
    parser = argparse.ArgumentParser(prog="bench_fleet")
    parser.add_argument("--sizes", default="10,50,100")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--parts", default="1,2,3", help="which parts to run (default: 1,2,3)")
    parser.add_argument("--repeat", type=int, default=1, help="part 2's runs at each size")
    parser.add_argument(
        "--warm-up",
        type=float,
        default=STARTUP_S,
        help="seconds each dashboard runs before its CPU is counted, parts 2 and 3 (default: "
        f"{STARTUP_S:.0f}; the rings of 100 servers fill in 400 s: 420 measures them full)",
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    parts = {int(part) for part in args.parts.split(",")}
    if 1 in parts:
        ticks_part(sizes, args.seconds)
    if 2 in parts:
        side_by_side_part(sizes, args.seconds, args.warm_up, max(1, args.repeat))
    if 3 in parts:
        alone_part(sizes, args.seconds, args.warm_up)


def ticks_part(sizes: list[int], seconds: float) -> None:
    """Part 1: vtop's tick in this process at each size."""
    print("part 1: vtop's tick (poll + ingest + rules in budget + fleet rows), this process")
    for count in sizes:
        with endpoints(count) as urls:
            print_ticks(count, *asyncio.run(tick_costs(urls, int(seconds))))


def side_by_side_part(sizes: list[int], seconds: float, warm_up_s: float, repeat: int) -> None:
    """Part 2: the three dashboards side by side, `repeat` times at each size."""
    print(f"part 2: the dashboards side by side, {seconds:.0f} s at 1 s after {warm_up_s:.0f} s")
    for count in sizes:
        runs: list[dict[str, ToolShare]] = []
        with endpoints(count) as urls:
            for _ in range(repeat):
                runs.append(asyncio.run(tools_cpu(urls, seconds, warm_up_s=warm_up_s)))
                print_tools(count, runs[-1], flush=True)
        if len(runs) > 1:
            print_spread(count, runs)


def alone_part(sizes: list[int], seconds: float, warm_up_s: float) -> None:
    """Part 3: vtop's dashboard alone at each size."""
    print("part 3: vtop's dashboard alone (only the endpoints besides it)")
    for count in sizes:
        with endpoints(count) as urls:
            print_tools(count, asyncio.run(tools_cpu(urls, seconds, True, warm_up_s)))


if __name__ == "__main__":
    main()
