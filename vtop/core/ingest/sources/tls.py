"""The client TLS context every scrape and probe shares, its certificate authorities read at
the first TLS connection.

httpx makes a verifying context by reading a CA bundle (SSL_CERT_FILE, SSL_CERT_DIR, else
certifi's), which costs 1.7 MiB resident and 50 ms of CPU whether or not a URL is HTTPS. The
servers vtop watches are usually plain HTTP on the host, so the verifying context here reads the
same bundle, chosen the same way, only when a TLS connection starts: asyncio and anyio both
start one with `wrap_bio`. Without verification (`--insecure`) httpx's own context reads nothing.
"""

from __future__ import annotations

import functools
import os
import socket
import ssl
from typing import Any

import httpx


class VerifiesOnFirstUse(ssl.SSLContext):
    """A client context with httpx's verification defaults that reads its authorities once,
    when it first wraps a connection."""

    authorities_read = False

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        """Read the authorities, then start the TLS connection."""
        self._read_authorities()
        return super().wrap_bio(*args, **kwargs)

    def wrap_socket(self, sock: socket.socket, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        """Read the authorities, then wrap the socket (the blocking clients' way)."""
        self._read_authorities()
        return super().wrap_socket(sock, *args, **kwargs)

    def _read_authorities(self) -> None:
        """The bundle httpx would read: SSL_CERT_FILE, else SSL_CERT_DIR, else certifi's. Marked
        read before reading, so a bundle that cannot be read fails this connection (as an error
        the scrape reports) and verification of later ones, never succeeds without it."""
        if self.authorities_read:
            return
        self.authorities_read = True
        cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
        if cafile:
            self.load_verify_locations(cafile=cafile)
        elif capath:
            self.load_verify_locations(capath=capath)
        else:
            import certifi

            self.load_verify_locations(cafile=certifi.where())


@functools.cache
def tls_context(verify: bool) -> ssl.SSLContext:
    """One TLS context per policy for the whole process (a hundred sources share it)."""
    if verify:
        return VerifiesOnFirstUse(ssl.PROTOCOL_TLS_CLIENT)
    return httpx.create_ssl_context(verify=False)
