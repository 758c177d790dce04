"""The connection handler of a farm of local /metrics endpoints served by one asyncio loop:
HTTP/1.1 keep-alive, GET /metrics answered with whatever response its endpoint makes now,
anything else 404, a request head past 64 KiB closes the connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

MAX_HEADER_BYTES = 65536
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
Handle = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def metrics_response(body: bytes) -> bytes:
    """A complete 200 answer carrying an exposition."""
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def handler(respond: Callable[[], bytes]) -> Handle:
    """One endpoint's connection handler: `respond()` (a whole HTTP response) per scrape."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                if len(request) > MAX_HEADER_BYTES:
                    break
                path = request.split(b" ", 2)[1] if b" " in request else b""
                writer.write(respond() if path.startswith(b"/metrics") else NOT_FOUND)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()

    return handle
