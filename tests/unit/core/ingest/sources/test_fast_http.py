"""The hand-written /metrics GET: keep-alive, chunked bodies, and None (httpx takes over) for the
rest. Real asyncio servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from tests.support.payloads import fixture
from tests.support.vllm_harness.server import free_port
from vtop.core.frame import ScrapeStatus
from vtop.core.ingest.sources.fast_http import FastGet, FastTooLargeError
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource

Answer = Callable[[bytes], bytes]
BODY = fixture("underload").encode()


def sized(status: str = "200 OK", extra: str = "") -> Answer:
    """Answers with a Content-Length body."""
    length = f"Content-Length: {len(BODY)}\r\n\r\n"
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\n{extra}{length}"
    return lambda request: head.encode() + BODY


def chunked(request: bytes) -> bytes:
    """Answers in three chunks."""
    thirds = [
        BODY[: len(BODY) // 3],
        BODY[len(BODY) // 3 : 2 * len(BODY) // 3],
        BODY[2 * len(BODY) // 3 :],
    ]
    chunks = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in thirds)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
    return head + chunks + b"0\r\n\r\n"


@asynccontextmanager
async def server(answer: Answer, connections: list[int]) -> AsyncIterator[str]:
    """A keep-alive server answering every request with `answer`; counts connections."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while True:
                writer.write(answer(await reader.readuntil(b"\r\n\r\n")))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/metrics"
    finally:
        listener.close()


async def test_keeps_one_connection_and_reads_sized_and_chunked_bodies() -> None:
    for answer in (sized(), chunked):
        connections: list[int] = []
        async with server(answer, connections) as url:
            fast = FastGet(url, 1 << 20)
            for _ in range(3):
                assert await fast.get({}, 2.0) == ("text/plain", BODY)
            await fast.close()
        assert len(connections) == 1


async def test_anything_unusual_is_left_to_httpx() -> None:
    for answer in (sized("401 Unauthorized"), sized(extra="Content-Encoding: gzip\r\n")):
        async with server(answer, []) as url:
            assert await FastGet(url, 1 << 20).get({}, 2.0) is None
    assert await FastGet(f"http://127.0.0.1:{free_port()}/metrics", 1 << 20).get({}, 2.0) is None
    assert not FastGet("https://example.invalid/metrics", 1 << 20).usable


async def test_a_body_over_the_limit_is_refused_not_read_again() -> None:
    for answer in (sized(), chunked):
        async with server(answer, []) as url:
            with pytest.raises(FastTooLargeError):
                await FastGet(url, 100).get({}, 2.0)


async def test_a_server_that_never_answers_times_out_once_not_twice() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)
        writer.close()

    listener = await asyncio.start_server(silent, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    source = VllmHttpSource(url, ScrapeOptions(timeout_s=1.0))
    started = time.monotonic()
    scrape = await source.scrape()
    elapsed = time.monotonic() - started
    await source.close()
    listener.close()
    assert scrape.status is ScrapeStatus.UNREACHABLE and "timed out" in scrape.error
    assert elapsed < 1.8  # one timeout (1 s): the httpx fallback is not asked to wait again


async def test_a_source_on_a_chunked_server_parses_like_the_fixture() -> None:
    async with server(chunked, []) as url:
        source = VllmHttpSource(url.removesuffix("/metrics"), ScrapeOptions(timeout_s=2))
        scrape = await source.scrape()
        await source.close()
    assert scrape.ok and scrape.raw_text == BODY.decode()
    assert len(scrape.samples) > 300
