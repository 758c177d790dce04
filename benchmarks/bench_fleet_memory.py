"""A fleet's memory in one process: N local endpoints (benchmarks.endpoint_farm) polled by a
watching session as the dashboard's, one tick per second of a made-up clock, as fast as the
endpoints answer, so the rings of 100 servers fill in a minute instead of seven.

Run: python -m benchmarks.bench_fleet_memory [--servers 100] [--ticks 460] [--trace N]
Prints the RSS (from /proc) and the CPU per tick every 100 ticks, then the rings' bytes; with
`--trace N`, the N largest allocation sites by tracemalloc at the end (tracemalloc slows each
tick about sevenfold and adds its own memory to the RSS).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import tracemalloc

from benchmarks.bench_fleet import endpoints
from vtop.core.ingest.feeds import LiveFeed
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource
from vtop.core.rules.loader import load_rules
from vtop.core.session.diagnose import DiagnoseOptions
from vtop.core.session.fleet import fleet_rows
from vtop.core.session.session import Session, watching_session

MIB = 2**20


def rss_mib() -> float:
    """This process's resident set now."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def fed_session(urls: list[str], ticks: int) -> Session:
    """A watching session after `ticks` polls, one made-up second apart."""
    feed = LiveFeed([VllmHttpSource(url, ScrapeOptions()) for url in urls], None, 1.0)
    session = watching_session(load_rules(), DiagnoseOptions(), len(urls))
    now, cpu = time.time(), time.process_time()
    try:
        for tick in range(1, ticks + 1):
            now += 1.0
            for frame in await feed.frames(now):
                session.ingest(frame)
            fleet_rows(session, now)
            if tick % 100 == 0:
                spent = (time.process_time() - cpu) / tick * 1000
                print(f"tick {tick:4d}: RSS {rss_mib():6.0f} MiB, CPU {spent:5.0f} ms a tick")
    finally:
        await feed.close()
    return session


def main() -> None:
    """Feed, then print what the session holds."""
    parser = argparse.ArgumentParser(prog="bench_fleet_memory")
    parser.add_argument("--servers", type=int, default=100)
    parser.add_argument("--ticks", type=int, default=460)
    parser.add_argument("--trace", type=int, default=0, help="largest allocation sites shown")
    args = parser.parse_args()
    if args.trace:
        tracemalloc.start()
    with endpoints(args.servers) as urls:
        session = asyncio.run(fed_session(urls, args.ticks))
    gc.collect()
    store = session.store
    print(
        f"{args.servers} servers, {args.ticks} ticks: RSS {rss_mib():.0f} MiB; rings "
        f"{store.memory_bytes() / MIB:.1f} MiB ({store.series_count()} series, "
        f"{store.size} ticks the longest)"
    )
    if args.trace:
        snapshot = tracemalloc.take_snapshot()
        print(f"traced {sum(s.size for s in snapshot.statistics('filename')) / MIB:.1f} MiB")
        for stat in snapshot.statistics("lineno")[: args.trace]:
            print(f"{stat.size / MIB:7.1f} MiB {stat.count:8d}  {stat.traceback[0]}")


if __name__ == "__main__":
    main()
