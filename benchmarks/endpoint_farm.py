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

from tests.support.payloads import fixture

CAPTURE = "underload"
VARIANTS = 600
"""Scrapes with growing values per endpoint (10 minutes at 1 s); then the last one repeats."""
GROWTH = 0.002
CUMULATIVE = ("_total", "_bucket", "_count", "_sum")
MAX_HEADER_BYTES = 65536


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
    built = []
    text = fixture(CAPTURE)
    for step in range(VARIANTS):
        body = grown(text, step).encode()
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        built.append(head.encode() + body)
    return built


NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


def handler(payloads: list[bytes]) -> object:
    """One endpoint's connection handler: the next payload per scrape, the last one repeated."""
    turn = itertools.chain(payloads, itertools.repeat(payloads[-1]))

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                if len(request) > MAX_HEADER_BYTES:
                    break
                path = request.split(b" ", 2)[1] if b" " in request else b""
                writer.write(next(turn) if path.startswith(b"/metrics") else NOT_FOUND)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()

    return handle


async def serve(count: int, ports_file: Path) -> None:
    """Open the listeners, publish their ports, serve forever."""
    payloads = responses()
    servers = [
        await asyncio.start_server(handler(payloads), "127.0.0.1", 0)  # type: ignore[arg-type]
        for _ in range(count)
    ]
    ports = [server.sockets[0].getsockname()[1] for server in servers]
    ports_file.write_text("".join(f"{port}\n" for port in ports))
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), Path(sys.argv[2])))
