"""Many local /metrics endpoints in one process, serving the real vLLM 0.32 captures.

Run: python -m benchmarks.endpoint_farm N PORTS_FILE
Listens on N free 127.0.0.1 ports (written to PORTS_FILE, one per line) and answers every GET
/metrics with the 0.32 capture taken under load, its counters and histograms grown a little at
every scrape (as on a busy server: values change, nothing resets); other paths get 404.
HTTP/1.1 keep-alive; loopback only; runs until killed by whoever started it.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path

from tests.support.farm_http import Handle, handler, metrics_response
from tests.support.payloads import fixture

CAPTURE = "underload"
VARIANTS = 600
"""Scrapes with growing values per endpoint (10 minutes at 1 s); then the last one repeats."""
GROWTH = 0.002
CUMULATIVE = ("_total", "_bucket", "_count", "_sum")


def grown(text: str, step: int) -> str:
    """The capture with every cumulative sample grown by `step` x GROWTH of its value."""
    lines = []
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        name = head.split("{", 1)[0]
        if line.startswith("#") or not name.endswith(CUMULATIVE):
            lines.append(line)
        else:
            lines.append(f"{head} {float(value) * (1 + GROWTH * step)!r}")
    return "\n".join(lines) + "\n"


def responses() -> list[bytes]:
    """The growing captures as complete HTTP responses."""
    text = fixture(CAPTURE)
    return [metrics_response(grown(text, step).encode()) for step in range(VARIANTS)]


def endpoint(payloads: list[bytes]) -> Handle:
    """One endpoint's connection handler: the next payload per scrape, the last one repeated."""
    turn = itertools.chain(payloads, itertools.repeat(payloads[-1]))
    return handler(lambda: next(turn))


async def serve(count: int, ports_file: Path) -> None:
    """Open the listeners, publish their ports, serve forever."""
    payloads = responses()
    servers = [await asyncio.start_server(endpoint(payloads), "127.0.0.1", 0) for _ in range(count)]
    ports = [server.sockets[0].getsockname()[1] for server in servers]
    ports_file.write_text("".join(f"{port}\n" for port in ports))
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), Path(sys.argv[2])))
