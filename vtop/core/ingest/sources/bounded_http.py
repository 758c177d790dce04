"""GET with one deadline for the whole response and a byte limit enforced while reading.

httpx's timeout is per read: a body trickling one byte every half second never times out, and
`response.content` holds the whole body (decompressed) before anyone can refuse it. This reads
the body as a stream, counting bytes on the wire and after decoding, and gives up at the limit
or the deadline, whichever comes first.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import httpx


class BodyError(Exception):
    """The body cannot be read: too large, damaged, or in an encoding vtop does not decode."""


class BodyTooLargeError(BodyError):
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
    past `max_bytes` read or decoded, BodyError for a body that cannot be decoded,
    httpx.HTTPError for everything else."""
    return await bounded_request(client, url, headers, timeout_s, max_bytes)


async def bounded_request(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    timeout_s: float,
    max_bytes: int,
    form: dict[str, str] | None = None,
) -> BoundedResponse:
    """As `bounded_get`; with `form`, a POST of it (a query too long for a URL)."""
    try:
        async with asyncio.timeout(timeout_s):
            return await _read(client, url, headers, max_bytes, form)
    except TimeoutError as error:
        raise DeadlineError(f"timed out: no complete answer within {timeout_s:g} s") from error


async def _read(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    max_bytes: int,
    form: dict[str, str] | None,
) -> BoundedResponse:
    """Stream the raw body and inflate it here with a cap on the output, so a gzip bomb costs
    at most the limit (httpx would inflate a whole network chunk, a thousand times its size)."""
    wanted = {**headers, "Accept-Encoding": "gzip, deflate"}
    method = "GET" if form is None else "POST"
    async with client.stream(method, url, headers=wanted, data=form) as response:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise BodyTooLargeError(f"body of {int(declared):,} bytes exceeds {max_bytes:,}")
        inflate = _inflater(response.headers.get("content-encoding", "identity"))
        body = bytearray()
        async for raw in response.aiter_raw():
            if response.num_bytes_downloaded > max_bytes:
                raise BodyTooLargeError(f"body exceeds the limit of {max_bytes:,} bytes")
            body += inflate(raw, max_bytes + 1 - len(body))
            if len(body) > max_bytes:
                raise BodyTooLargeError(f"body exceeds the limit of {max_bytes:,} bytes decoded")
        return BoundedResponse(response.status_code, response.headers, bytes(body))


Inflate = Callable[[bytes, int], bytes]


def _inflater(encoding: str) -> Inflate:
    """Decoder of one content encoding that never returns more than it is allowed."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return lambda data, _room: data
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise BodyError(f"unsupported Content-Encoding {encoding!r}")
    window = 31 if "gzip" in encoding else 15
    state = zlib.decompressobj(window)

    def inflate(data: bytes, room: int) -> bytes:
        try:
            return state.decompress(data, max(room, 1))
        except zlib.error as error:
            raise BodyError(f"damaged {encoding} body: {error}") from error

    return inflate
