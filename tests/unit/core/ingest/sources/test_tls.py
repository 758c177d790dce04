"""The shared TLS context: it reads its certificate authorities at the first TLS connection,
from where httpx would, and verifies as httpx's own context does. A real TLS server on
127.0.0.1 with a self-signed certificate."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import httpx
import pytest

from tests.support.hostile import certificate, gzipped, hostile
from vtop.core.frame import ScrapeStatus
from vtop.core.ingest.sources import tls
from vtop.core.ingest.sources.vllm_http import ScrapeOptions, VllmHttpSource


def authorities(context: ssl.SSLContext) -> int:
    return context.cert_store_stats()["x509_ca"]


async def get(context: ssl.SSLContext, url: str) -> httpx.Response:
    async with httpx.AsyncClient(verify=context, timeout=5) as client:
        return await client.get(f"{url}/metrics")


async def test_a_server_no_authority_vouches_for_is_refused_after_the_bundle_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    context = tls.VerifiesOnFirstUse(ssl.PROTOCOL_TLS_CLIENT)
    assert authorities(context) == 0  # nothing read until a TLS connection starts
    assert context.check_hostname and context.verify_mode is ssl.CERT_REQUIRED
    refused = pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED")
    with hostile(gzipped, tls=tmp_path) as url, refused:
        await get(context, url)
    assert authorities(context) > 100  # certifi's bundle, as httpx reads it


async def test_the_authority_named_by_ssl_cert_file_is_trusted_by_a_scrape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, _ = certificate(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    tls.tls_context.cache_clear()
    try:
        with hostile(gzipped, tls=tmp_path) as url:
            source = VllmHttpSource(url, ScrapeOptions(timeout_s=5))
            scrape = await source.scrape()
            await source.close()
        assert scrape.status is ScrapeStatus.OK and scrape.samples, scrape.error
        assert authorities(tls.tls_context(True)) == 1  # that file, and only it
    finally:
        tls.tls_context.cache_clear()


async def test_insecure_reads_no_authority_and_accepts_the_server(tmp_path: Path) -> None:
    context = tls.tls_context(False)
    with hostile(gzipped, tls=tmp_path) as url:
        response = await get(context, url)
    assert response.status_code == 200 and authorities(context) == 0


async def test_first_connections_at_once_all_wait_for_the_authorities(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """anyio wraps TLS connections in worker threads: none may start before the bundle is in."""
    cert, _ = certificate(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    context = tls.VerifiesOnFirstUse(ssl.PROTOCOL_TLS_CLIENT)
    with hostile(gzipped, tls=tmp_path) as url:
        async with httpx.AsyncClient(verify=context, timeout=10) as client:
            answers = await asyncio.gather(*(client.get(f"{url}/metrics") for _ in range(8)))
    assert [a.status_code for a in answers] == [200] * 8


async def test_an_unreadable_bundle_fails_every_scrape_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-such-ca.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(missing))
    tls.tls_context.cache_clear()
    try:
        with hostile(gzipped, tls=tmp_path) as url:
            source = VllmHttpSource(url, ScrapeOptions(timeout_s=5))
            scrapes = [await source.scrape(), await source.scrape()]
            await source.close()
    finally:
        tls.tls_context.cache_clear()
    for scrape in scrapes:
        assert scrape.status is ScrapeStatus.UNREACHABLE
        assert f"cannot read the certificate authorities in {missing}" in scrape.error
