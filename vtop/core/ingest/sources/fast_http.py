"""A minimal keep-alive HTTP/1.1 GET on asyncio streams, for the /metrics hot path only.

Why by hand: httpx spends about 2 ms of CPU per request in its own Python layers, which at 100
endpoints polled every second is a fifth of a core before any parsing. This reads only the
simple case (plain http, status 200, a Content-Length or chunked body, no encoding); anything
else returns None and the caller asks httpx, which also reports every failure.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

MAX_HEADER_BYTES = 65536
IDLE_REOPEN_S = 2.0
"""Reconnect after this long idle: servers drop idle keep-alive connections (uvicorn after 5 s)."""


class FastTimeoutError(Exception):
    """The server accepted the request but did not answer in time (httpx would wait as long)."""


class FastTooLargeError(Exception):
    """The body passed the byte limit (declared, or while reading chunks)."""


class FastGet:
    """One kept-alive connection to one /metrics URL."""

    def __init__(self, url: str, max_body_bytes: int) -> None:
        parts = urlsplit(url)
        self.usable = parts.scheme == "http" and parts.hostname is not None
        self.host = parts.hostname or ""
        self.port = parts.port or 80
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.max_body_bytes = max_body_bytes
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._used_at = 0.0

    async def get(self, headers: dict[str, str], timeout_s: float) -> tuple[str, bytes] | None:
        """(content type, body) of a plain 200 answer; None for anything else or any error but
        a timeout (FastTimeoutError: asking httpx would double the wait) or a body past the
        limit (FastTooLargeError: it would be read again)."""
        if not self.usable:
            return None
        try:
            async with asyncio.timeout(timeout_s):
                return await self._exchange(headers)
        except TimeoutError as error:
            await self.close()
            raise FastTimeoutError(f"timed out: no answer within {timeout_s:g} s") from error
        except FastTooLargeError:
            await self.close()
            raise
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            await self.close()
            return None

    async def _exchange(self, headers: dict[str, str]) -> tuple[str, bytes] | None:
        """Send the request on the open connection (opening it if needed) and read the answer."""
        if self._streams is not None and time.monotonic() - self._used_at > IDLE_REOPEN_S:
            await self.close()
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        self._used_at = time.monotonic()
        reader, writer = self._streams
        lines = [f"GET {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        status, answer = await _read_head(reader)
        body = await self._read_body(reader, answer)
        if body is None or answer.get("connection", "").lower() == "close":
            await self.close()
        if (
            status != 200
            or body is None
            or answer.get("content-encoding", "identity") != "identity"
        ):
            return None
        return answer.get("content-type", ""), body

    async def _read_body(
        self, reader: asyncio.StreamReader, answer: dict[str, str]
    ) -> bytes | None:
        """The body by Content-Length or chunks; None when neither is given."""
        if "content-length" in answer:
            length = int(answer["content-length"])
            if length > self.max_body_bytes:
                raise FastTooLargeError(f"body of {length:,} bytes exceeds {self.max_body_bytes:,}")
            return await _read_exactly(reader, length)
        if answer.get("transfer-encoding", "").lower() == "chunked":
            return await _read_chunks(reader, self.max_body_bytes)
        return None

    async def close(self) -> None:
        """Drop the connection (the next get opens a new one)."""
        streams, self._streams = self._streams, None
        if streams is not None:
            streams[1].close()


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """Status code and lower-cased headers."""
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_HEADER_BYTES:
        raise ValueError("response head too large")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    answer = {"connection": "close"} if status_line.startswith("HTTP/1.0") else {}
    for line in header_lines:
        name, _, value = line.partition(":")
        if name:
            answer[name.strip().lower()] = value.strip()
    return status, answer


READ_PIECE = 1 << 16


async def _read_exactly(reader: asyncio.StreamReader, length: int) -> bytes:
    """`length` bytes, read a piece at a time (readexactly would hold the whole body in the
    stream's buffer and copy it twice more)."""
    parts: list[bytes] = []
    left = length
    while left > 0:
        part = await reader.read(min(left, READ_PIECE))
        if not part:
            raise asyncio.IncompleteReadError(b"".join(parts), length)
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


async def _read_chunks(reader: asyncio.StreamReader, limit: int) -> bytes:
    """A chunked body (trailers skipped); FastTooLargeError past `limit` bytes."""
    parts: list[bytes] = []
    total = 0
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            return b"".join(parts)
        total += size
        if total > limit:
            raise FastTooLargeError(f"body exceeds the limit of {limit:,} bytes")
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
