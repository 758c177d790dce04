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
import threading
from typing import Any

import httpx

READING = threading.Lock()
"""anyio starts TLS connections in worker threads: the first few may ask at once."""


class VerifiesOnFirstUse(ssl.SSLContext):
    """A client context with httpx's verification defaults that reads its authorities once,
    when it first wraps a connection."""

    authorities_read = False
    unreadable: str | None = None
    """Why the authorities could not be read (every connection then fails, saying so)."""

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        """Read the authorities, then start the TLS connection."""
        self._read_authorities()
        return super().wrap_bio(*args, **kwargs)

    def wrap_socket(self, sock: socket.socket, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        """Read the authorities, then wrap the socket (the blocking clients' way)."""
        self._read_authorities()
        return super().wrap_socket(sock, *args, **kwargs)

    def _read_authorities(self) -> None:
        """The bundle httpx would read: SSL_CERT_FILE, else SSL_CERT_DIR, else certifi's. One
        that cannot be read fails this connection and every later one as a TLS error naming it
        (the scrape's "connection failed"), never a connection without verification."""
        with READING:
            if not self.authorities_read:
                self.authorities_read = True
                self.unreadable = self._load()
        if self.unreadable is not None:
            raise ssl.SSLError(ssl.SSL_ERROR_SSL, self.unreadable)

    def _load(self) -> str | None:
        """Load the bundle; None, or why it could not be read."""
        cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
        if not cafile and not capath:
            import certifi

            cafile = certifi.where()
        try:
            if cafile:
                self.load_verify_locations(cafile=cafile)
            else:
                self.load_verify_locations(capath=capath)
        except (OSError, ValueError) as error:
            return f"cannot read the certificate authorities in {cafile or capath}: {error}"
        return None


@functools.cache
def tls_context(verify: bool) -> ssl.SSLContext:
    """One TLS context per policy for the whole process (a hundred sources share it)."""
    if verify:
        return VerifiesOnFirstUse(ssl.PROTOCOL_TLS_CLIENT)
    return httpx.create_ssl_context(verify=False)
