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

from tests.support.storm import CACHE_LABELS
from tests.support.storm_server import HEALTHY

OTHER_SETTINGS = CACHE_LABELS.replace('kv_cache_size_tokens="1024"', 'kv_cache_size_tokens="4096"')
"""The cache config of the odd replicas: another KV capacity, so another settings group."""
MAX_HEADER_BYTES = 65536
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


def body(started: float, cache_labels: str) -> bytes:
    """A healthy replica's exposition now."""
    t = time.time() - started + 1
    values = {"g": 200 * t, "n": 2 * t, "ps": 100 * t, "q": 0.002 * t}
    return HEALTHY.format(cache_labels=cache_labels, **values).encode()


def handler(started: float, cache_labels: str) -> object:
    """One replica's connection handler."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                if len(request) > MAX_HEADER_BYTES:
                    break
                path = request.split(b" ", 2)[1] if b" " in request else b""
                if not path.startswith(b"/metrics"):
                    writer.write(NOT_FOUND)
                else:
                    payload = body(started, cache_labels)
                    head = (
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                        f"Content-Length: {len(payload)}\r\n\r\n"
                    )
                    writer.write(head.encode() + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()

    return handle


async def serve(count: int, ports_file: Path, started: float) -> None:
    """Open the listeners, publish their ports, serve until stopped (the soft limit on open
    files raised to the hard one first: a listener and a scraper's connection per replica)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    servers = [
        await asyncio.start_server(
            handler(started, OTHER_SETTINGS if i % 2 else CACHE_LABELS),  # type: ignore[arg-type]
            "127.0.0.1",
            0,
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
