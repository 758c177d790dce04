"""A fleet of healthy vLLM replicas in one process, for a Prometheus to scrape by the thousand.

Run: python -m tests.support.fleet_farm N PORTS_FILE STARTED
Listens on N free 127.0.0.1 ports (written to PORTS_FILE, one per line, once all listen) and
answers GET /metrics with storm_server.HEALTHY, its counters grown from the time STARTED (so
any number of scrapers see the same server), the odd ports reporting a KV pool four times as
large (two settings groups). HTTP/1.1 keep-alive, loopback only; runs until its starter stops it.
"""

from __future__ import annotations

import asyncio
import resource
import sys
import time
from pathlib import Path

from tests.support.farm_http import Handle, handler, metrics_response
from tests.support.storm import CACHE_LABELS
from tests.support.storm_server import healthy_body

OTHER_SETTINGS = CACHE_LABELS.replace('kv_cache_size_tokens="1024"', 'kv_cache_size_tokens="4096"')
"""The cache config of the odd replicas: another KV capacity, so another settings group."""


def replica(started: float, cache_labels: str) -> Handle:
    """One healthy replica's connection handler: its exposition as of each scrape."""
    return handler(lambda: metrics_response(healthy_body(time.time() - started + 1, cache_labels)))


async def serve(count: int, ports_file: Path, started: float) -> None:
    """Open the listeners, publish their ports, serve until stopped (the soft limit on open
    files raised to the hard one first: a listener and a scraper's connection per replica)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    servers = [
        await asyncio.start_server(
            replica(started, OTHER_SETTINGS if i % 2 else CACHE_LABELS), "127.0.0.1", 0
        )
        for i in range(count)
    ]
    ports = [server.sockets[0].getsockname()[1] for server in servers]
    partial = ports_file.with_suffix(".partial")
    partial.write_text("".join(f"{port}\n" for port in ports))
    partial.rename(ports_file)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])))
