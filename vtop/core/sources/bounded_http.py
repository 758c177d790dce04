"""GET with one deadline for the whole response and a byte limit enforced while reading.

httpx's timeout is per read: a body trickling one byte every half second never times out, and
`response.content` holds the whole body (decompressed) before anyone can refuse it. This reads
the body as a stream, counting bytes on the wire and after decoding, and gives up at the limit
or the deadline, whichever comes first.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx


class BodyTooLargeError(Exception):
    """The body passed the byte limit (on the wire or decompressed)."""


class DeadlineError(Exception):
    """The whole response did not arrive within the deadline."""


@dataclass(frozen=True)
class BoundedResponse:
    """Status, headers and the (decoded) body of a response read within its bounds."""

    status_code: int
    headers: httpx.Headers
    content: bytes

    @property
    def text(self) -> str:
        """The body as text (UTF-8, undecodable bytes replaced)."""
        return self.content.decode("utf-8", errors="replace")


async def bounded_get(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    timeout_s: float,
    max_bytes: int,
) -> BoundedResponse:
    """GET `url`: raise DeadlineError past `timeout_s` for the whole exchange, BodyTooLargeError
    past `max_bytes` read or decoded, httpx.HTTPError for everything else."""
    try:
        async with asyncio.timeout(timeout_s):
            return await _read(client, url, headers, max_bytes)
    except TimeoutError as error:
        raise DeadlineError(f"timed out: no complete answer within {timeout_s:g} s") from error


async def _read(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], max_bytes: int
) -> BoundedResponse:
    """Stream the body, stopping at the limit (a gzip bomb stops after the limit, decoded)."""
    async with client.stream("GET", url, headers=headers) as response:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise BodyTooLargeError(f"body of {int(declared):,} bytes exceeds {max_bytes:,}")
        parts: list[bytes] = []
        decoded = 0
        async for part in response.aiter_bytes():
            decoded += len(part)
            if decoded > max_bytes or response.num_bytes_downloaded > max_bytes:
                raise BodyTooLargeError(f"body exceeds the limit of {max_bytes:,} bytes")
            parts.append(part)
        return BoundedResponse(response.status_code, response.headers, b"".join(parts))
